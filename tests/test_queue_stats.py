"""RMQ.INFO Q's per-queue counters and lag (docs/COMMANDS.md: RMQ.INFO, Settings `stats-queues`): each
counter counts for its queue what the INFO rmq counter of the same name counts (`died`: INFO
rmq's `dead`), they add up to INFO rmq's, survive the queue emptying, and are kept for at most
`stats-queues` queues; `lag_ms` is now minus the earliest due time of a ready message."""

import pytest
import redis

from helpers import (ack, info_rmq, nack, now_ms, pop, push, rmq_info,
                     start_replica, wait_replica_matches, wait_until)
from timing_support import Blocked, wait_blocked

COUNTERS = ("pushed", "merged", "popped", "acked", "nacked", "expired", "died", "replayed",
            "cancelled")


def counters(r, q):
    i = rmq_info(r, q)
    return {k: i[k] for k in COUNTERS}


def rmq_totals(r):
    i = info_rmq(r)
    return {k: i["dead" if k == "died" else k] for k in COUNTERS}


def test_each_command_counts_on_its_queue_and_the_sum_is_info_rmq(start_server):
    s = start_server()
    c = s.client()
    assert counters(c, "q") == dict.fromkeys(COUNTERS, 0), "a queue not seen yet: zeros"
    c.execute_command("RMQ.POLICY", "q", "SET", "retries", 1)
    past = 1767225600000  # overdue, in this order
    for i, m in enumerate("abcd"):
        assert push(c, "q", "AT", past + i, m) == 1
    assert push(c, "q", "AT", past, "a") == 0
    assert [m for m, _ in pop(c, "q", "COUNT", 3)] == [b"a", b"b", b"c"]
    assert ack(c, "q", "a", "zz") == 1
    assert nack(c, "q", "b") == b"requeued"
    assert nack(c, "q", "c", "DEAD") == b"dead"
    assert c.execute_command("RMQ.CANCEL", "q", "d") == 1
    assert pop(c, "q", "LEASE", 100) == [(b"b", 2)]
    assert wait_until(lambda: rmq_info(c, "q")["dead"] == 2, timeout=5), "expired by the timer, died"
    assert c.execute_command("RMQ.REPLAY", "q") == 2
    # TPOP deliveries and a served blocked pop count too
    push(c, "t_0", "PRIORITY", 1, "x")
    push(c, "t_1", "PRIORITY", 1, "y")
    assert len(c.execute_command("RMQ.TPOP", "t", 2, "COUNT", 2, "LEASE", 1)) == 2
    blocked = Blocked(s, "RMQ.POP", "u", "BLOCK", 10000)
    blocked.start()
    wait_blocked(c, 1)
    push(c, "u", "RANGE", 1, "z")
    assert blocked.finish(timeout=5) == [(b"z", 1)]
    assert counters(c, "q") == {"pushed": 4, "merged": 1, "popped": 4, "acked": 1, "nacked": 2,
                                "expired": 1, "died": 2, "replayed": 2, "cancelled": 1}
    assert counters(c, "t_1")["popped"] == 1 and counters(c, "u")["popped"] == 1
    assert wait_until(lambda: counters(c, "t_0")["expired"] + counters(c, "t_1")["expired"] == 2, 5)
    total = dict.fromkeys(COUNTERS, 0)
    for q in ("q", "t_0", "t_1", "u"):
        for k, v in counters(c, q).items():
            total[k] += v
    assert total == rmq_totals(c)


def test_counters_survive_the_queue_emptying(r):
    push(r, "e", "PRIORITY", 1, "a")
    pop(r, "e")
    ack(r, "e", "a")
    assert r.exists("e", "meta{e}", "prepare{e}") == 0
    assert counters(r, "e") | {"x": 0} == {**dict.fromkeys(COUNTERS, 0), "pushed": 1, "popped": 1,
                                            "acked": 1, "x": 0}


def test_stats_queues_bounds_the_counted_queues(start_server):
    c = start_server(module_args=["stats-queues", "2"]).client()
    for q in ("a", "b"):
        push(c, q, "PRIORITY", 1, "m")
    assert counters(c, "a")["pushed"] == 1
    assert all(v is None for v in counters(c, "c").values()), "no room: nil"
    push(c, "c", "PRIORITY", 1, "m")
    assert counters(c, "c")["pushed"] is None
    assert info_rmq(c)["pushed"] == 3, "INFO rmq counts every queue"
    push(c, "a", "PRIORITY", 2, "m")
    assert counters(c, "a")["merged"] == 1, "a counted queue keeps counting"
    assert c.config_set("rmq.stats-queues", 1)
    assert sum(counters(c, q)["pushed"] is not None for q in ("a", "b")) == 1, "lowered: one left"
    assert c.config_set("rmq.stats-queues", 0)
    assert counters(c, "a")["pushed"] is None and counters(c, "b")["pushed"] is None
    for bad in (-1, 10 ** 7 + 1, "x"):
        with pytest.raises(redis.ResponseError, match="rmq.stats-queues"):
            c.config_set("rmq.stats-queues", bad)
    assert c.config_get("rmq.stats-queues") == {"rmq.stats-queues": "0"}


def test_lag_ms(r):
    assert rmq_info(r, "none")["lag_ms"] == 0
    push(r, "p", "PRIORITY", 1, "a")
    assert rmq_info(r, "p")["lag_ms"] is None, "nil for priority"
    t = now_ms(r)
    push(r, "f", "AT", t - 5000, "late")
    push(r, "f", "AT", t - 1000, "less-late")
    push(r, "f", "AT", t + 60000, "future")
    p = r.pipeline(transaction=True)
    p.execute_command("RMQ.INFO", "f")
    p.time()
    rep, (s, us) = p.execute()
    info = dict(zip(rep[0::2], rep[1::2])) if isinstance(rep, list) else rep
    # Bounded by `t` (read before the pushes) and the TIME after, in the same MULTI: a
    # server may read the module's clock once for a whole EXEC (Valkey gave 1 ms less than
    # a TIME before it in the same MULTI).
    assert 5000 <= info[b"lag_ms"] <= s * 1000 + us // 1000 - (t - 5000), "the oldest ready one's lateness"
    pop(r, "f", "COUNT", 2)
    assert rmq_info(r, "f")["lag_ms"] == 0, "none ready"
    push(r, "g", "RANGE", 60000, "a")
    assert rmq_info(r, "g")["lag_ms"] == 0


def test_info_on_a_replica_and_after_promotion(start_server):
    p = start_server()
    c = p.client()
    rep = start_replica(start_server, p)
    rc = rep.client()
    before = now_ms(c)
    push(c, "q", "DELAY", 0, "a")
    assert wait_replica_matches(c, rc)
    i = rmq_info(rc, "q")
    assert i["pushed"] == 0 and i["paused"] == 0, "counters are the server's own"
    # The replica's lag is a's, due when it was pushed: no more than the time since then.
    assert 0 <= i["lag_ms"] <= now_ms(rc) - before + 1
    rc.execute_command("REPLICAOF", "NO", "ONE")
    pop(rc, "q")
    assert counters(rc, "q")["popped"] == 1
