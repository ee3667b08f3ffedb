"""RMQ.TPOP (docs/COMMANDS.md: RMQ.TPOP): a whole topic consumed with one call per server, round-robin
within and across calls, each queue's rules applied, blocking woken by every source, first
come first served with POP waiters, key permissions checked by the module, and the index of
non-empty queues rebuilt after restarts, SWAPDB, FLUSH and keys that arrive."""

import time

import pytest
import redis

from helpers import (ack, expect_error_unchanged, info_rmq, nack, now_ms, pop, prep, push, snapshot, start_replica, wait_replica_matches, zs)
from ops_support import EventListener, keyspace
from timing_support import Blocked, BlockedPop, wait_blocked


def tpop(r, topic, slots, *opts):
    rep = r.execute_command("RMQ.TPOP", topic, slots, *opts)
    if rep is None:
        return None
    assert isinstance(rep, list)
    for e in rep:
        assert isinstance(e, list) and len(e) == 3, f"TPOP entry must be [queue, message, deliveries]: {e!r}"
    return [tuple(e) for e in rep]


def BlockedTpop(server, *args):
    """RMQ.TPOP <args> blocking on its own connection, in a thread, started at once."""
    t = Blocked(server, "RMQ.TPOP", *args)
    t.start()
    return t


def test_takes_from_every_queue_in_turn(r):
    push(r, "t_1", "DELAY", 0, "a1", "a2", "a3")
    push(r, "t_5", "DELAY", 0, "b1", "b2", "b3")
    push(r, "t_9", "PRIORITY", 1, "c1")
    got = tpop(r, "t", 16, "COUNT", 5, "LEASE", 60000)
    assert [q for q, _, _ in got] == [b"t_1", b"t_5", b"t_9", b"t_1", b"t_5"], "one from each in turn"
    assert [(m, d) for _, m, d in got] == [(b"a1", 1), (b"b1", 1), (b"c1", 1), (b"a2", 1), (b"b2", 1)]
    assert zs(r, prep("t_1")).keys() == {b"a1", b"a2"}
    assert ack(r, "t_9", "c1") == 1 and nack(r, "t_1", "a1") == b"requeued"
    assert r.execute_command("RMQ.EXTEND", "t_5", "b1", 1000) is not None


def test_turns_share_out_what_each_queue_has(r):
    push(r, "t_0", "DELAY", 0, "a1")
    push(r, "t_1", "DELAY", 0, *[f"b{i}" for i in range(1, 6)])
    push(r, "t_2", "DELAY", 0, *[f"c{i}" for i in range(1, 6)])
    got = [m for _, m, _ in tpop(r, "t", 4, "COUNT", 8)]
    assert got == [b"a1", b"b1", b"c1", b"b2", b"c2", b"b3", b"c3", b"b4"], "turn by turn"
    got = [m for _, m, _ in tpop(r, "t", 4, "COUNT", 10)]
    assert sorted(got) == [b"b5", b"c4", b"c5"]


def test_successive_tpops_start_at_successive_queues(r):
    for q in ("t_0", "t_3", "t_7"):
        push(r, q, "DELAY", 0, *[f"{q}-{i}" for i in range(3)])
    firsts = [tpop(r, "t", 8)[0][0] for _ in range(6)]
    assert firsts == [b"t_0", b"t_3", b"t_7", b"t_0", b"t_3", b"t_7"], "no queue waits behind a busy one"


def test_only_the_topics_first_slots_and_nil_when_nothing(r):
    assert tpop(r, "t", 16) is None
    push(r, "t_20", "DELAY", 0, "beyond")
    push(r, "u_1", "DELAY", 0, "other topic")
    push(r, "t_1", "DELAY", 60000, "not due")
    assert tpop(r, "t", 16, "COUNT", 10) is None
    assert tpop(r, "t", 32) == [(b"t_20", b"beyond", 1)]


