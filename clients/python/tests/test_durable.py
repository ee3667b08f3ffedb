"""Durable mode (issue #35): pushes and ACKs that answer only once replicas hold them.

Each test runs a primary and a replica of its own. "The replica is down" is a replica
stopped with SIGSTOP (by the pid started here): connected but acknowledging nothing, as a
partitioned one is.
"""

from __future__ import annotations

import time

import pytest
import redis

import rmq
from server_support import Server, wait_replica_synced

TIMEOUT_MS = 300          # while the replica is down: how long each call waits
UP = rmq.Durable(1, timeout_ms=20_000)   # while it is up: generous, the machine may be busy


@pytest.fixture
def pair():
    """factory(conf=()) -> (primary, replica, primary client, replica client)."""
    started = []

    def start(*conf):
        p = Server(conf=["--repl-diskless-sync-delay", "0", *conf], tag="rmq-durable").start()
        started.append(p)
        rep = Server(conf=["--repl-diskless-sync-delay", "0", *conf, "--replicaof",
                           "127.0.0.1", str(p.port)], tag="rmq-durable").start()
        started.append(rep)
        pc, rc = p.client(), rep.client()
        wait_replica_synced(pc, rc)
        return p, rep, pc, rc

    yield start
    for s in reversed(started):
        s.resume()
        s.stop()


def has_waitaof(c) -> bool:
    """WAITAOF came in Redis 7.2 (Valkey reports redis_version 7.2.4 and has it)."""
    return tuple(int(x) for x in c.info("server")["redis_version"].split(".")[:2]) >= (7, 2)


def test_durable_push_is_on_the_replica_when_it_returns(pair):
    _, _, pc, rc = pair()
    q = rmq.Queue(pc, "d:push", durable=UP)
    assert q.push("a", "b", priority=5) == 2
    # no waiting: WAIT answered only after the replica had both
    assert rc.zrange("d:push", 0, -1, withscores=True) == [(b"a", 5.0), (b"b", 5.0)]
    assert rmq.Queue(pc, "d:push").push("a", priority=7, durable=UP) == 0
    assert rc.zscore("d:push", "a") == 7.0


def test_replica_down_raises_not_durable_then_retry_merges(pair):
    _, rep, pc, rc = pair()
    q = rmq.Queue(pc, "d:down", durable=rmq.Durable(1, timeout_ms=TIMEOUT_MS))
    rep.pause()
    start = time.monotonic()
    with pytest.raises(rmq.NotDurable) as err:
        q.push("job-1", priority=3)
    assert time.monotonic() - start >= TIMEOUT_MS / 1000 * 0.9
    e = err.value
    assert (e.confirmed, e.wanted, e.replies) == (0, 1, [1])
    assert "retry" in str(e) and "0 of 1 replicas" in str(e)
    assert pc.zscore("d:down", "job-1") == 3.0         # done on the primary all the same
    rep.resume()
    # the retry merges into the stored copy, and returns once the replica holds it (a
    # generous timeout: the resumed replica first catches up)
    assert q.push("job-1", priority=3, durable=UP) == 0
    assert pc.zcard("d:down") == 1
    assert rc.zscore("d:down", "job-1") == 3.0


def test_durable_zero_per_call_overrides_the_queue(pair):
    _, rep, pc, _ = pair()
    q = rmq.Queue(pc, "d:off", durable=rmq.Durable(1, timeout_ms=TIMEOUT_MS))
    rep.pause()
    assert q.push("x", priority=1, durable=0) == 1
    with pytest.raises(rmq.NotDurable):
        rmq.Queue(pc, "d:off").push("y", priority=1, durable=rmq.Durable(1, TIMEOUT_MS))


def test_topic_push_waits_after_every_queue(pair):
    _, rep, pc, rc = pair()
    t = rmq.Topic(pc, "d:topic", slots=4, durable=UP)
    msgs = [f"m{i}" for i in range(20)]
    assert t.push(*msgs, priority=1) == 20
    assert sum(rc.zcard(f"d:topic_{i}") for i in range(4)) == 20
    rep.pause()
    with pytest.raises(rmq.NotDurable) as err:
        t.push(*msgs, priority=2, durable=rmq.Durable(1, TIMEOUT_MS))
    assert sum(err.value.replies) == 0                 # every one merged on the primary


