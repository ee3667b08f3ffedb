"""A producer or a consumer of the partition tests, run inside a client namespace: it uses
the real Python client (rmq over redis-py's Sentinel support) with the retry logic an
application would have, and writes every event, with its wall-clock time, as one JSON line
to --out for the checker.

producer: pushes unique messages "<name>-<seq>" at --rate per second; a push that fails
(connection error, NotDurable, NOREPLICAS, READONLY ...) is retried with the same content
until it is acknowledged or --stop appears. Events: push {m, t0, t1, ok, err}.
consumer: pops and acks (durably when --durable): deliver {m, t, n, popped} (t: when the POP
answered, popped: when it was sent), ack {m, t0, t1, ok, confirmed, popped} (popped: when
that POP was sent). Once --drain exists and the queue is empty on the primary (nothing
waiting or in flight, three times in a row), it writes final {store, prepare, dead} and
exits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

import rmq

LEASE_MS = 3000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=("producer", "consumer"), required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--sentinels", required=True, help="ip:port,ip:port,...")
    ap.add_argument("--queue", required=True)
    ap.add_argument("--durable", type=int, default=0)
    ap.add_argument("--aof", action="store_true")
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop", required=True)
    ap.add_argument("--drain", required=True)
    a = ap.parse_args()
    sentinels = [(h, int(p)) for h, p in (s.split(":") for s in a.sentinels.split(","))]
    sentinel = Sentinel(sentinels, socket_timeout=0.5, socket_connect_timeout=0.5)
    # WAITAOF waits for the replica's periodic (1 s) report of its AOF: a longer timeout
    wait_ms = 3000 if a.aof else 1000
    # retry=0: redis-py's own silent resends would hide pushes of unknown outcome from the
    # checker; every retry here is the loop's own, and logged
    client = sentinel.master_for("rmq", socket_timeout=wait_ms / 1000 + 2.0,
                                 socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    durable = rmq.Durable(a.durable, timeout_ms=wait_ms, aof=a.aof) if a.durable else None
    queue = rmq.Queue(client, a.queue, durable=durable)
    with open(a.out, "a", buffering=1) as out:
        def log(**ev) -> None:
            out.write(json.dumps(ev) + "\n")
        if a.role == "producer":
            produce(a, queue, log)
        else:
            consume(a, queue, client, log)


def produce(a, queue: rmq.Queue, log) -> None:
    seq = 0
    period = 1.0 / a.rate
    while not os.path.exists(a.stop):
        m = f"{a.name}-{seq}"
        seq += 1
        while not os.path.exists(a.stop):
            t0 = time.time()
            try:
                queue.push(m, priority=0)
            except redis.RedisError as e:      # NotDurable is one; all are retried
                log(ev="push", m=m, t0=t0, t1=time.time(), ok=False, err=type(e).__name__)
                time.sleep(0.05)
                continue
            t1 = time.time()
            log(ev="push", m=m, t0=t0, t1=t1, ok=True)
            time.sleep(max(0.0, period - (t1 - t0)))
            break


def consume(a, queue: rmq.Queue, client: redis.Redis, log) -> None:
    empty = 0
    while True:
        popped = time.time()
        try:
            msgs = queue.pop(count=20, lease_ms=LEASE_MS)
        except redis.RedisError:
            time.sleep(0.05)
            continue
        got = time.time()
        for msg in msgs:
            m = msg.body.decode()
            log(ev="deliver", m=m, t=got, n=msg.deliveries, popped=popped)
            t0 = time.time()
            try:
                ok = msg.ack()
                log(ev="ack", m=m, t0=t0, t1=time.time(), ok=ok, confirmed=True, popped=popped)
            except rmq.NotDurable:
                log(ev="ack", m=m, t0=t0, t1=time.time(), ok=True, confirmed=False,
                    popped=popped)
            except redis.RedisError as e:
                log(ev="ack", m=m, t0=t0, t1=time.time(), ok=False, confirmed=False,
                    popped=popped, err=type(e).__name__)
        if msgs:
            empty = 0
            continue
        if os.path.exists(a.drain):
            try:
                info = queue.info()
                empty = empty + 1 if info["waiting"] == 0 and info["inflight"] == 0 else 0
                if empty >= 3:
                    keys = {k: [m.decode() for m in client.zrange(key, 0, -1)] for k, key in
                            (("store", a.queue), ("prepare", f"prepare{{{a.queue}}}"),
                             ("dead", f"dead{{{a.queue}}}"))}
                    log(ev="final", **keys)
                    return
            except redis.RedisError:
                empty = 0
        time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main())