def test_each_queues_rules_apply(r):
    r.execute_command("RMQ.PUSH", "t_0", "PRIORITY", 1, "GROUP", "g", "g-low")
    r.execute_command("RMQ.PUSH", "t_0", "PRIORITY", 9, "GROUP", "g", "g-high")
    r.execute_command("RMQ.POLICY", "t_1", "SET", "rate", 1, "lease-ms", 45000)
    push(r, "t_1", "DELAY", 0, "r1", "r2", "r3")
    t0 = now_ms(r)
    got = tpop(r, "t", 2, "COUNT", 10)
    assert sorted(m for _, m, _ in got) == [b"g-high", b"r1"], "one per group, highest first; rate 1"
    assert t0 + 45000 <= zs(r, prep("t_1"))[b"r1"] <= now_ms(r) + 45000, "the queue's lease-ms"
    assert zs(r, prep("t_0"))[b"g-high"] <= now_ms(r) + 30000, "server default lease elsewhere"
    assert info_rmq(r)["group_waits"] >= 1


def test_counters_and_events_per_queue(server, r):
    r.config_set("notify-keyspace-events", "Kd")
    ev = EventListener(server)
    try:
        push(r, "t_0", "DELAY", 0, "a", "b")
        push(r, "t_1", "DELAY", 0, "c")
        ev.take()
        popped = info_rmq(r)["popped"]
        assert len(tpop(r, "t", 2, "COUNT", 3)) == 3
        assert info_rmq(r)["popped"] == popped + 3
        assert sorted(keyspace(ev.take())) == [(b"t_0", b"rmq.popped"), (b"t_1", b"rmq.popped")]
    finally:
        ev.close()


@pytest.mark.parametrize("args,word", [
    (("t",), "wrong number"),
    (("t", 3), "slots"),
    (("t", 0), "slots"),
    (("t", 32768), "slots"),
    (("t", 8, "COUNT", 0), "COUNT"),
    (("t", 8, "COUNT", 10001), "COUNT"),
    (("t", 8, "LEASE", 0), "LEASE"),
    (("t", 8, "BLOCK", -1), "BLOCK"),
    (("t", 8, "COUNT"), "syntax"),
    (("t", 8, "SOON", 1), "syntax"),
    (("t{x}", 8), "queue name"),
])
def test_errors_change_nothing(r, args, word):
    push(r, "t_0", "DELAY", 0, "a")
    expect_error_unchanged(r, "RMQ.TPOP", *args, contains=word)


def test_block_woken_by_a_push_to_any_slot(server, r):
    t = BlockedTpop(server, "t", 64, "COUNT", 5, "BLOCK", 10000)
    wait_blocked(r, 1)
    push(r, "t_42", "DELAY", 0, "x")
    assert t.finish() == [(b"t_42", b"x", 1)]
    assert info_rmq(r)["blocked_clients"] == 0


@pytest.mark.parametrize("source", ["nack", "ack-frees-group", "replay", "due", "hold", "rate"])
def test_block_woken_by_every_source(server, r, source):
    if source == "nack":
        push(r, "t_3", "DELAY", 0, "m")
        pop(r, "t_3", "LEASE", 60000)
    elif source == "ack-frees-group":
        r.execute_command("RMQ.PUSH", "t_3", "DELAY", 0, "GROUP", "g", "first", "m")
        pop(r, "t_3", "LEASE", 60000)
    elif source == "replay":
        push(r, "t_3", "DELAY", 0, "m")
        pop(r, "t_3")
        nack(r, "t_3", "m", "DEAD")
    elif source == "due":
        push(r, "t_3", "DELAY", 600, "m")
    elif source == "hold":
        push(r, "t_3", "PRIORITY", 1, "m")
        pop(r, "t_3")
        nack(r, "t_3", "m", "DELAY", 600)
    else:
        r.execute_command("RMQ.POLICY", "t_3", "SET", "rate", 2, "rate-window-ms", 1000)
        push(r, "t_3", "DELAY", 0, "first", "m")
        assert pop(r, "t_3")[0][0] == b"first"
    t = BlockedTpop(server, "t", 4, "BLOCK", 10000)
    wait_blocked(r, 1)
    time.sleep(0.05)
    assert t.is_alive(), "nothing deliverable yet"
    if source == "nack":
        nack(r, "t_3", "m")
    elif source == "ack-frees-group":
        ack(r, "t_3", "first")
    elif source == "replay":
        r.execute_command("RMQ.REPLAY", "t_3")
    got = t.finish()
    assert [(q, m) for q, m, _ in got] == [(b"t_3", b"m")]


