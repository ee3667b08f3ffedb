"""RMQ.POLICY (docs/COMMANDS.md: RMQ.POLICY, NACK, SWEEP, POP, INFO): a queue's own settings, kept while
the queue is empty, replicated; retry backoff on fixed, range and priority queues (by NACK
and by expiry), priority holds, rate limits with blocked consumers."""

import time

import pytest

from helpers import (ack, expect_error, expect_error_unchanged, info_rmq, nack, now_ms, pop,
                     prep, push, rmq_info, snapshot, start_replica, wait_replica_matches,
                     wait_until, zs)
from ops_support import pairs
from timing_support import start_blocked, watch_rollback

DEFAULTS = {"retries": 16, "lease-ms": 30000, "max-queue-length": 0, "backoff-ms": 0,
            "backoff-max-ms": 3600000, "rate": 0, "rate-window-ms": 1000,
            "paused": 0, "journal": 0}
BOUNDS = {"retries": (0, 1000), "lease-ms": (1, 2 ** 31), "max-queue-length": (0, 2 ** 62),
          "backoff-ms": (0, 2 ** 31), "backoff-max-ms": (0, 2 ** 31), "rate": (0, 10 ** 9),
          "rate-window-ms": (1, 2 ** 31), "paused": (0, 1),
          "journal": (0, 1_000_000)}


def policy(r, q, *args):
    return r.execute_command("RMQ.POLICY", q, *args)


def get(r, q):
    return {k: int(v) for k, v in pairs(policy(r, q, "GET")).items()}


def test_get_defaults_follow_server_settings(r):
    assert get(r, "q") == DEFAULTS
    r.config_set("rmq.retries", 3)
    r.config_set("rmq.lease-ms", 777)
    assert get(r, "q") == {**DEFAULTS, "retries": 3, "lease-ms": 777}
    assert r.dbsize() == 0, "GET creates nothing"


@pytest.mark.parametrize("field", list(BOUNDS))
def test_every_field_within_its_bounds(r, field):
    lo, hi = BOUNDS[field]
    for v in (lo, hi):
        assert policy(r, "q", "SET", field, v) == b"OK"
        assert get(r, "q")[field] == v
    for bad in (lo - 1, hi + 1, "x", "1.5", ""):
        expect_error_unchanged(r, "RMQ.POLICY", "q", "SET", field, bad, contains=field)


def test_set_validates_every_pair_first(r):
    assert policy(r, "q", "SET", "retries", 2) == b"OK"
    expect_error_unchanged(r, "RMQ.POLICY", "q", "SET", "rate", 5, "backoff-ms", -1,
                           contains="backoff-ms")
    expect_error_unchanged(r, "RMQ.POLICY", "q", "SET", "rate", 5, "speed", 1, contains="speed")
    expect_error_unchanged(r, "RMQ.POLICY", "q", "SET", "rate", 5, "retries", contains="pairs")
    assert get(r, "q")["rate"] == 0
    assert policy(r, "q", "set", "RATE", 5, "Backoff-MS", 10) == b"OK"
    assert get(r, "q") == {**DEFAULTS, "retries": 2, "rate": 5, "backoff-ms": 10}


@pytest.mark.parametrize("args,word", [
    ((), "wrong number"),
    (("DROP",), "SET, GET or RESET"),
    (("GET", "x"), "syntax"),
    (("RESET", "x"), "syntax"),
    (("SET",), "pairs"),
])
def test_policy_syntax_errors(r, args, word):
    expect_error_unchanged(r, "RMQ.POLICY", "q", *args, contains=word)
    expect_error(r, "RMQ.POLICY", "", "GET", contains="queue name")


