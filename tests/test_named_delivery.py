"""Named deliveries: RMQ.POP ... IDS names each delivery, and RMQ.ACKID / NACKID / EXTENDID
end, fail or extend exactly that delivery (docs/COMMANDS.md). A name is the queue's own,
never given twice, and the name of a delivery that has ended (acked, failed, expired,
dead, its queue deleted) changes nothing. Its record (`n<id>` in `meta{Q}`) goes with the
delivery on every path."""

import threading
import time

import pytest
import redis

from helpers import (ack, expect_error_unchanged, nack, now_ms, pop, pop_expire_sweep, prep,
                     push, snapshot, start_replica, wait_until, watched_exec, zs)


def pop_ids(r, q, *opts):
    """RMQ.POP ... IDS: a list of (message, deliveries, id), shape-checked."""
    rep = r.execute_command("RMQ.POP", q, *opts, "IDS")
    if rep is None:
        return None
    for e in rep:
        assert isinstance(e, list) and len(e) == 3, f"a named entry is [message, deliveries, id]: {e!r}"
        assert isinstance(e[0], bytes) and isinstance(e[1], int) and isinstance(e[2], int), e
    return [tuple(e) for e in rep]


def ackid(r, q, *ids):
    return r.execute_command("RMQ.ACKID", q, *ids)


def nackid(r, q, i, *opts):
    return r.execute_command("RMQ.NACKID", q, i, *opts)


def extendid(r, q, i, ms):
    return r.execute_command("RMQ.EXTENDID", q, i, ms)


def names(r, q):
    """The named-delivery records of `q`: {id: message}."""
    return {int(k[1:]): v for k, v in r.hgetall(f"meta{{{q}}}").items() if k[:1] == b"n"}


def test_a_named_pop_replies_ids_and_keeps_their_records(r):
    t0 = now_ms(r)
    push(r, "q", "PRIORITY", 1, "a", "b")
    push(r, "q", "PRIORITY", 5, "c")
    got = pop_ids(r, "q", "COUNT", 2)
    t1 = now_ms(r)
    assert [(m, d) for m, d, _ in got] == [(b"c", 1), (b"b", 1)] or [(m, d) for m, d, _ in got] == [(b"c", 1), (b"a", 1)]
    (m1, _, i1), (m2, _, i2) = got
    assert i2 == i1 + 1, "one pop's names follow each other"
    epoch = 1_700_000_000_000
    assert (t0 - epoch) << 10 <= i1 <= (t1 - epoch) << 10, "a queue's first name comes from the server clock"
    assert i2 < 2 ** 53, "exact in a double (Lua, JavaScript, JSON)"
    assert names(r, "q") == {i1: m1, i2: m2}
    assert r.hget("meta{q}", "ids") == str(i2).encode(), "the last name given"
    assert r.hget("meta{q}", b"f" + m1) == f"#{i1}:1:5".encode()
    (m3, _, i3), = pop_ids(r, "q")
    assert i3 > i2, "and later ones follow them (at least the clock's share)"


def test_a_pop_without_ids_is_unchanged_and_names_nothing(r):
    push(r, "q", "DELAY", 0, "a")
    assert pop(r, "q") == [(b"a", 1)]
    assert r.hgetall("meta{q}") == {b"kind": b"fixed"}
    assert ack(r, "q", "a") == 1
    assert r.dbsize() == 0


def test_ackid_ends_exactly_the_named_delivery(r):
    push(r, "q", "DELAY", 0, "a", "b")
    (ma, _, ia), (mb, _, ib) = pop_ids(r, "q", "COUNT", 2)
    assert ackid(r, "q", ia, ia, 12345) == 1, "each delivery once; an unknown name ends nothing"
    assert zs(r, prep("q")).keys() == {mb}
    assert names(r, "q") == {ib: mb}
    before = snapshot(r)
    assert ackid(r, "q", ia) == 0
    assert snapshot(r) == before
    assert ackid(r, "q", ib) == 1
    assert r.dbsize() == 0, "the last delivery's end leaves no keys"


