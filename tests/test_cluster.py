"""Redis Cluster (docs/COMMANDS.md: Model, Keys/topics, Replication, persistence, cluster).

One 6-node cluster (3 primaries, 1 replica each; see cluster_support.py) for the module:
  - a topic of 64 slots produced and consumed through redis-py's RedisCluster: the queues
    spread over all three primaries, every message is consumed exactly once, and each queue's
    keys (Q, prepare{Q}, dead{Q}, meta{Q}) share Q's hash slot and live on its owner;
  - resharding: the slot of a queue with waiting and in-flight messages moves to another
    primary while a consumer keeps consuming; nothing is lost and the new owner serves it;
    its timer rolls back a lease that runs out after the move;
  - failover: after kill -9 of a queue's primary, its promoted replica holds everything WAIT
    acknowledged and rolls back the inherited lease.
"""

import socket
import threading
import time
import zlib
from collections import Counter

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from cluster_support import Cluster, migrate_slot
from helpers import dead, prep
from server_bin import server_name
from server_support import wait_for

TOPIC = "orders"
SLOTS = 64


def meta(q):
    return b"meta{" + (q.encode() if isinstance(q, str) else q) + b"}"


def queue_keys(q):
    qb = q.encode() if isinstance(q, str) else q
    return [qb, prep(qb), dead(qb), meta(qb)]


def now_ms():
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def cluster():
    cl = Cluster(masters=3, replicas=1).start()
    yield cl
    cl.stop()


@pytest.fixture
def rc(cluster):
    cluster.wait_ok(timeout=30)
    c = cluster.client()
    yield c
    c.close()


def route(msg, slots=SLOTS, topic=TOPIC):
    return f"{topic}_{zlib.crc32(msg) % slots}"


def queue_dump(conn, q):
    """The four keys of q on one node: {key: contents} (absent keys left out)."""
    out = {}
    for k in queue_keys(q):
        t = conn.type(k)
        if t == b"zset":
            out[k] = conn.zrange(k, 0, -1, withscores=True)
        elif t == b"hash":
            out[k] = sorted(conn.hgetall(k).items())
        elif t != b"none":
            out[k] = (t, None)
    return out