def test_policy_stays_while_empty_until_reset(r):
    assert policy(r, "q", "SET", "retries", 1) == b"OK"
    assert r.dbsize() == 1, "the policy is kept in a key tagged {q}"
    push(r, "q", "DELAY", 0, "a")
    assert pop(r, "q") == [(b"a", 1)]
    assert ack(r, "q", "a") == 1
    assert r.dbsize() == 1 and get(r, "q")["retries"] == 1, "kept while the queue is empty"
    assert rmq_info(r, "q")["kind"] is None
    push(r, "q", "PRIORITY", 1, "b")                  # any kind: the queue was empty
    assert policy(r, "q", "RESET") == 1
    assert policy(r, "q", "RESET") == 0
    assert get(r, "q") == DEFAULTS
    assert pop(r, "q") == [(b"b", 1)] and ack(r, "q", "b") == 1
    assert r.dbsize() == 0


def test_the_kind_holds_through_every_policy_change(start_server):
    """The kind is kept until the queue is completely empty, whatever POLICY does meanwhile;
    a replica holds the same keys all along."""
    p = start_server()
    c = p.client()
    rc = start_replica(start_server, p).client()

    def kind_is(k):
        assert rmq_info(c, "q")["kind"] == k
        assert wait_replica_matches(c, rc)
        if k is not None:
            other = "RANGE" if k != b"range" else "PRIORITY"
            expect_error_unchanged(c, "RMQ.PUSH", "q", other, 5, "z", contains="kind")

    push(c, "q", "PRIORITY", 3, "a", "b")
    kind_is(b"priority")
    for args in (["retries", 4], ["retries", 4, "rate", 9], ["lease-ms", 9000]):
        assert policy(c, "q", "SET", *args) == b"OK"
        kind_is(b"priority")
    assert get(c, "q")["lease-ms"] == 9000 and get(c, "q")["retries"] == 4
    assert policy(c, "q", "RESET") == 1
    kind_is(b"priority")
    assert get(c, "q") == DEFAULTS
    assert policy(c, "q", "SET", "backoff-ms", 5) == b"OK"
    assert sorted(pop(c, "q", "COUNT", 2)) == [(b"a", 1), (b"b", 1)] and ack(c, "q", "a", "b") == 2
    kind_is(None)
    assert c.dbsize() == 1 and get(c, "q")["backoff-ms"] == 5
    push(c, "q", "RANGE", 60000, "r")
    kind_is(b"range")
    assert get(c, "q")["backoff-ms"] == 5
    assert c.execute_command("RMQ.CANCEL", "q", "r") == 1
    kind_is(None)
    assert policy(c, "q", "RESET") == 1
    assert c.dbsize() == 0


def test_a_meta_key_changed_by_other_commands_is_read_anew(r):
    """The kind and policy are known in memory between commands: any other command that
    changes `meta{Q}` (HSET, HDEL, RESTORE, RENAME, DEL, a transaction, a script) is seen
    by the next command of the queue."""
    push(r, "q", "PRIORITY", 1, "a")
    policy(r, "q", "SET", "lease-ms", 1000)
    policy(r, "p", "SET", "lease-ms", 2000)
    assert get(r, "q")["lease-ms"] == 1000 and rmq_info(r, "q")["kind"] == b"priority"
    r.restore("meta{q}", 0, r.dump("meta{p}"), replace=True)
    assert get(r, "q")["lease-ms"] == 2000, "RESTORE"
    r.hset("meta{q}", "policy", r.hget("meta{p}", "policy").replace(b"2000", b"3000"))
    assert get(r, "q")["lease-ms"] == 3000, "HSET"
    r.hdel("meta{q}", "policy")
    r.hset("meta{q}", "kind", "range")
    assert get(r, "q") == DEFAULTS and rmq_info(r, "q")["kind"] == b"range", "HDEL, HSET"
    r.delete("meta{q}")
    assert rmq_info(r, "q")["kind"] == b"priority", "DEL: the kind inferred from the messages"
    r.rename("meta{p}", "meta{q}")
    assert get(r, "q")["lease-ms"] == 2000, "RENAME"
    with r.pipeline(transaction=True) as t:
        t.hset("meta{q}", "policy", "lease-ms=4000")
        t.execute_command("RMQ.POLICY", "q", "GET")
        t.execute()
    assert get(r, "q")["lease-ms"] == 4000, "MULTI"
    r.eval("redis.call('HSET', KEYS[1], 'policy', 'lease-ms=5000')", 1, "meta{q}")
    assert get(r, "q")["lease-ms"] == 5000, "a script"
    assert pop(r, "q") == [(b"a", 1)]
    assert 4000 < r.zscore(prep("q"), "a") - now_ms(r) <= 5000