def test_nackid_requeues_delays_and_kills(r):
    r.execute_command("RMQ.POLICY", "q", "SET", "retries", 1)
    push(r, "q", "DELAY", 0, "a")
    (_, _, i1), = pop_ids(r, "q")
    t0 = now_ms(r)
    assert nackid(r, "q", i1, "DELAY", 60000) == b"requeued"
    t1 = now_ms(r)
    assert t0 + 60000 <= zs(r, "q")[b"a"] <= t1 + 60000
    assert names(r, "q") == {}
    assert nackid(r, "q", i1) is None, "an ended delivery's name fails nothing"
    push(r, "q", "DELAY", 0, "a")
    (_, d, i2), = pop_ids(r, "q")
    assert d == 2 and i2 > i1
    assert nackid(r, "q", i2) == b"dead", "its retries used up"
    assert zs(r, "dead{q}").keys() == {b"a"} and names(r, "q") == {}
    push(r, "q", "DELAY", 0, "b")
    (_, _, i3), = pop_ids(r, "q")
    assert nackid(r, "q", i3, "DEAD") == b"dead"
    assert names(r, "q") == {}
    assert r.execute_command("RMQ.INFO", "q")[r.execute_command("RMQ.INFO", "q").index(b"nacked") + 1] == 3


def test_extendid_sets_the_named_deliverys_lease(r):
    push(r, "q", "DELAY", 0, "a")
    (_, _, i), = pop_ids(r, "q", "LEASE", 1000)
    t0 = now_ms(r)
    d = extendid(r, "q", i, 50000)
    t1 = now_ms(r)
    assert t0 + 50000 <= d <= t1 + 50000 and zs(r, prep("q"))[b"a"] == d
    assert ackid(r, "q", i) == 1
    assert extendid(r, "q", i, 50000) is None


@pytest.mark.parametrize("bad", ["0", "-1", "x", "1.5", "", "9007199254740993", "01x"])
def test_a_malformed_id_is_refused_and_changes_nothing(r, bad):
    push(r, "q", "DELAY", 0, "a")
    pop_ids(r, "q")
    text = "invalid id: must be a delivery id: an integer from 1 to 2^53"
    assert expect_error_unchanged(r, "RMQ.ACKID", "q", 1, bad) == text
    assert expect_error_unchanged(r, "RMQ.NACKID", "q", bad) == text
    assert expect_error_unchanged(r, "RMQ.EXTENDID", "q", bad, 100) == text


def test_argument_errors(r):
    for args in (["RMQ.ACKID", "q"], ["RMQ.NACKID", "q"], ["RMQ.EXTENDID", "q", 1], ["RMQ.EXTENDID", "q", 1, 2, 3]):
        expect_error_unchanged(r, *args, contains="wrong number of arguments")
    expect_error_unchanged(r, "RMQ.NACKID", "q", 1, "LATER", contains="syntax error")
    expect_error_unchanged(r, "RMQ.NACKID", "q", 1, "DELAY", "-1", contains="DELAY")
    expect_error_unchanged(r, "RMQ.EXTENDID", "q", 1, 0, contains="EXTEND ms")
    expect_error_unchanged(r, "RMQ.ACKID", "{q}", 1, contains="invalid queue name")
    expect_error_unchanged(r, "RMQ.TPOP", "t", 1, "IDS", contains="syntax error")


@pytest.mark.parametrize("key", ["q", "meta{q}", "prepare{q}"])
def test_wrongtype(r, key):
    r.set(key, "x")
    for args in (["RMQ.ACKID", "q", 1], ["RMQ.NACKID", "q", 1], ["RMQ.EXTENDID", "q", 1, 5], ["RMQ.POP", "q", "IDS"]):
        expect_error_unchanged(r, *args, contains="WRONGTYPE")


def test_a_name_from_another_queue_ends_nothing(r):
    push(r, "q1", "DELAY", 0, "a")
    push(r, "q2", "DELAY", 0, "a")
    (_, _, i1), = pop_ids(r, "q1")
    pop(r, "q2")
    before = snapshot(r)
    assert ackid(r, "q2", i1) == 0 and nackid(r, "q2", i1) is None and extendid(r, "q2", i1, 5) is None
    assert snapshot(r) == before


@pytest.mark.parametrize("by", ["sweep", "timer"])
def test_stale_name_after_expiry_and_redelivery(r, by):
    push(r, "q", "DELAY", 0, "a")
    if by == "sweep":
        [(_, _, old)], swept, _ = pop_expire_sweep(r, "q", ids=True)
        assert swept == 1
    else:
        (_, _, old), = pop_ids(r, "q", "LEASE", 1)
        assert wait_until(lambda: r.zcard(prep("q")) == 0, timeout=10)
    assert names(r, "q") == {}, "an expired delivery's name goes with it"
    (_, d, new), = pop_ids(r, "q")
    assert d == 2 and new > old
    before = snapshot(r)
    assert ackid(r, "q", old) == 0 and nackid(r, "q", old) is None and extendid(r, "q", old, 9) is None
    assert snapshot(r) == before, "the later delivery of the same content is untouched"
    assert ackid(r, "q", new) == 1