def test_topic_spreads_over_primaries_and_is_consumed_exactly_once(cluster, rc):
    any_node = rc.get_random_node()
    # ROUTE agrees with zlib.crc32 (and the contract's vectors)
    for topic, n, basis, want in (("t", 8, "hello", b"t_6"), ("t", 16, "item:42", b"t_13"),
                                  ("t", 1024, "order-1001", b"t_569"), ("t", 4, "", b"t_0")):
        assert rc.execute_command("RMQ.ROUTE", topic, n, basis, target_nodes=any_node) == want
    messages = [b"order-%d" % i for i in range(1200)] + [b"bin\x00\xff-%d" % i for i in range(40)]
    for m in messages[::25]:
        assert rc.execute_command("RMQ.ROUTE", TOPIC, SLOTS, m,
                                  target_nodes=rc.get_random_node()) == route(m).encode()

    by_queue = {}
    for m in messages:
        by_queue.setdefault(route(m), []).append(m)
    queues = [f"{TOPIC}_{i}" for i in range(SLOTS)]
    assert set(by_queue) == set(queues), "1240 messages should reach all 64 slots"
    for i, q in enumerate(queues):
        msgs = by_queue[q]
        for j in range(0, len(msgs), 10):
            if i % 2:
                n = rc.execute_command("RMQ.PUSH", q, "PRIORITY", i, *msgs[j:j + 10])
            else:
                n = rc.execute_command("RMQ.PUSH", q, "DELAY", 0, *msgs[j:j + 10])
            assert n == len(msgs[j:j + 10])

    # the queues spread over all three primaries
    primaries = cluster.primaries()
    assert len(primaries) == 3
    owners = {q: cluster.owner_of_slot(cluster.keyslot(q)) for q in queues}
    assert {o.port for o in owners.values()} == {p.port for p, _i, _r in primaries}

    # give every queue all four keys: one held lease, one dead message, the rest waiting
    held, consumed = {}, []
    for q in queues:
        (m1, _), = rc.execute_command("RMQ.POP", q, "LEASE", 60_000)
        (m2, _), = rc.execute_command("RMQ.POP", q, "LEASE", 60_000)
        assert rc.execute_command("RMQ.NACK", q, m2, "DEAD") == b"dead"
        held[q] = m1
    for q in queues:
        keys = queue_keys(q)
        slot_ids = {cluster.keyslot(k) for k in keys}
        assert slot_ids == {cluster.keyslot(q)}, f"keys of {q} in several slots: {slot_ids}"
        owner = owners[q]
        assert owner.conn().exists(*keys) == 4, f"{q}: not all four keys on its owner"
        for p, _id, _r in primaries:
            if p is not owner:  # (EXISTS there would answer MOVED)
                n = p.conn().execute_command("CLUSTER", "COUNTKEYSINSLOT", cluster.keyslot(q))
                assert n == 0, f"{q}: keys in its slot on a primary not owning it"
    # no primary holds a key outside the slots it owns
    for p, _id, ranges in primaries:
        for k in p.conn().keys("*"):
            s = cluster.keyslot(k)
            assert any(a <= s <= b for a, b in ranges), f"{k!r} (slot {s}) on port {p.port}"

    # consume everything through the cluster client, each message acked once
    for q in queues:
        while True:
            got = rc.execute_command("RMQ.POP", q, "COUNT", 50, "LEASE", 30_000)
            if not got:
                break
            ms = [m for m, _ in got]
            assert rc.execute_command("RMQ.ACK", q, *ms) == len(ms)
            consumed += ms
        assert rc.execute_command("RMQ.ACK", q, held[q]) == 1
        consumed.append(held[q])
        assert rc.execute_command("RMQ.REPLAY", q) == 1
        got = rc.execute_command("RMQ.POP", q, "COUNT", 10)
        assert len(got) == 1 and got[0][1] == 1
        assert rc.execute_command("RMQ.ACK", q, got[0][0]) == 1
        consumed.append(got[0][0])
    dup = [m for m, n in Counter(consumed).items() if n > 1]
    assert not dup, f"consumed more than once: {dup[:5]}"
    assert sorted(consumed) == sorted(messages)
    # nothing left behind on any primary
    for p, _id, _r in primaries:
        left = [k for k in p.conn().keys("*") if k.startswith((b"orders_", b"prepare{orders_",
                                                               b"dead{orders_", b"meta{orders_"))]
        assert not left, f"keys left on port {p.port}: {left[:5]}"


class Consumer(threading.Thread):
    """Consumes one queue through its own RedisCluster client until stopped."""

    def __init__(self, cluster, q):
        super().__init__(daemon=True)
        self.rc = cluster.client()
        self.q = q
        self.acked = []
        self.errors = []
        self.stop_flag = threading.Event()

    def run(self):
        try:
            while not self.stop_flag.is_set():
                try:
                    got = self.rc.execute_command("RMQ.POP", self.q, "COUNT", 2, "LEASE", 60_000)
                    if got:
                        ms = [m for m, _ in got]
                        n = self.rc.execute_command("RMQ.ACK", self.q, *ms)
                        if n != len(ms):
                            self.errors.append(f"ACK of {ms} replied {n}")
                        self.acked += ms
                except redis.RedisError as e:
                    self.errors.append(repr(e))
                time.sleep(0.004)
        finally:
            self.rc.close()

    def stop(self):
        self.stop_flag.set()
        self.join(timeout=10)
        assert not self.is_alive()


def other_primary(cluster, server):
    return next(p for p, _i, _r in cluster.primaries() if p is not server)


class TopicLoop(threading.Thread):
    """One RMQ.TPOP ... BLOCK loop on one primary, acking what it gets, until stopped."""

    def __init__(self, node, topic, slots):
        super().__init__(daemon=True)
        self.conn = node.conn()
        self.topic, self.slots = topic, slots
        self.got, self.errors = [], []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            try:
                rep = self.conn.execute_command("RMQ.TPOP", self.topic, self.slots, "COUNT", 50,
                                                "LEASE", 60_000, "BLOCK", 200)
            except redis.RedisError as e:
                self.errors.append(e)
                return
            for q, m, d in rep or []:
                assert self.conn.execute_command("RMQ.ACK", q, m) == 1
                self.got.append((q, m, d))

    def stop(self):
        self.halt.set()
        self.join(10)


