"""A producer or a consumer of the partition tests, run inside a client namespace: it uses
the real Python client (rmq over redis-py's Sentinel support, or over its RedisCluster with
--cluster) with the retry logic an application would have, and writes every event, with its
wall-clock time, as one JSON line to --out for the checker. With --slots the queue is a
topic of that many queues (on a cluster: spread over the primaries): the producer pushes
through Topic.push, the consumer pops each of its queues in turn.

producer: pushes unique messages "<name>-<seq>" at --rate per second; a push that fails
(connection error, NotDurable, NOREPLICAS, READONLY ...) is retried with the same content
until it is acknowledged or --stop appears. Events: push {m, q (its queue), t0, t1, ok,
err}.
consumer: pops and acks (durably when --durable): deliver {m, t, n, popped} (t: when the POP
answered, popped: when it was sent), ack {m, t0, t1, ok, confirmed, popped} (popped: when
that POP was sent). Once --drain exists and the queue is empty on the primary (nothing
waiting or in flight in any of its queues, three times in a row), it writes final {store,
prepare, dead} and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisClusterException
from redis.retry import Retry
from redis.sentinel import Sentinel

import rmq

LEASE_MS = 3000
#: What a call may raise that the loops retry: redis-py's errors, and its cluster client's
#: "no node answers" while the cluster is changing (not a RedisError).
FAILED = (redis.RedisError, RedisClusterException)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=("producer", "consumer"), required=True)
    ap.add_argument("--name", required=True)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--sentinels", help="ip:port,ip:port,...")
    where.add_argument("--cluster", help="ip:port,ip:port,... of the cluster's nodes")
    ap.add_argument("--queue", required=True)
    ap.add_argument("--slots", type=int, default=0, help="a topic of that many queues")
    ap.add_argument("--durable", type=int, default=0)
    ap.add_argument("--aof", action="store_true")
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop", required=True)
    ap.add_argument("--drain", required=True)
    a = ap.parse_args()
    # WAITAOF waits for the replica's periodic (1 s) report of its AOF: a longer timeout
    wait_ms = 3000 if a.aof else 1000
    client = connect(a, wait_ms)
    durable = rmq.Durable(a.durable, timeout_ms=wait_ms, aof=a.aof) if a.durable else None
    target = (rmq.Topic(client, a.queue, a.slots, durable=durable) if a.slots
              else rmq.Queue(client, a.queue, durable=durable))
    with open(a.out, "a", buffering=1) as out:
        def log(**ev) -> None:
            out.write(json.dumps(ev) + "\n")
        if a.role == "producer":
            produce(a, target, log)
        else:
            consume(a, target, client, log)


def connect(a, wait_ms: int):
    """The primary from the Sentinels, or a cluster client. retry=0: redis-py's own silent
    resends would hide pushes of unknown outcome from the checker; every retry here is the
    loop's own, and logged (the cluster client still follows MOVED and ASK itself)."""
    addrs = [(h, int(p)) for h, p in (x.split(":") for x in (a.cluster or a.sentinels).split(","))]
    opts = dict(socket_timeout=wait_ms / 1000 + 2.0, socket_connect_timeout=0.5,
                retry=Retry(NoBackoff(), 0))
    if a.cluster:
        return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in addrs], **opts)
    sentinel = Sentinel(addrs, socket_timeout=0.5, socket_connect_timeout=0.5)
    return sentinel.master_for("rmq", **opts)


def produce(a, target, log) -> None:
    queue_of = target.queue_for if a.slots else (lambda _m: a.queue)
    seq = 0
    period = 1.0 / a.rate
    while not os.path.exists(a.stop):
        m = f"{a.name}-{seq}"
        seq += 1
        while not os.path.exists(a.stop):
            t0 = time.time()
            try:
                target.push(m, priority=0)
            except FAILED as e:      # NotDurable is one; all are retried
                log(ev="push", m=m, q=queue_of(m), t0=t0, t1=time.time(), ok=False,
                    err=type(e).__name__)
                time.sleep(0.05)
                continue
            t1 = time.time()
            log(ev="push", m=m, q=queue_of(m), t0=t0, t1=t1, ok=True)
            time.sleep(max(0.0, period - (t1 - t0)))
            break


def consume(a, target, client, log) -> None:
    queues = [rmq.Queue(client, q, durable=target.durable) for q in target.queues]
    empty = 0
    while True:
        got = sum(pop_and_ack(queue, log) for queue in queues)
        if got:
            empty = 0
            continue
        if os.path.exists(a.drain):
            try:
                info = target.info()
                empty = empty + 1 if info["waiting"] == 0 and info["inflight"] == 0 else 0
                if empty >= 3:
                    keys = {k: [m.decode() for q in target.queues
                                for m in client.zrange(key.format(q), 0, -1)]
                            for k, key in (("store", "{}"), ("prepare", "prepare{{{}}}"),
                                           ("dead", "dead{{{}}}"))}
                    log(ev="final", **keys)
                    return
            except FAILED:
                empty = 0
        time.sleep(0.1)


def pop_and_ack(queue: rmq.Queue, log) -> int:
    """One POP of `queue` and an ACK of each message it got; how many it got."""
    popped = time.time()
    try:
        msgs = queue.pop(count=20, lease_ms=LEASE_MS)
    except FAILED:
        time.sleep(0.05)
        return 0
    got = time.time()
    for msg in msgs:
        m = msg.body.decode()
        log(ev="deliver", m=m, t=got, n=msg.deliveries, popped=popped)
        t0 = time.time()
        try:
            ok = msg.ack()
            log(ev="ack", m=m, t0=t0, t1=time.time(), ok=ok, confirmed=True, popped=popped)
        except rmq.NotDurable:
            log(ev="ack", m=m, t0=t0, t1=time.time(), ok=True, confirmed=False, popped=popped)
        except FAILED as e:
            log(ev="ack", m=m, t0=t0, t1=time.time(), ok=False, confirmed=False,
                popped=popped, err=type(e).__name__)
    return len(msgs)


if __name__ == "__main__":
    sys.exit(main())
