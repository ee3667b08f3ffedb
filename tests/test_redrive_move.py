"""RMQ.REDRIVE (the v4 contract, for rmq-gateway's redrive): dead messages claimed out of dead{Q}
into moving{Q} (oldest death first, with group and priority), stale claims taken again,
claims dropped with DONE; a mover that dies between claim and push loses nothing; every
error changes nothing; replication; RMQ.QUEUES."""

from helpers import expect_error_unchanged, now_ms, rmq_info, start_replica, wait_replica_matches, zs
from server_support import wait_for


def kill(r, q, *msgs):
    """Push, deliver and fail each message to dead, in order (one death per message)."""
    for m in msgs:
        got = r.execute_command("RMQ.POP", q)
        assert got and got[0][0] == m.encode(), got
        assert r.execute_command("RMQ.NACK", q, m, "DEAD") == b"dead"


def claim(r, q, *opts):
    return r.execute_command("RMQ.REDRIVE", q, "CLAIM", *opts)


def claims(r, q):
    return {m: v.split(b" ", 2) for m, v in r.hgetall(f"moving{{{q}}}").items()}


def test_claim_takes_oldest_deaths_with_group_and_priority(r):
    r.execute_command("RMQ.PUSH", "s", "PRIORITY", 9, "GROUP", "g1", "a")
    r.execute_command("RMQ.PUSH", "s", "PRIORITY", 5, "b")
    r.execute_command("RMQ.PUSH", "s", "PRIORITY", 1, "c")
    kill(r, "s", "a", "b", "c")
    t0 = now_ms(r)
    assert claim(r, "s", "COUNT", 2) == [[b"a", b"g1", 9], [b"b", None, 5]]
    t1 = now_ms(r)
    assert list(zs(r, "dead{s}")) == [b"c"]
    c = claims(r, "s")
    assert set(c) == {b"a", b"b"}
    assert all(t0 <= int(v[0]) <= t1 for v in c.values())
    assert c[b"a"][1:] == [b"9", b"g1"] and c[b"b"][1:] == [b"5", b""]
    # Fresh claims are not taken again; the rest of the dead is.
    assert claim(r, "s") == [[b"c", None, 1]]
    assert r.exists("dead{s}") == 0
    assert claim(r, "s") == []
    assert rmq_info(r, "s")["dead"] == 0
    # DONE drops claims (once), and the last one takes the key with it.
    assert r.execute_command("RMQ.REDRIVE", "s", "DONE", "a", "b", "zz") == 2
    assert r.execute_command("RMQ.REDRIVE", "s", "DONE", "a") == 0
    assert r.execute_command("RMQ.REDRIVE", "s", "DONE", "c") == 1
    assert r.exists("moving{s}", "meta{s}", "s") == 0
    assert r.execute_command("RMQ.QUEUES", "MATCH", "s") == [b"0", []]


def test_a_mover_that_dies_between_claim_and_push_loses_nothing(r):
    """Mover 1 claims and dies; mover 2's claims skip the fresh claim, then take it again
    once it is stale, and push it to the target (another queue) exactly once."""
    for m in ("m1", "m2"):
        r.execute_command("RMQ.PUSH", "src", "DELAY", 0, "GROUP", "g", m)
        kill(r, "src", m)
    first = claim(r, "src", "COUNT", 1, "STALE", 400)
    assert first == [[b"m1", b"g", None]]
    # Mover 1 dies here. Mover 2 takes the other dead message at once, not m1's claim.
    t0 = now_ms(r)
    assert claim(r, "src", "STALE", 400) == [[b"m2", b"g", None]]
    r.execute_command("RMQ.PUSH", "dst", "DELAY", 0, "GROUP", "g", "m2")
    r.execute_command("RMQ.REDRIVE", "src", "DONE", "m2")
    wait_for(lambda: now_ms(r) > t0 + 1000, timeout=30, what="the claim goes stale")
    again = claim(r, "src", "STALE", 400)
    assert again == [[b"m1", b"g", None]]
    assert int(claims(r, "src")[b"m1"][0]) >= t0 + 1000, "claimed anew at the new time"
    r.execute_command("RMQ.PUSH", "dst", "DELAY", 0, "GROUP", "g", "m1")
    assert r.execute_command("RMQ.REDRIVE", "src", "DONE", "m1") == 1
    # A late push of m1 by mover 1 merges into the waiting copy (content identity).
    assert r.execute_command("RMQ.PUSH", "dst", "DELAY", 0, "GROUP", "g", "m1") == 0
    assert rmq_info(r, "dst")["waiting"] == 2
    assert r.exists("moving{src}", "dead{src}") == 0