def test_a_replica_reads_the_policy_its_primary_wrote(start_server):
    """A replica's commands see the kind and policy as the replicated writes left them."""
    p = start_server()
    c = p.client()
    rc = start_replica(start_server, p).client()
    push(c, "q", "PRIORITY", 1, "a")
    policy(c, "q", "SET", "lease-ms", 1000)
    assert wait_replica_matches(c, rc)
    assert get(rc, "q")["lease-ms"] == 1000 and rmq_info(rc, "q")["kind"] == b"priority"
    policy(c, "q", "SET", "lease-ms", 2000)
    assert wait_replica_matches(c, rc)
    assert get(rc, "q")["lease-ms"] == 2000
    policy(c, "q", "RESET")
    assert pop(c, "q") == [(b"a", 1)] and ack(c, "q", "a") == 1
    push(c, "q", "RANGE", 60000, "r")
    assert wait_replica_matches(c, rc)
    assert get(rc, "q") == DEFAULTS and rmq_info(rc, "q")["kind"] == b"range"


def test_retries_lease_and_length_per_queue(r):
    policy(r, "q", "SET", "retries", 0, "lease-ms", 45000, "max-queue-length", 2)
    t0 = now_ms(r)
    push(r, "q", "DELAY", 0, "a", "b")
    expect_error_unchanged(r, "RMQ.PUSH", "q", "DELAY", 0, "c", contains="max-queue-length")
    assert pop(r, "q") == [(b"a", 1)]
    assert t0 + 45000 <= zs(r, prep("q"))[b"a"] <= now_ms(r) + 45000, "lease-ms of the queue"
    assert nack(r, "q", "a") == b"dead", "retries 0: one delivery"
    push(r, "other", "DELAY", 0, "a")
    pop(r, "other")
    assert nack(r, "other", "a") == b"requeued", "other queues keep the server's settings"


@pytest.mark.parametrize("mode,value", [("DELAY", 0), ("RANGE", 1)])
def test_backoff_on_timed_queues_by_nack_and_by_expiry(r, mode, value):
    policy(r, "q", "SET", "backoff-ms", 1000, "backoff-max-ms", 3000)
    push(r, "q", mode, value, "a")
    wait_until(lambda: pop(r, "q") == [(b"a", 1)], timeout=5)
    t0 = now_ms(r)
    assert nack(r, "q", "a") == b"requeued"
    t1 = now_ms(r)
    assert t0 + 1000 <= zs(r, "q")[b"a"] <= t1 + 1000, "1st failure: backoff-ms"
    assert pop(r, "q") is None
    assert nack(r, "q", "a", "DELAY", 0) is None
    r.zadd("q", {"a": now_ms(r)})                  # skip the wait (test only)
    assert pop(r, "q", "LEASE", 300) == [(b"a", 2)]
    out, _ = watch_rollback(r, "q", b"a", timeout=5)
    assert out[0] + 2000 - 1100 <= out[1] <= out[0] + 2000, "2nd failure (expiry): doubled"
    r.zadd("q", {"a": now_ms(r)})
    assert pop(r, "q") == [(b"a", 3)]
    t0 = now_ms(r)
    assert nack(r, "q", "a") == b"requeued"
    assert t0 + 3000 <= zs(r, "q")[b"a"] <= now_ms(r) + 3000, "capped at backoff-max-ms"
    r.zadd("q", {"a": now_ms(r)})
    assert pop(r, "q") == [(b"a", 4)]
    assert nack(r, "q", "a", "DELAY", 5) == b"requeued", "an explicit DELAY wins"
    assert zs(r, "q")[b"a"] <= now_ms(r) + 5


