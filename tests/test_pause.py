"""RMQ.POLICY Q SET paused 1|0 (docs/COMMANDS.md: RMQ.POLICY, RMQ.INFO): while paused, POP and TPOP
deliver nothing from the queue (BLOCK waits and is woken on resume); everything else works as
usual; GET and INFO show it; it replicates and holds on a promoted replica."""

import time

from helpers import (ack, expect_error_unchanged, nack, pop, push, rmq_info, start_replica,
                     wait_replica_matches, wait_until)
from ops_support import pairs
from timing_support import Blocked, start_blocked, wait_blocked


def policy(r, q, *args):
    return r.execute_command("RMQ.POLICY", q, *args)


def paused(r, q):
    return int(pairs(policy(r, q, "GET"))["paused"])


def test_paused_delivers_nothing_while_the_rest_works(r):
    push(r, "q", "DELAY", 0, "a", "b", "c")
    assert pop(r, "q") == [(b"a", 1)]
    assert policy(r, "q", "SET", "paused", 1) == b"OK"
    assert paused(r, "q") == 1 and rmq_info(r, "q")["paused"] == 1
    assert pop(r, "q", "COUNT", 10) is None
    assert r.execute_command("RMQ.TPOP", "q", 1) is None, "not a topic slot: still nothing"
    assert push(r, "q", "DELAY", 0, "d") == 1
    assert r.execute_command("RMQ.EXTEND", "q", "a", 60000) is not None
    assert nack(r, "q", "a") == b"requeued"
    assert r.execute_command("RMQ.CANCEL", "q", "b") == 1
    assert pop(r, "q") is None
    assert policy(r, "q", "SET", "paused", 0) == b"OK"
    assert rmq_info(r, "q")["paused"] == 0
    assert sorted(m for m, _ in pop(r, "q", "COUNT", 10)) == [b"a", b"c", b"d"]


def test_ack_expiry_and_replay_work_while_paused(r):
    push(r, "q", "DELAY", 0, "a")
    push(r, "q", "DELAY", 1, "b")
    assert pop(r, "q", "LEASE", 60000) == [(b"a", 1)]
    assert wait_until(lambda: pop(r, "q", "LEASE", 200) == [(b"b", 1)], timeout=5)
    policy(r, "q", "SET", "paused", 1, "retries", 0)
    assert ack(r, "q", "a") == 1
    assert wait_until(lambda: rmq_info(r, "q")["dead"] == 1, timeout=10), "the lease ran out"
    assert r.execute_command("RMQ.REPLAY", "q") == 1
    i = rmq_info(r, "q")
    assert (i["waiting"], i["ready"], i["inflight"]) == (1, 1, 0)
    assert pop(r, "q") is None


def test_paused_errors_change_nothing(r):
    for bad in (2, -1, "x"):
        expect_error_unchanged(r, "RMQ.POLICY", "q", "SET", "paused", bad, contains="paused")
    assert paused(r, "q") == 0


def test_blocked_pop_and_tpop_woken_on_resume(server, r):
    policy(r, "q", "SET", "paused", 1)
    policy(r, "t_1", "SET", "paused", 1)
    pusher = start_blocked(server, r, "q", "BLOCK", 10000)
    tpop = Blocked(server, "RMQ.TPOP", "t", 4, "BLOCK", 10000)
    tpop.start()
    wait_blocked(r, 2)
    push(r, "q", "DELAY", 0, "a")
    push(r, "t_1", "PRIORITY", 1, "x")
    time.sleep(0.3)
    assert pusher.is_alive() and tpop.is_alive(), "paused: the consumers keep waiting"
    assert policy(r, "q", "SET", "paused", 0) == b"OK"
    assert pusher.finish(timeout=5) == [(b"a", 1)]
    assert tpop.is_alive()
    assert policy(r, "t_1", "RESET") == 1
    assert tpop.finish(timeout=5) == [(b"t_1", b"x", 1)]


def test_pause_replicates_and_holds_after_promotion(start_server):
    p = start_server()
    c = p.client()
    rep = start_replica(start_server, p)
    rc = rep.client()
    push(c, "q", "DELAY", 0, "a")
    policy(c, "q", "SET", "paused", 1)
    assert wait_replica_matches(c, rc)
    assert paused(rc, "q") == 1 and rmq_info(rc, "q")["paused"] == 1
    rc.execute_command("REPLICAOF", "NO", "ONE")
    assert pop(rc, "q") is None, "the promoted replica keeps the queue paused"
    t = Blocked(rep, "RMQ.POP", "q", "BLOCK", 10000)
    t.start()
    wait_blocked(rc, 1)
    policy(rc, "q", "SET", "paused", 0)
    assert t.finish(timeout=5) == [(b"a", 1)]