def test_first_come_first_served_with_pop_waiters(server, r):
    p = BlockedPop(server, "t_2", "BLOCK", 10000)
    p.start()
    wait_blocked(r, 1)
    t = BlockedTpop(server, "t", 4, "BLOCK", 10000)
    wait_blocked(r, 2)
    push(r, "t_2", "DELAY", 0, "one")
    assert p.finish() == [(b"one", 1)]
    time.sleep(0.05)
    assert t.is_alive(), "the TPOP came second"
    push(r, "t_2", "DELAY", 0, "two")
    assert t.finish() == [(b"t_2", b"two", 1)]


def test_block_times_out_and_is_ignored_in_multi(server, r):
    t0 = time.monotonic()
    assert tpop(r, "t", 8, "BLOCK", 200) is None
    assert time.monotonic() - t0 >= 0.15
    p = r.pipeline(transaction=True)
    p.execute_command("RMQ.TPOP", "t", 8, "BLOCK", 0)
    assert p.execute() == [None]


def test_acl_allowed_refused_and_nothing_changed(server, r):
    push(r, "t_0", "DELAY", 0, "a")
    push(r, "t_3", "DELAY", 0, "b")
    r.execute_command("ACL", "SETUSER", "worker", "on", "nopass", "+@all", "~t_*")
    r.execute_command("ACL", "SETUSER", "partial", "on", "nopass", "+@all", "~t_0", "~t_1", "~t_2")
    r.execute_command("ACL", "SETUSER", "reader", "on", "nopass", "+@all", "%R~t_*")
    w = server.client(username="worker", password="x")
    assert tpop(w, "t", 4, "COUNT", 1) is not None
    for user in ("partial", "reader"):
        c = server.client(username=user, password="x")
        before = snapshot(r)
        with pytest.raises(redis.exceptions.NoPermissionError, match="no permissions"):
            c.execute_command("RMQ.TPOP", "t", 4, "COUNT", 10)
        assert snapshot(r) == before, "nothing taken"
        c.close()
    # Rules change: the verdict follows at once.
    r.execute_command("ACL", "SETUSER", "worker", "resetkeys", "~t_0")
    with pytest.raises(redis.exceptions.NoPermissionError):
        w.execute_command("RMQ.TPOP", "t", 4)
    r.execute_command("ACL", "SETUSER", "worker", "~t_*")
    assert tpop(w, "t", 4) is not None
    w.close()


def test_acl_every_key_open_or_not(server, r):
    """With every user allowed every key (the default) no verdict is asked; a user given
    all keys for reading only, or every key in a selector only, is judged key by key; the
    rules are read again after every ACL change."""
    push(r, "t_0", "DELAY", 0, *[f"m{i}" for i in range(10)])
    assert tpop(r, "t", 4) is not None
    r.execute_command("ACL", "SETUSER", "all", "on", "nopass", "+@all", "%RW~*")
    a = server.client(username="all", password="x")
    assert tpop(a, "t", 4) is not None
    r.execute_command("ACL", "SETUSER", "reader", "on", "nopass", "+@all", "%R~*")
    c = server.client(username="reader", password="x")
    with pytest.raises(redis.exceptions.NoPermissionError):
        c.execute_command("RMQ.TPOP", "t", 4)
    assert tpop(a, "t", 4) is not None and tpop(r, "t", 4) is not None
    r.execute_command("ACL", "SETUSER", "reader", "%W~*")
    assert tpop(c, "t", 4) is not None, "read and write: every key again"
    r.execute_command("ACL", "SETUSER", "sel", "on", "nopass", "+@all", "~x", "(~* +@all)")
    s = server.client(username="sel", password="x")
    assert tpop(s, "t", 4) is not None, "a selector's keys count"
    r.execute_command("ACL", "SETUSER", "sel", "clearselectors")
    with pytest.raises(redis.exceptions.NoPermissionError):
        s.execute_command("RMQ.TPOP", "t", 4)
    r.execute_command("ACL", "DELUSER", "sel")
    assert tpop(a, "t", 4) is not None
    for x in (a, c, s):
        x.close()