def test_one_tpop_loop_per_primary_consumes_a_topic_exactly_once(cluster, rc):
    topic, slots = "tp", 16
    primaries = [p for p, _i, _r in cluster.primaries()]
    queues = {f"{topic}_{i}" for i in range(slots)}
    assert len({cluster.owner(q).port for q in queues}) == 3, "the topic spreads over every primary"
    loops = [TopicLoop(p, topic, slots) for p in primaries]
    for t in loops:
        t.start()
    messages = [b"tp-%d" % i for i in range(2000)]
    by_queue = {}
    for m in messages:
        by_queue.setdefault(route(m, slots, topic), []).append(m)
    try:
        for q, msgs in by_queue.items():
            for j in range(0, len(msgs), 50):
                rc.execute_command("RMQ.PUSH", q, "DELAY", 0, *msgs[j:j + 50])
        wait_for(lambda: sum(len(t.got) for t in loops) >= len(messages) or any(t.errors for t in loops),
                 timeout=60, interval=0.05, what="the loops to consume every message")
    finally:
        for t in loops:
            t.stop()
    assert not any(t.errors for t in loops), [t.errors for t in loops]
    got = [m for t in loops for _q, m, _d in t.got]
    assert sorted(got) == sorted(messages), "every message exactly once"
    for t, p in zip(loops, primaries):
        for q, _m, d in t.got:
            assert d == 1 and cluster.owner(q) is p, "each loop serves its own primary's queues"
        assert t.got, "every primary's loop consumed something"


def test_blocked_tpop_on_a_cluster_node(cluster, rc):
    """Under a cluster a blocked TPOP waits without blocking on keys (they span slots): woken
    by a push to any of the node's queues of the topic, in arrival order, nil on timeout, and
    a consumer that disconnects while blocked is let go."""
    topic, slots = "tb", 8
    q = next(f"{topic}_{i}" for i in range(slots))
    node = cluster.owner(q)
    first, second = node.conn(), node.conn()
    results = {}

    def blocked(name, conn, timeout_ms):
        results[name] = conn.execute_command("RMQ.TPOP", topic, slots, "BLOCK", timeout_ms)

    t1 = threading.Thread(target=blocked, args=("first", first, 10_000))
    t1.start()
    wait_for(lambda: node.conn().info("rmq").get("rmq_blocked_clients") == 1, timeout=5, what="first blocked")
    t2 = threading.Thread(target=blocked, args=("second", second, 10_000))
    t2.start()
    wait_for(lambda: node.conn().info("rmq").get("rmq_blocked_clients") == 2, timeout=5, what="second blocked")
    rc.execute_command("RMQ.PUSH", q, "DELAY", 0, "one")
    t1.join(10)
    assert results.get("first") == [[q.encode(), b"one", 1]], results
    assert t2.is_alive(), "the second waiter came later"
    rc.execute_command("RMQ.PUSH", q, "DELAY", 0, "two")
    t2.join(10)
    assert results.get("second") == [[q.encode(), b"two", 1]], results
    assert node.conn().execute_command("RMQ.TPOP", topic, slots, "BLOCK", 100) is None
    # a consumer that goes away while blocked
    raw = socket.create_connection(("127.0.0.1", node.port))
    raw.sendall(b"*5\r\n$8\r\nRMQ.TPOP\r\n$2\r\ntb\r\n$1\r\n8\r\n$5\r\nBLOCK\r\n$1\r\n0\r\n")
    wait_for(lambda: node.conn().info("rmq").get("rmq_blocked_clients") == 1, timeout=5, what="raw blocked")
    raw.close()
    wait_for(lambda: node.conn().info("rmq").get("rmq_blocked_clients") == 0, timeout=5, what="raw let go")
    rc.execute_command("RMQ.PUSH", q, "DELAY", 0, "three")
    assert node.conn().execute_command("RMQ.TPOP", topic, slots) == [[q.encode(), b"three", 1]]
    assert rc.execute_command("RMQ.ACK", q, "one", "two", "three") == 3
    assert node.alive()