def test_durable_ack(pair):
    _, rep, pc, rc = pair()
    q = rmq.Queue(pc, "d:ack", durable=UP)
    q.push("a", "b", priority=1)
    a, b = sorted(q.pop(count=2, lease_ms=60_000), key=lambda m: m.body)
    assert a.ack() is True
    assert rc.zscore("prepare{d:ack}", "a") is None and rc.zscore("prepare{d:ack}", "b")
    rep.pause()
    with pytest.raises(rmq.NotDurable) as err:
        b.ack(durable=rmq.Durable(1, TIMEOUT_MS))
    assert err.value.replies == [1]
    assert pc.zscore("prepare{d:ack}", "b") is None    # acked on the primary
    assert b.settled


def test_durable_pop_from_a_primary_without_its_replica_hands_out_nothing(pair):
    _, rep, pc, rc = pair()
    q = rmq.Queue(pc, "d:pop", durable=UP)
    q.push("a", "b", priority=1)
    [a] = q.pop(lease_ms=60_000)
    assert rc.zscore("prepare{d:pop}", a.body) is not None
    rep.pause()
    with pytest.raises(rmq.NotDurable) as err:
        q.pop(lease_ms=60_000, durable=rmq.Durable(1, TIMEOUT_MS))
    other = b"b" if a.body == b"a" else b"a"
    assert err.value.replies == [[[other, 1]]]
    assert "not handed out" in str(err.value)
    # in flight on the primary all the same, until its lease runs out
    assert pc.zcard("prepare{d:pop}") == 2
    assert q.pop(durable=0) == []
    t = rmq.Topic(pc, "d:tpop", slots=2, durable=rmq.Durable(1, timeout_ms=TIMEOUT_MS))
    with pytest.raises(rmq.NotDurable):
        t.pop()


def test_worker_acks_durably(pair):
    _, _, pc, rc = pair()
    q = rmq.Queue(pc, "d:worker", durable=UP)
    q.push(*[f"w{i}" for i in range(10)], priority=1)
    seen = []

    def handle(msg):
        seen.append(msg.body)
        if len(seen) == 10:
            worker.stop()

    worker = rmq.Worker(q, handle, concurrency=2, block_ms=200)
    worker.run()
    assert sorted(seen) == sorted(f"w{i}".encode() for i in range(10))
    assert worker.stats.processed == 10 and worker.stats.lost == 0
    assert rc.zcard("prepare{d:worker}") == 0 and rc.zcard("d:worker") == 0


@pytest.mark.parametrize("value, error", [
    (-1, ValueError), (True, TypeError), ("1", TypeError), (1.0, TypeError),
    (1001, ValueError)])
def test_bad_durable_values_are_refused(r, value, error):
    with pytest.raises(error, match="durable"):
        rmq.Queue(r, "d:bad", durable=value)
    with pytest.raises(error, match="durable"):
        rmq.Queue(r, "d:bad").push("m", priority=1, durable=value)
    assert r.exists("d:bad") == 0


@pytest.mark.parametrize("kw, error", [
    ({"replicas": 0}, ValueError), ({"timeout_ms": 0}, ValueError),
    ({"timeout_ms": 2 ** 31 + 1}, ValueError), ({"aof": 1}, TypeError)])
def test_bad_durable_settings_are_refused(kw, error):
    with pytest.raises(error, match="durable"):
        rmq.Durable(**kw)


def test_aof_durable(pair):
    _, _, pc, rc = pair("--appendonly", "yes", "--appendfsync", "always")
    q = rmq.Queue(pc, "d:aof", durable=rmq.Durable(1, aof=True))
    if not has_waitaof(pc):
        # the server's own error, not a silent fallback to WAIT
        with pytest.raises(redis.ResponseError, match="(?i)unknown command"):
            q.push("m", priority=1)
        return
    assert q.push("m", priority=1) == 1
    assert rc.zscore("d:aof", "m") == 1.0


def test_aof_durable_without_appendonly_is_the_servers_error(pair):
    _, _, pc, _ = pair()
    q = rmq.Queue(pc, "d:noaof", durable=rmq.Durable(1, aof=True))
    match = "(?i)appendonly" if has_waitaof(pc) else "(?i)unknown command"
    with pytest.raises(redis.ResponseError, match=match):
        q.push("m", priority=1)