def test_acl_verdict_follows_the_connections_user(server, r):
    """A verdict kept for a connection is not its next user's: AUTH, HELLO … AUTH and RESET
    on the same connection, an AUTH inside a transaction, and scripts (one client for
    every caller) are judged by the user running the TPOP."""
    push(r, "t_0", "DELAY", 0, *[f"m{i}" for i in range(20)])
    r.execute_command("ACL", "SETUSER", "worker", "on", ">x", "+@all", "~t_*")
    r.execute_command("ACL", "SETUSER", "partial", "on", ">x", "+@all", "~t_0", "~t_1")
    c = server.client(username="worker", password="x")

    def refused():
        with pytest.raises(redis.exceptions.NoPermissionError, match="partial"):
            c.execute_command("RMQ.TPOP", "t", 4)

    assert tpop(c, "t", 4) is not None
    c.execute_command("AUTH", "partial", "x")
    refused()
    c.execute_command("AUTH", "worker", "x")
    assert tpop(c, "t", 4) is not None
    c.execute_command("HELLO", 2, "AUTH", "partial", "x")
    refused()
    c.execute_command("RESET")
    assert tpop(c, "t", 4) is not None, "RESET: the default user"
    c.execute_command("AUTH", "worker", "x")
    p = c.pipeline(transaction=True)
    p.execute_command("RMQ.TPOP", "t", 4)
    p.execute_command("AUTH", "partial", "x")
    p.execute_command("RMQ.TPOP", "t", 4)
    got = p.execute(raise_on_error=False)
    assert got[0] is not None and isinstance(got[2], redis.exceptions.NoPermissionError), got
    script = "return redis.call('RMQ.TPOP', 't', '4')"
    c.execute_command("AUTH", "worker", "x")
    assert c.eval(script, 0) is not None
    c.execute_command("AUTH", "partial", "x")
    with pytest.raises(redis.exceptions.ResponseError, match="(?i)no permissions|NOPERM"):
        c.eval(script, 0)
    c.close()


def test_index_rebuilt_after_restart_swapdb_flush_and_arrivals(start_server):
    s = start_server(extra_conf=["--appendonly", "yes"])
    c = s.client()
    push(c, "t_1", "DELAY", 0, "a")
    push(c, "t_2", "DELAY", 0, "b")
    s.restart()
    c = s.client()
    assert sorted(m for _, m, _ in tpop(c, "t", 4, "COUNT", 10)) == [b"a", b"b"], "after an AOF reload"
    c.select(1)
    push(c, "t_3", "DELAY", 0, "in-db1")
    c.select(0)
    c.swapdb(0, 1)
    assert tpop(c, "t", 4, "COUNT", 10) == [(b"t_3", b"in-db1", 1)], "after SWAPDB"
    push(c, "t_0", "DELAY", 0, "gone")
    c.flushdb()
    assert tpop(c, "t", 4) is None, "after FLUSHDB"
    # keys that arrive: RENAME, COPY, MOVE, RESTORE
    push(c, "staging", "DELAY", 0, "renamed")
    for k in (b"staging", b"meta{staging}"):
        c.rename(k, k.replace(b"staging", b"t_0"))
    assert tpop(c, "t", 4) == [(b"t_0", b"renamed", 1)]
    push(c, "src", "DELAY", 0, "copied")
    for k in (b"src", b"meta{src}"):
        c.copy(k, k.replace(b"src", b"t_1"))
    c.select(2)
    push(c, "t_2", "DELAY", 0, "moved")
    for k in (b"t_2", b"meta{t_2}"):
        assert c.move(k, 0)
    c.select(0)
    push(c, "x", "DELAY", 0, "restored")
    dumps = {k: c.dump(k) for k in (b"x", b"meta{x}")}
    c.delete(*dumps)
    for k, v in dumps.items():
        c.restore(k.replace(b"x", b"t_3"), 0, v)
    got = sorted(m for _, m, _ in tpop(c, "t", 4, "COUNT", 10))
    assert got == [b"copied", b"moved", b"restored"]


def test_index_after_promotion(start_server):
    p = start_server()
    c = p.client()
    rc = start_replica(start_server, p).client()
    push(c, "t_5", "DELAY", 0, "a")
    assert wait_replica_matches(c, rc)
    rc.execute_command("REPLICAOF", "NO", "ONE")
    assert tpop(rc, "t", 8) == [(b"t_5", b"a", 1)]


def test_stale_index_entry_of_a_deleted_queue(r):
    push(r, "t_0", "DELAY", 0, "a")
    r.delete("t_0", "meta{t_0}")
    assert tpop(r, "t", 2) is None
    push(r, "t_1", "DELAY", 0, "b")
    assert tpop(r, "t", 2) == [(b"t_1", b"b", 1)]