def test_tpop_follows_resharding(cluster, rc):
    """The new owner of a migrated slot serves its queue through TPOP (the keys arrive by
    MIGRATE); the old owner no longer does; an importing node does not touch them."""
    topic, slots = "tr", 4
    q = f"{topic}_1"
    slot = cluster.keyslot(q)
    src = cluster.owner_of_slot(slot)
    dst = other_primary(cluster, src)
    rc.execute_command("RMQ.PUSH", q, "DELAY", 0, "a", "b")
    s, d = src.conn(), dst.conn()
    # importing: the keys are on dst before the slot is
    d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", cluster.node_id(src))
    s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", cluster.node_id(dst))
    keys = s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
    s.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys)
    time.sleep(0.2)
    assert d.execute_command("RMQ.TPOP", topic, slots, "COUNT", 5) is None, "not served while importing"
    for p, _id, _r in cluster.primaries():
        p.conn().execute_command("CLUSTER", "SETSLOT", slot, "NODE", cluster.node_id(dst))
    got = wait_for(lambda: d.execute_command("RMQ.TPOP", topic, slots, "COUNT", 5), timeout=5,
                   interval=0.05, what="the new owner to serve the queue")
    assert sorted(m for _q, m, _d in got) == [b"a", b"b"]
    assert s.execute_command("RMQ.TPOP", topic, slots, "COUNT", 5) is None
    assert d.execute_command("RMQ.ACK", q, "a", "b") == 2


def test_reshard_that_moves_q_first_keeps_the_keys_still_to_go(cluster, rc):
    """MIGRATE deletes each key on the source as it leaves. With `Q` moved first and nothing
    in flight or dead, the source must not take that for a queue deleted by hand and drop
    the keys still to go (the group's held-back messages in park{Q}, and meta{Q}): the new
    owner ends up with the whole queue."""
    q = "rs:first"
    slot = cluster.keyslot(q)
    src = cluster.owner_of_slot(slot)
    dst = other_primary(cluster, src)
    rc.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "GROUP", "g", "m1", "m2", "m3")
    s, d = src.conn(), dst.conn()
    assert s.zrange(f"park{{{q}}}", 0, -1) == [b"m2", b"m3"], "held back behind m1"
    d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", cluster.node_id(src))
    s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", cluster.node_id(dst))
    s.execute_command("MIGRATE", "127.0.0.1", dst.port, q, 0, 5000)
    time.sleep(0.5)  # the source's deletion handler has run (a timer of 0 ms)
    rest = sorted(s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100))
    assert rest == sorted(k.encode() for k in (f"meta{{{q}}}", f"park{{{q}}}", f"parkidx{{{q}}}"))
    s.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *rest)
    for p, _id, _r in cluster.primaries():
        p.conn().execute_command("CLUSTER", "SETSLOT", slot, "NODE", cluster.node_id(dst))
    got = []
    for _ in range(3):
        popped = wait_for(lambda: rc.execute_command("RMQ.POP", q), timeout=5, interval=0.05,
                          what="the group's next message on the new owner")
        got += [m for m, _d in popped]
        assert rc.execute_command("RMQ.ACK", q, *[m for m, _d in popped]) == len(popped)
    assert got == [b"m1", b"m2", b"m3"]
    assert d.execute_command("RMQ.POP", q) is None


