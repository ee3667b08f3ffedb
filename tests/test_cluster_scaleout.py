"""Resharding and failover under load: a short slice of `make bench-cluster`, run by the same
code (cluster_load_support.py, load from bench/driver's cluster mode, built by `make test`).

Every message the driver pushes is unique and checked: nothing a PUSH reply acknowledged may
be lost, and nothing may be delivered twice unless its delivery count shows a lease ran out
(or its PUSH was sent again after a lost reply, which the driver lists as uncertain).
"""

import argparse

import pytest

import cluster_load_support as load_run
from cluster_support import HASH_SLOTS, Cluster


@pytest.fixture(scope="module")
def load():
    if not load_run.DRIVER.exists():
        pytest.fail(f"{load_run.DRIVER} missing: `make bench-driver` builds it (make test does)",
                    pytrace=False)
    # Light load, short phases: bounded on a 2-core machine.
    return argparse.Namespace(producers=1, consumers=1, quantum=100, backlog=5000, block_ms=0,
                              reshard_primaries=3, event_at=2.0, event_after=2.0,
                              lease_ms=2000, node_timeout_ms=1000)


def assert_nothing_lost_or_doubled(r):
    ck = r["check"]
    assert ck["acknowledged"] > 0
    assert ck["lost"] == 0, ck
    assert ck["dup_uncounted"] == 0, ck
    assert ck["unknown_delivered"] == 0 and ck["foreign"] == 0, ck
    assert ck["delivered"] == ck["acknowledged"], ck
    assert r["left"] == [], f"keys left after every message was acked: {r['left']}"


def test_resharding_a_quarter_of_the_slots_under_load(load):
    r = load_run.reshard_run(load)
    assert r["dst_slots_after"] - r["dst_slots_before"] == HASH_SLOTS // 4
    assert r["redirects"] > 0, "traffic to the moved slots was redirected"
    assert_nothing_lost_or_doubled(r)


def test_failover_with_appendfsync_always_under_load(load):
    r = load_run.failover_run(load, "always")
    assert r["secs_to_serve"] < 30
    assert_nothing_lost_or_doubled(r)


def test_a_push_to_an_empty_queue_on_its_own_node_does_not_read_the_cluster_map():
    """An empty queue has no keys; a push to it must not cost a CLUSTER NODES read (the
    check for a slot being imported applies only to slots this node does not serve).
    bench-cluster measures it: every batch of its topic lands in an empty queue often."""
    c = Cluster(1, 0).start()
    try:
        node = c.primary_servers()[0]
        con = node.client()
        con.execute_command("RMQ.PUSH", "warm", "PRIORITY", 0, "x")  # slots read once
        con.execute_command("CONFIG", "RESETSTAT")
        pipe = con.pipeline(transaction=False)  # well inside the second a reading is kept
        for i in range(200):
            pipe.execute_command("RMQ.PUSH", f"fresh:{i}", "PRIORITY", 0, "m")
        assert pipe.execute() == [1] * 200
        stats = con.info("commandstats")
        reads = stats.get("cmdstat_cluster|nodes", {}).get("calls", 0)
        assert reads <= 1, f"{reads} CLUSTER NODES reads for 200 pushes to new queues"
        assert stats["cmdstat_rmq.push"]["calls"] == 200
    finally:
        c.stop()


# Found by make bench-cluster: on a Redis 7.0 cluster node a TPOP ... BLOCK was sometimes
# left unblocked with no reply, when the module served it in the event-loop turn in which
# Redis's own timeout for it fired. The module now keeps a blocked TPOP's time itself.
def test_a_blocked_tpop_on_a_cluster_node_always_gets_a_reply():
    import random
    import threading
    import time

    import redis
    from redis.connection import Connection

    c = Cluster(1, 0).start()
    try:
        node = c.primary_servers()[0]
        stuck, done = [], threading.Event()

        def consumer():
            conn = Connection(host="127.0.0.1", port=node.port, socket_timeout=3, protocol=2)
            try:
                while not done.is_set():
                    conn.send_command("RMQ.TPOP", "t", 1024, "COUNT", 100, "BLOCK", 100)
                    try:
                        got = conn.read_response() or []
                    except redis.TimeoutError:
                        stuck.append(1)  # BLOCK 100 and no reply within 3 s
                        return
                    for q, m, _d in got:
                        conn.send_command("RMQ.ACK", q, m)
                        conn.read_response()
            finally:
                conn.disconnect()

        threads = [threading.Thread(target=consumer) for _ in range(4)]
        for t in threads:
            t.start()
        p, seq, end = node.client(), 0, time.monotonic() + 10
        while time.monotonic() < end and not stuck:
            q = f"t_{random.randrange(1024)}"
            p.execute_command("RMQ.PUSH", q, "PRIORITY", 0, *[f"m{seq + i}" for i in range(100)])
            seq += 100
            time.sleep(random.choice([0, 0.001, 0.01, 0.12]))
        done.set()
        for t in threads:
            t.join(timeout=10)
        assert not stuck, f"{len(stuck)} of 4 consumers got no reply to TPOP ... BLOCK 100"
    finally:
        c.stop()
