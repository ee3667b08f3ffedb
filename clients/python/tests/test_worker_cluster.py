"""rmq on a 3-primary Redis Cluster (1 replica each): a manual failover (CLUSTER FAILOVER
on a replica) while the worker consumes loses nothing; a topic spreads over the primaries."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any, Iterator

import pytest

import rmq
from cluster_support import Cluster
from conftest import require, subprocess_env
from server_support import wait_for


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    cl = Cluster(masters=3, replicas=1).start()
    yield cl
    cl.stop()


@pytest.fixture
def rc(cluster: Cluster) -> Iterator[Any]:
    cluster.wait_ok(timeout=30)
    c = cluster.client()
    yield c
    c.close()


def fail_over(cluster: Cluster, primary: Any) -> Any:
    """CLUSTER FAILOVER on a replica of `primary`; returns it once it is the primary. The
    replica must be in sync and known to the primary as its replica (else the primary
    ignores the request and the manual failover times out: it is then asked again)."""
    primary_id = cluster.node_id(primary)

    def synced_replica() -> Any:
        known = {e["port"] for e in cluster.view(primary) if e["master"] == primary_id}
        for rep in cluster.replicas_of(primary):
            info = rep.conn().info("replication")
            if (rep.port in known and info.get("role") == "slave"
                    and info.get("master_link_status") == "up"):
                return rep
        return None
    replica = wait_for(synced_replica, timeout=30, interval=0.1,
                       what="a replica of the primary in sync")
    for _attempt in range(3):
        replica.conn().execute_command("CLUSTER", "FAILOVER")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if replica.conn().info("replication").get("role") == "master":
                cluster.wait_ok(timeout=30)
                return replica
            time.sleep(0.1)
    pytest.fail(f"the replica did not take over:\n{replica.log_tail()}", pytrace=False)


@pytest.mark.parametrize("kind", ["queue", "topic"])
def test_failover_during_consumption_loses_nothing(cluster: Cluster, rc: Any, kind: str) -> None:
    if kind == "topic":
        require(cluster.alive()[0].conn(), "tpop")
        source: Any = rmq.Topic(rc, f"fo-{kind}", 16)
        queues = source.queues
    else:
        source = rmq.Queue(rc, f"fo-{kind}")
        queues = [source.name]
    owners = {cluster.owner(q).port for q in queues}
    if kind == "topic":
        assert len(owners) == 3, "a topic of 16 slots spreads over the 3 primaries"
    seen: dict[bytes, int] = {}
    lock = threading.Lock()
    failing_over = threading.Event()      # handlers slow down meanwhile: messages in flight

    def handle(m: rmq.Message) -> None:
        time.sleep(0.05 if failing_over.is_set() else 0.002)
        with lock:
            seen[m.body] = seen.get(m.body, 0) + 1

    first = [b"%s-a%04d" % (kind.encode(), i) for i in range(3000)]
    second = [b"%s-b%04d" % (kind.encode(), i) for i in range(500)]
    source.push(*first, priority=1)
    worker = rmq.Worker(source, handle, concurrency=8, lease_ms=5000, block_ms=500)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(seen) >= 200, timeout=60, what="consumption to be under way")
        failing_over.set()
        victim = cluster.owner(queues[0])
        new_primary = fail_over(cluster, victim)
        failing_over.clear()
        assert cluster.owner(queues[0]) is new_primary
        assert len(seen) < len(first), "consumption ended before the failover"
        source.push(*second, priority=1)            # also lands on the new primary
        wait_for(lambda: set(first + second) <= set(seen), timeout=120, interval=0.2,
                 what="every message processed after the failover")
    finally:
        worker.stop()
        thread.join(60)
    assert not thread.is_alive()
    info = source.info()
    assert (info["waiting"], info["inflight"], info["dead"]) == (0, 0, 0)
    assert worker.stats.processed >= len(first) + len(second)


def test_topic_on_a_cluster_push_info_pop_and_cli(cluster: Cluster, rc: Any) -> None:
    """Pushes spread over the primaries (one pipeline), INFO summed across nodes, TPOP sent
    to one primary takes only its queues, `python -m rmq stats --cluster` agrees."""
    require(cluster.alive()[0].conn(), "tpop")
    topic = rmq.Topic(rc, "spread", 8)
    msgs = [b"s%03d" % i for i in range(200)]
    assert topic.push(*msgs, priority=1) == 200
    assert topic.info()["waiting"] == 200
    with pytest.raises(ValueError, match="node"):
        topic.pop()
    node = rc.get_primaries()[0]
    mine = {q for q in topic.queues if cluster.owner(q).port == node.port}
    got = topic.pop(count=500, lease_ms=10_000, node=node)
    assert got and {m.queue for m in got} <= mine
    assert len(got) == sum(1 for m in msgs if topic.queue_for(m) in mine)
    p = subprocess.run([sys.executable, "-m", "rmq", "stats", "spread", "8", "--cluster",
                        "--port", str(cluster.alive()[0].port)], capture_output=True,
                       text=True, timeout=60, env=subprocess_env())
    assert p.returncode == 0, p.stderr
    total = p.stdout.splitlines()[-1].split()
    left = str(200 - len(got))
    assert total == ["total", left, left, str(len(got)), "0"]
    for m in got:
        assert m.ack()
    assert topic.info()["inflight"] == 0