def test_reshard_while_consuming_loses_nothing(cluster, rc):
    q = "rs:busy"
    slot = cluster.keyslot(q)
    src = cluster.owner_of_slot(slot)
    dst = other_primary(cluster, src)
    messages = [b"rs-%d" % i for i in range(1500)]
    for j in range(0, len(messages), 100):
        rc.execute_command("RMQ.PUSH", q, "PRIORITY", 1, *messages[j:j + 100])
    held = [m for m, _ in rc.execute_command("RMQ.POP", q, "COUNT", 10, "LEASE", 120_000)]
    before_src = queue_dump(src.conn(), q)
    assert len(before_src) == 3  # Q, prepare{Q}, meta{Q}

    consumer = Consumer(cluster, q)
    consumer.start()
    try:
        # consuming before, during and after the move; counted rather than timed, so that
        # a stalled machine makes the test slower, not wrong
        wait_for(lambda: len(consumer.acked) >= 10 or consumer.errors, timeout=20,
                 interval=0.01, what="the consumer to get going")
        moved = migrate_slot(cluster, slot, src, dst)
        assert set(queue_keys(q)[:2]) <= set(moved), f"moved keys: {moved}"
        after_move = len(consumer.acked)
        wait_for(lambda: len(consumer.acked) >= after_move + 10 or consumer.errors,
                 timeout=20, interval=0.01, what="the consumer to go on at the new owner")
    finally:
        consumer.stop()
    assert not consumer.errors, consumer.errors[:5]
    assert len(consumer.acked) >= 20, "the consumer hardly consumed anything"

    # the keys live on the new owner only
    assert src.conn().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    on_dst = queue_dump(dst.conn(), q)
    assert prep(q) in on_dst and q.encode() in on_dst
    assert cluster.owner_of_slot(slot) is dst

    # nothing lost, nothing delivered twice
    waiting = [m for m, _ in on_dst[q.encode()]]
    inflight = [m for m, _ in on_dst[prep(q)]]
    assert sorted(inflight) == sorted(held)
    everything = consumer.acked + waiting + inflight
    dup = [m for m, n in Counter(everything).items() if n > 1]
    assert not dup, f"messages in two places / acked twice: {dup[:5]}"
    assert sorted(everything) == sorted(messages)

    # the new owner serves RMQ commands on the queue (through the cluster client)
    info = dict(zip(*[iter(rc.execute_command("RMQ.INFO", q))] * 2))
    assert info[b"inflight"] == len(held) and info[b"waiting"] == len(waiting)
    assert rc.execute_command("RMQ.ACK", q, *held) == len(held)
    rest = []
    while True:
        got = rc.execute_command("RMQ.POP", q, "COUNT", 500, "LEASE", 30_000)
        if not got:
            break
        ms = [m for m, _ in got]
        assert rc.execute_command("RMQ.ACK", q, *ms) == len(ms)
        rest += ms
    assert sorted(rest) == sorted(waiting)
    assert dst.conn().exists(*queue_keys(q)) == 0, "an emptied queue must leave no keys"


def test_reshard_new_owner_rolls_back_lease_that_expires_after_the_move(cluster, rc):
    q = "rs:lease"
    slot = cluster.keyslot(q)
    src = cluster.owner_of_slot(slot)
    dst = other_primary(cluster, src)
    rc.execute_command("RMQ.PUSH", q, "PRIORITY", 3, "short", "other")
    assert rc.execute_command("RMQ.POP", q, "LEASE", 5000) == [[b"short", 1]]
    deadline = int(src.conn().zscore(prep(q), b"short"))
    migrate_slot(cluster, slot, src, dst)
    assert now_ms() < deadline - 300, "the move took too long to test a later expiry"
    assert cluster.owner_of_slot(slot) is dst
    assert dst.conn().zscore(prep(q), b"short") == deadline
    # the contract: a lease is rolled back within 1 s of its expiry by the queue's primary
    try:
        wait_for(lambda: now_ms() > deadline and dst.conn().zscore(prep(q), b"short") is None,
                 timeout=(deadline - now_ms()) / 1000 + 1.5, interval=0.02,
                 what="the new owner to roll back the lease that moved in with the slot")
        assert dst.conn().zscore(q, b"short") == 3
    finally:
        # leave nothing behind for later tests
        rc.execute_command("RMQ.ACK", q, b"short")
        rc.execute_command("RMQ.CANCEL", q, b"short", b"other")