def test_stale_name_after_ack_and_repush_of_the_same_content(r):
    push(r, "q", "DELAY", 0, "a")
    (_, _, old), = pop_ids(r, "q")
    assert ack(r, "q", "a") == 1, "ended by content"
    assert r.dbsize() == 0
    push(r, "q", "DELAY", 0, "a")
    (_, d, new), = pop_ids(r, "q")
    assert d == 1 and new > old, "a name is not given again once the queue emptied"
    assert ackid(r, "q", old) == 0
    assert zs(r, prep("q")).keys() == {b"a"}
    assert ackid(r, "q", new) == 1


def test_stale_name_after_dead_and_replay(r):
    push(r, "q", "PRIORITY", 3, "a")
    (_, _, old), = pop_ids(r, "q")
    assert nack(r, "q", "a", "DEAD") == b"dead"
    assert names(r, "q") == {}
    assert r.execute_command("RMQ.REPLAY", "q") == 1
    (_, d, new), = pop_ids(r, "q")
    assert d == 1 and new > old
    assert ackid(r, "q", old) == 0 and nackid(r, "q", old) is None
    assert ackid(r, "q", new) == 1


def test_a_grouped_named_delivery_frees_its_group(r):
    push(r, "q", "DELAY", 0, "GROUP", "g", "a")
    push(r, "q", "DELAY", 0, "GROUP", "g", "b")
    (_, _, i), = pop_ids(r, "q", "COUNT", 2)
    assert pop_ids(r, "q") is None, "its group is busy"
    assert ackid(r, "q", i) == 1
    assert [m for m, _, _ in pop_ids(r, "q")] == [b"b"]


def test_nothing_is_left_behind_whatever_ends_the_deliveries(r):
    """Many deliveries ended by every path: no name record remains, and the emptied queue
    leaves nothing but its policy."""
    r.execute_command("RMQ.POLICY", "p", "SET", "retries", 1)
    n = 40
    msgs = [f"m{i}" for i in range(n)]
    push(r, "p", "PRIORITY", 1, *msgs)
    got = pop_ids(r, "p", "COUNT", 30)
    assert len(names(r, "p")) == 30
    ids = {m.decode(): i for m, _, i in got}
    mine = sorted(ids)
    assert ack(r, "p", *mine[0:5]) == 5                                    # ACK by content
    assert ackid(r, "p", *[ids[m] for m in mine[5:10]]) == 5               # ACKID
    assert {nack(r, "p", m) for m in mine[10:15]} == {b"requeued"}         # NACK by content
    assert {nackid(r, "p", ids[m], "DEAD") for m in mine[15:20]} == {b"dead"}   # NACKID DEAD
    assert {nackid(r, "p", ids[m]) for m in mine[20:25]} == {b"requeued"}  # NACKID
    for m in mine[25:30]:
        assert extendid(r, "p", ids[m], 1) > 0                             # expiry by the timer
    assert wait_until(lambda: r.zcard(prep("p")) == 0, timeout=10)
    assert names(r, "p") == {}
    popped, swept, left = pop_expire_sweep(r, "p", count=10, ids=True)     # expiry by RMQ.SWEEP
    assert len(popped) == 10 and swept == 10 and left == 0
    assert names(r, "p") == {}
    # Second deliveries: their retries used up, an expiry makes them dead.
    waiting = r.zcard("p")
    again = pop_ids(r, "p", "COUNT", n, "LEASE", 1)
    assert len(again) == waiting > 0 and {d for _, d, _ in again} <= {1, 2}
    assert wait_until(lambda: r.zcard(prep("p")) == 0, timeout=10)
    assert names(r, "p") == {}
    died = r.zcard("dead{p}")
    assert r.execute_command("RMQ.REPLAY", "p") == died > 0
    got = pop_ids(r, "p", "COUNT", n)
    assert ackid(r, "p", *[i for _, _, i in got]) == len(got)
    assert r.keys("*") == [b"meta{p}"] and set(r.hkeys("meta{p}")) == {b"policy"}, r.hgetall("meta{p}")