def test_count_bounds_stale_and_new_together(r):
    for m in ("a", "b", "c"):
        r.execute_command("RMQ.PUSH", "n", "DELAY", 0, m)
    kill(r, "n", "a", "b", "c")
    assert claim(r, "n", "COUNT", 2, "STALE", 1) == [[b"a", None, None], [b"b", None, None]]
    t = max(int(v[0]) for v in claims(r, "n").values())
    wait_for(lambda: now_ms(r) > t + 5, timeout=30, what="claims go stale")
    # Stale claims first, and COUNT covers both kinds: c stays dead.
    assert sorted(e[0] for e in claim(r, "n", "COUNT", 2, "STALE", 1)) == [b"a", b"b"]
    assert list(zs(r, "dead{n}")) == [b"c"]
    assert claim(r, "n", "COUNT", 3, "STALE", 100000) == [[b"c", None, None]]


def test_errors_change_nothing(r):
    r.execute_command("RMQ.PUSH", "e", "DELAY", 0, "m")
    kill(r, "e", "m")
    for args, words in [
        (("e",), "wrong number"),
        (("e", "MOVE"), "expected CLAIM or DONE"),
        (("e", "CLAIM", "COUNT", 0), "invalid COUNT"),
        (("e", "CLAIM", "COUNT", 10001), "invalid COUNT"),
        (("e", "CLAIM", "STALE", 0), "invalid STALE"),
        (("e", "CLAIM", "STALE", "x"), "invalid STALE"),
        (("e", "CLAIM", "STALE"), "STALE needs a value"),
        (("e", "CLAIM", "NOW"), "syntax"),
        (("e", "DONE"), "wrong number"),
        (("e{x}", "CLAIM"), "queue name"),
    ]:
        expect_error_unchanged(r, "RMQ.REDRIVE", *args, contains=[words])
    r.set("moving{w}", "x")
    expect_error_unchanged(r, "RMQ.REDRIVE", "w", "CLAIM", contains=["WRONGTYPE"])
    expect_error_unchanged(r, "RMQ.REDRIVE", "w", "DONE", "m", contains=["WRONGTYPE"])
    r.set("dead{v}", "x")
    expect_error_unchanged(r, "RMQ.REDRIVE", "v", "CLAIM", contains=["WRONGTYPE"])


def test_queues_lists_a_queue_with_claims_only(r):
    r.execute_command("RMQ.PUSH", "only", "DELAY", 0, "m")
    kill(r, "only", "m")
    claim(r, "only")
    assert r.exists("only", "dead{only}", "meta{only}") == 0
    assert r.execute_command("RMQ.QUEUES", "MATCH", "only") == [b"0", [b"only"]]


def test_replicates(start_server):
    primary = start_server()
    replica = start_replica(start_server, primary)
    p, rc = primary.client(), replica.client()
    p.execute_command("RMQ.PUSH", "rs", "DELAY", 0, "GROUP", "g", "a")
    p.execute_command("RMQ.PUSH", "rs", "DELAY", 0, "b")
    kill(p, "rs", "a", "b")
    assert len(claim(p, "rs")) == 2
    assert wait_replica_matches(p, rc, timeout=10)
    assert set(claims(rc, "rs")) == {b"a", b"b"}
    p.execute_command("RMQ.REDRIVE", "rs", "DONE", "a")
    assert wait_replica_matches(p, rc, timeout=10)
    assert set(claims(rc, "rs")) == {b"b"}
    # A promoted replica takes the stale claim again.
    rc.replicaof("NO", "ONE")
    wait_for(lambda: now_ms(rc) > int(claims(rc, "rs")[b"b"][0]) + 50, timeout=30, what="stale")
    assert claim(rc, "rs", "STALE", 10) == [[b"b", None, None]]