def test_reshard_queue_whose_messages_are_all_in_flight(cluster, rc):
    """While its slot is MIGRATING, a queue whose store key Q is absent (every message in
    flight) is still on the source, but Redis decides ASK from the declared key Q alone and
    sends commands on it to the importing node. There the module answers TRYAGAIN until the
    queue has arrived -- rather than answer from no data (ACK 0) or create Q/meta{Q} there,
    which would make the MIGRATE of the source's keys fail with BUSYKEY. After the move the
    new owner serves the whole queue."""
    q = "rs:allinflight"
    slot = cluster.keyslot(q)
    src = cluster.owner_of_slot(slot)
    dst = other_primary(cluster, src)
    src_id, dst_id = cluster.node_id(src), cluster.node_id(dst)
    rc.execute_command("RMQ.PUSH", q, "PRIORITY", 3, "a", "b", "c")
    assert len(rc.execute_command("RMQ.POP", q, "COUNT", 3, "LEASE", 60_000)) == 3
    assert src.conn().exists(q) == 0 and src.conn().exists(prep(q)) == 1
    finished = False
    try:
        dst.conn().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        src.conn().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        with pytest.raises(redis.exceptions.AskError):
            src.conn().execute_command("RMQ.ACK", q, "a")
        target = redis.Redis(host="127.0.0.1", port=dst.port, single_connection_client=True)
        for cmd in (("RMQ.ACK", q, "a"), ("RMQ.PUSH", q, "PRIORITY", 1, "d"),
                    ("RMQ.NACK", q, "a"), ("RMQ.EXTEND", q, "a", 1000),
                    ("RMQ.POLICY", q, "SET", "retries", 1), ("RMQ.POLICY", q, "RESET")):
            target.execute_command("ASKING")
            with pytest.raises(redis.exceptions.TryAgainError):
                target.execute_command(*cmd)
        for k in queue_keys(q):  # nothing created on the importing node
            target.execute_command("ASKING")
            assert target.exists(k) == 0, k
        keys = src.conn().execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
        src.conn().execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys)
        for p, _id, _r in cluster.primaries():
            p.conn().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        finished = True
        assert rc.execute_command("RMQ.ACK", q, "a") == 1
        assert rc.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "d") == 1
        on_dst = queue_dump(dst.conn(), q)
        assert sorted(m for m, _ in on_dst.get(prep(q), [])) == [b"b", b"c"]
        assert [m for m, _ in on_dst.get(q.encode(), [])] == [b"d"]
    finally:
        if not finished:  # force the slot over so later tests see a sane cluster
            keys = src.conn().execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
            if keys:
                src.conn().execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000,
                                           "REPLACE", "KEYS", *keys)
            for p, _id, _r in cluster.primaries():
                p.conn().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        rc.delete(*queue_keys(q))


def test_valkey_atomic_slot_migration_moves_queue_and_its_leases(cluster, rc):
    """Valkey >= 9: CLUSTER MIGRATESLOTS moves a slot with no ASK window (so none of the
    hazard above). Valkey refuses it unless every loaded module declares support
    (VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION); the queue must arrive whole and the
    target's timer must roll back a lease that runs out after the move."""
    if server_name() != "valkey":
        pytest.skip("atomic slot migration is a Valkey >= 9 feature")
    # Not supported yet: the module does not declare HANDLE_ATOMIC_SLOT_MIGRATION, so Valkey
    # refuses CLUSTER MIGRATESLOTS while it is loaded (README, "Redis Cluster").
    pytest.skip("RMQ does not support Valkey's atomic slot migration yet; use redis-cli --cluster reshard")
    q = "asm:q"
    slot = cluster.keyslot(q)
    src = cluster.owner_of_slot(slot)
    dst = other_primary(cluster, src)
    rc.execute_command("RMQ.PUSH", q, "PRIORITY", 9, "short")
    rc.execute_command("RMQ.PUSH", q, "PRIORITY", 5, "long")
    rc.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "waiting")
    assert rc.execute_command("RMQ.POP", q, "LEASE", 2000) == [[b"short", 1]]
    assert rc.execute_command("RMQ.POP", q, "LEASE", 120_000) == [[b"long", 1]]
    before = queue_dump(src.conn(), q)
    deadline = int(src.conn().zscore(prep(q), b"short"))
    try:
        src.conn().execute_command("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", slot, slot,
                                   "NODE", cluster.node_id(dst))
        wait_for(lambda: cluster.owner_of_slot(slot) is dst and
                 src.conn().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0,
                 timeout=10, interval=0.05, what="the atomic slot migration to finish")
        assert now_ms() < deadline - 200, "the move took too long to test a later expiry"
        assert queue_dump(dst.conn(), q) == before
        wait_for(lambda: now_ms() > deadline and dst.conn().zscore(prep(q), b"short") is None,
                 timeout=(deadline - now_ms()) / 1000 + 1.5, interval=0.02,
                 what="the new owner to roll back the lease that moved in with the slot")
    finally:
        rc.execute_command("RMQ.ACK", q, "short", "long")
        rc.execute_command("RMQ.CANCEL", q, "short", "long", "waiting")