def test_priority_backoff_holds_and_wakes_a_blocked_consumer(server, r):
    policy(r, "q", "SET", "backoff-ms", 1000)
    push(r, "q", "PRIORITY", 7, "a")
    assert pop(r, "q") == [(b"a", 1)]
    t0 = now_ms(r)
    assert nack(r, "q", "a") == b"requeued"
    release = zs(r, "hold{q}")[b"a"]
    assert t0 + 1000 <= release <= now_ms(r) + 1000
    i = rmq_info(r, "q")
    assert (i["waiting"], i["ready"], i["next_due"]) == (1, 0, int(release))
    t = start_blocked(server, r, "q", "BLOCK", 10000)
    got = t.finish(timeout=10)
    assert got == [(b"a", 2)]
    assert now_ms(r) >= release
    assert zs(r, "hold{q}") == {}


def test_priority_expiry_backoff_holds(r):
    policy(r, "q", "SET", "backoff-ms", 5000)
    push(r, "q", "PRIORITY", 7, "a")
    push(r, "q", "PRIORITY", 1, "b")
    assert pop(r, "q", "LEASE", 300) == [(b"a", 1)]
    out, _ = watch_rollback(r, "q", b"a", timeout=5)
    hold = zs(r, "hold{q}")
    assert list(hold) == [b"a"] and hold[b"a"] >= out[0] + 5000 - 1100
    assert pop(r, "q") == [(b"b", 1)], "a is held back by its backoff"


def test_rate_limit_and_blocked_consumers(server, r):
    policy(r, "q", "SET", "rate", 4, "rate-window-ms", 1000)
    push(r, "q", "DELAY", 0, *[f"m{i}" for i in range(20)])
    limited = info_rmq(r)["rate_limited"]
    got = pop(r, "q", "COUNT", 20)
    assert len(got) == 1, "a new bucket holds one token"
    assert info_rmq(r)["rate_limited"] == limited + 1
    assert pop(r, "q") is None
    t0 = time.monotonic()
    t = start_blocked(server, r, "q", "COUNT", 20, "BLOCK", 10000)
    assert len(t.finish(timeout=10)) == 1, "woken when the bucket refills (250 ms)"
    assert time.monotonic() - t0 >= 0.2
    time.sleep(1.1)
    assert len(pop(r, "q", "COUNT", 20)) == 4, "a full bucket: rate tokens"
    assert policy(r, "q", "SET", "rate", 0) == b"OK"
    assert len(pop(r, "q", "COUNT", 20)) == 14, "unlimited again"


def test_policy_replicates_and_survives_restart(start_server):
    p = start_server(extra_conf=["--appendonly", "yes"])
    c = p.client()
    rep = start_replica(start_server, p)
    rc = rep.client()
    assert policy(c, "q", "SET", "retries", 0, "rate", 7) == b"OK"
    assert wait_replica_matches(c, rc)
    assert get(rc, "q")["rate"] == 7, "GET answers on a replica"
    expect_error(rc, "RMQ.POLICY", "q", "SET", "rate", 1, contains="read only")
    expect_error(rc, "RMQ.POLICY", "q", "RESET", contains="read only")
    before = snapshot(c)
    p.restart()
    c = p.client()
    assert snapshot(c) == before
    assert get(c, "q")["retries"] == 0
    rc.execute_command("REPLICAOF", "NO", "ONE")
    push(rc, "q", "DELAY", 0, "a")
    pop(rc, "q")
    assert nack(rc, "q", "a") == b"dead", "the promoted replica applies the policy"


def test_the_timer_releases_ended_holds_without_a_consumer(r):
    push(r, "q", "PRIORITY", 3, "a")
    pop(r, "q")
    assert nack(r, "q", "a", "DELAY", 300) == b"requeued"
    release = zs(r, "hold{q}")[b"a"]
    assert wait_until(lambda: zs(r, "q") == {b"a": 3.0}, timeout=5), "back in Q with its priority"
    assert now_ms(r) >= release and zs(r, "hold{q}") == {}
