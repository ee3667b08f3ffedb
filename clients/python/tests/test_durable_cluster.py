"""Durable mode on a Redis Cluster (issue #35): each command and its WAIT go to the node
that owns the queue's slot, on one connection of that node, so the WAIT counts that node's
replicas; MOVED and ASK are followed; a topic's queues wait on their own nodes.

A 3-primary cluster with a replica each. "A replica is down" is a replica stopped with
SIGSTOP (by the pid started here): connected but acknowledging nothing, as a partitioned
one is.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
import redis
from redis.exceptions import ClusterDownError, TryAgainError

import rmq
from cluster_support import Cluster
from conftest import require
from server_support import wait_for
from test_worker_cluster import fail_over

TIMEOUT_MS = 300                          # while a replica is down: how long each call waits
UP = rmq.Durable(1, timeout_ms=20_000)    # while they are up: generous, the machine is busy


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    cl = Cluster(masters=3, replicas=1).start()
    # the nodes learn who replicates whom by gossip, a moment after the cluster is ok
    wait_for(lambda: all(cl.replicas_of(p) for p, _, _ in cl.primaries()), timeout=30,
             interval=0.1, what="every primary's replica known")
    yield cl
    for n in cl.nodes:
        n.resume()
    cl.stop()


@pytest.fixture
def rc(cluster: Cluster) -> Iterator[Any]:
    cluster.wait_ok(timeout=30)
    cluster.wait_replicas_synced(timeout=30)
    c = cluster.client()
    yield c
    c.close()


def replica(cluster: Cluster, key: str) -> Any:
    [rep] = cluster.replicas_of(cluster.owner(key))
    return rep


def reader(node: Any) -> Any:
    """A client of one node that reads even where the node is a replica (READONLY is a
    connection's state: one connection)."""
    c = node.client(single_connection_client=True)
    c.execute_command("READONLY")
    return c


def test_durable_push_ack_pop_are_on_the_owners_replica(cluster: Cluster, rc: Any) -> None:
    q = rmq.Queue(rc, "dc:q", durable=UP)
    rep = reader(replica(cluster, "dc:q"))
    assert q.push("a", "b", priority=5) == 2
    # no waiting: WAIT answered on the owner only after its replica had both
    assert rep.zrange("dc:q", 0, -1, withscores=True) == [(b"a", 5.0), (b"b", 5.0)]
    a, b = sorted(q.pop(count=2, lease_ms=60_000), key=lambda m: m.body)
    assert {m for m, _ in rep.zrange("prepare{dc:q}", 0, -1, withscores=True)} == {b"a", b"b"}
    assert a.ack() is True
    assert rep.zscore("prepare{dc:q}", "a") is None and rep.zscore("prepare{dc:q}", "b")


def test_topic_waits_on_each_queues_own_node(cluster: Cluster, rc: Any) -> None:
    require(cluster.alive()[0].conn(), "tpop")
    t = rmq.Topic(rc, "dc:topic", slots=16, durable=UP)
    assert len({cluster.owner(q).port for q in t.queues}) == 3, "spread over the primaries"
    msgs = [f"m{i}" for i in range(60)]
    assert t.push(*msgs, priority=1) == 60
    on_replicas = {q: reader(replica(cluster, q)).zcard(q) for q in t.queues}
    assert sum(on_replicas.values()) == 60
    got = []
    for node in rc.get_primaries():
        served = [q for q in t.queues if cluster.owner(q).port == node.port]
        popped = t.pop(count=60, lease_ms=60_000, node=node)
        assert {m.queue for m in popped} <= set(served)
        assert len(popped) == sum(on_replicas[q] for q in served)
        for m in popped:          # in flight on that node's replica when TPOP answered
            assert reader(replica(cluster, m.queue)).zscore(f"prepare{{{m.queue}}}", m.body)
        got += popped
    assert sorted(m.body.decode() for m in got) == sorted(msgs)


def test_owner_replica_down_raises_not_durable_other_nodes_unaffected(cluster: Cluster,
                                                                       rc: Any) -> None:
    down, fine = "dc:down", next(f"dc:fine{i}" for i in range(100)
                                 if cluster.owner(f"dc:fine{i}") is not cluster.owner("dc:down"))
    owner, rep = cluster.owner(down), replica(cluster, down)
    short = rmq.Durable(1, timeout_ms=TIMEOUT_MS)
    rep.pause()
    try:
        with pytest.raises(rmq.NotDurable) as err:
            rmq.Queue(rc, down).push("job", priority=3, durable=short)
        assert (err.value.confirmed, err.value.wanted, err.value.replies) == (0, 1, [1])
        assert owner.conn().zscore(down, "job") == 3.0       # done on the owner all the same
        assert rmq.Queue(rc, fine).push("job", priority=3, durable=short) == 1
        # a topic call waits on every node it wrote to: one node short is NotDurable
        t = rmq.Topic(rc, "dc:tdown", slots=16)
        with pytest.raises(rmq.NotDurable):
            t.push(*[f"m{i}" for i in range(40)], priority=1, durable=short)
    finally:
        rep.resume()
    # the retry merges into the stored copy, and returns once the replica holds it
    assert rmq.Queue(rc, down).push("job", priority=3, durable=UP) == 0
    assert reader(rep).zscore(down, "job") == 3.0
    rep.pause()
    try:
        with pytest.raises(rmq.NotDurable, match="not handed out"):
            rmq.Queue(rc, down).pop(lease_ms=60_000, durable=short)
    finally:
        rep.resume()


def test_client_follows_a_failover(cluster: Cluster, rc: Any) -> None:
    q = rmq.Queue(rc, "dc:fo", durable=UP)
    assert q.push("before", priority=1) == 1
    old = cluster.owner("dc:fo")
    new = fail_over(cluster, old)
    cluster.wait_replicas_synced(timeout=30)
    # the client's slot map still names the old primary: its MOVED is followed, and the
    # WAIT goes to the new primary, whose replica is now the old one
    assert q.push("after", priority=1) == 1
    assert [m for m, _ in new.conn().zrange("dc:fo", 0, -1, withscores=True)] == [b"after",
                                                                                    b"before"]
    assert reader(old).zscore("dc:fo", "after") == 1.0
    [m, _] = q.pop(count=2, lease_ms=60_000)
    assert m.ack() is True


def test_client_follows_ask_during_a_slot_migration(cluster: Cluster, rc: Any) -> None:
    key = "dc:ask"
    slot = cluster.keyslot(key)
    src = cluster.owner(key)
    dst = next(p for p, _, _ in cluster.primaries() if p is not src)
    src_id, dst_id = cluster.node_id(src), cluster.node_id(dst)
    dst.conn().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    src.conn().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    q = rmq.Queue(rc, key, durable=UP)
    try:
        # the queue is not on the source: it answers ASK; the push follows it to the target
        # (after ASKING), which refuses a queue that has not arrived yet: retryable
        with pytest.raises(TryAgainError, match="being migrated to this node"):
            q.push("m", priority=2)
    finally:
        for p, _, _ in cluster.primaries():
            p.conn().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    cluster.wait_converged(timeout=30)
    # the slot is the target's now: the retry gets MOVED there, and waits for its replica
    assert q.push("m", priority=2) == 1
    assert cluster.owner(key) is dst
    assert reader(replica(cluster, key)).zscore(key, "m") == 2.0


def test_owner_killed_connection_error_then_new_primary_without_replica(cluster: Cluster,
                                                                        rc: Any) -> None:
    key = "dc:kill"
    q = rmq.Queue(rc, key, durable=rmq.Durable(1, timeout_ms=TIMEOUT_MS))
    assert q.push("before", priority=1, durable=UP) == 1
    old, rep = cluster.owner(key), replica(cluster, key)
    old.kill9()
    # the outcome of a command on a lost connection is unknown: raised, for the caller to
    # retry, and the slot map is read again for that retry
    with pytest.raises(redis.ConnectionError):
        q.push("job", priority=1)

    def pushed() -> Any:
        try:
            return q.push("job", priority=1)
        except (redis.ConnectionError, ClusterDownError):
            return None          # the replica is not promoted yet
    # the promoted replica has no replica of its own: done there, but not durable
    with pytest.raises(rmq.NotDurable) as err:
        wait_for(pushed, timeout=60, interval=0.2, what="the replica promoted")
    assert err.value.replies == [1]
    assert rep.conn().zscore(key, "job") == 1.0 and rep.conn().zscore(key, "before") == 1.0
    # the old primary comes back as the new one's replica: the retry merges, durably
    old.restart()
    cluster.wait_ok(timeout=60)
    cluster.wait_replicas_synced(timeout=60)
    assert q.push("job", priority=1, durable=UP) == 0
    assert reader(old).zscore(key, "job") == 1.0