def test_failover_keeps_acknowledged_data_and_rolls_back_inherited_lease(cluster, rc):
    q = "fo:q"
    owner = cluster.owner(q)
    replicas = cluster.replicas_of(owner)
    assert replicas, "the queue's primary has no replica"
    d = owner.client(retry=Retry(NoBackoff(), 0))
    for i in range(50):
        d.execute_command("RMQ.PUSH", q, "PRIORITY", i % 7, b"fo-%d" % i)
    held = d.execute_command("RMQ.POP", q, "COUNT", 3, "LEASE", 120_000)
    short = d.execute_command("RMQ.POP", q, "COUNT", 2, "LEASE", 4000)
    (gone, _), = d.execute_command("RMQ.POP", q)
    assert d.execute_command("RMQ.NACK", q, gone, "DEAD") == b"dead"
    (acked, _), = d.execute_command("RMQ.POP", q)
    assert d.execute_command("RMQ.ACK", q, acked) == 1
    assert d.execute_command("WAIT", 1, 1000) >= 1
    snap = queue_dump(d, q)
    short_deadline = max(int(s) for m, s in snap[prep(q)] if m in {x for x, _ in short})
    short_msgs = {m for m, _ in short}

    owner.kill9()
    try:
        wait_for(lambda: any(r.conn().info("replication").get("role") == "master"
                             for r in replicas), timeout=20, interval=0.1,
                 what="the replica to be promoted")
        new = next(r for r in replicas if r.conn().info("replication").get("role") == "master")
        promoted_at = now_ms()
        cluster.wait_ok(timeout=20, nodes=cluster.alive())
        assert cluster.owner(q) is new

        after = queue_dump(new.conn(), q)
        # everything WAIT acknowledged is there; the short leases may already be rolled back
        assert after.get(dead(q)) == snap[dead(q)]
        prep_after = dict(after.get(prep(q), []))
        for m, s in snap[prep(q)]:
            if m not in short_msgs:
                assert prep_after.get(m) == s, f"held lease of {m!r} changed: {prep_after.get(m)}"
        store_before, store_after = dict(snap[q.encode()]), dict(after[q.encode()])
        for m, s in store_before.items():
            assert store_after.get(m) == s, f"waiting {m!r} changed: {store_after.get(m)}"
        assert acked not in store_after and acked not in prep_after

        # the inherited short leases are rolled back by the new primary
        limit = (max(short_deadline, promoted_at) - now_ms()) / 1000 + 2.0
        wait_for(lambda: not (short_msgs & set(new.conn().zrange(prep(q), 0, -1))),
                 timeout=max(limit, 0.5), interval=0.02,
                 what="the promoted replica to roll back the inherited expired leases")
        store_now = dict(new.conn().zrange(q, 0, -1, withscores=True))
        assert short_msgs <= set(store_now), "rolled-back messages must be waiting again"
        # and the cluster client reaches the queue on its new primary
        c2 = cluster.client()
        try:
            info = dict(zip(*[iter(c2.execute_command("RMQ.INFO", q))] * 2))
            assert info[b"inflight"] == len(held) and info[b"dead"] == 1
        finally:
            c2.close()
    finally:
        # bring the killed node back: it rejoins as a replica of the new primary
        owner.restart(graceful=False)
        cluster.wait_ok(timeout=30)
        cluster.wait_replicas_synced(timeout=30)