@pytest.mark.parametrize("how", ["del", "unlink", "expire"])
def test_deleting_the_queue_drops_its_names(r, how):
    push(r, "q", "DELAY", 0, "a", "b")
    (_, _, i1), (_, _, i2) = pop_ids(r, "q", "COUNT", 2)
    keys = ["q", "prepare{q}", "meta{q}"]
    if how == "del":
        r.delete(*keys)
    elif how == "unlink":
        r.unlink(*keys)
    else:
        for k in keys:
            r.pexpire(k, 1)
        assert wait_until(lambda: r.dbsize() == 0, timeout=10)
    assert r.dbsize() == 0
    push(r, "q", "DELAY", 0, "a")
    (_, _, i3), = pop_ids(r, "q")
    assert i3 > i2
    assert ackid(r, "q", i1, i2) == 0 and ackid(r, "q", i3) == 1
    push(r, "q", "DELAY", 0, "a")
    pop_ids(r, "q")
    r.flushall()
    assert r.dbsize() == 0


def test_cancel_leaves_the_delivery_and_its_name(r):
    """CANCEL removes a waiting copy, never a delivery: the name still ends its delivery."""
    push(r, "q", "DELAY", 0, "a")
    (_, _, i), = pop_ids(r, "q")
    push(r, "q", "DELAY", 0, "a")                 # a waiting copy of the content in flight
    assert r.execute_command("RMQ.CANCEL", "q", "a") == 1
    assert names(r, "q") == {i: b"a"}
    assert ackid(r, "q", i) == 1
    assert r.dbsize() == 0


def test_ackid_of_nothing_leaves_a_watch_alone(server, r):
    push(r, "q", "DELAY", 0, "a")
    (_, _, i), = pop_ids(r, "q")
    assert ack(r, "q", "a") == 1
    push(r, "q", "DELAY", 60000, "b")
    keys = ["q", "prepare{q}", "meta{q}"]
    assert watched_exec(server, keys, lambda: ackid(r, "q", i))
    assert watched_exec(server, keys, lambda: nackid(r, "q", i))
    assert watched_exec(server, keys, lambda: extendid(r, "q", i, 5))


def test_a_blocked_named_pop_is_served_with_ids(server, r):
    out = {}
    c = server.client()

    def consumer():
        out["got"] = c.execute_command("RMQ.POP", "q", "BLOCK", 10000, "IDS")

    t = threading.Thread(target=consumer)
    t.start()
    assert wait_until(lambda: r.info("clients")["blocked_clients"] == 1, timeout=10)
    push(r, "q", "DELAY", 0, "a")
    t.join(15)
    [[m, d, i]] = out["got"]
    assert (m, d) == (b"a", 1) and names(r, "q") == {i: b"a"}
    assert ackid(r, "q", i) == 1


def test_names_survive_a_reload_and_a_restore(start_server):
    r = start_server(extra_conf=["--enable-debug-command", "yes"]).client()
    push(r, "q", "DELAY", 0, "a", "b")
    (_, _, ia), (_, _, ib) = pop_ids(r, "q", "COUNT", 2)
    r.execute_command("DEBUG", "RELOAD")
    assert ackid(r, "q", ia) == 1
    dumps = {k: r.dump(k) for k in r.keys("*")}
    r.flushall()
    for k, v in dumps.items():
        r.restore(k, 0, v)
    assert ackid(r, "q", ia) == 0 and ackid(r, "q", ib) == 1
    push(r, "q", "DELAY", 0, "c")
    (_, _, ic), = pop_ids(r, "q")
    assert ic > ib


def test_a_name_made_on_the_primary_ends_the_delivery_on_the_promoted_replica(start_server):
    primary = start_server()
    replica = start_replica(start_server, primary)
    p, rc = primary.client(), replica.client()
    push(p, "q", "DELAY", 0, "a", "b")
    (_, _, ia), (_, _, ib) = pop_ids(p, "q", "COUNT", 2)
    assert ackid(p, "q", ia) == 1
    assert p.execute_command("WAIT", 1, 10000) == 1
    assert snapshot(rc) == snapshot(p), "names and the counter replicate as effects"
    with pytest.raises(redis.ReadOnlyError):
        ackid(rc, "q", ib)
    rc.execute_command("REPLICAOF", "NO", "ONE")
    assert ackid(rc, "q", ia) == 0
    assert ackid(rc, "q", ib) == 1
    push(rc, "q", "DELAY", 0, "c")
    (_, _, ic), = pop_ids(rc, "q")
    assert ic > ib, "the promoted replica goes on from the primary's last name"
