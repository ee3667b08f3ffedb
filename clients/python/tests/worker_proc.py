"""A worker process for the tests (started by them, stopped or killed by its pid).

    python worker_proc.py --port P (--queue Q | --topic T --slots N) [--concurrency C]
        [--lease-ms L] [--grace-ms MS] [--sleep-ms MIN MAX] [--hang BODY]

Its handler reads the server clock (TIME, µs) when it starts and when it ends and appends
`body|deliveries|start_us|end_us|pid` to the list `rmqtest:log`; between the two it sleeps
a random MIN..MAX ms. A message whose body is --hang sets `rmqtest:hanging` to the pid and
then hangs (the test kills the process). `rmqtest:up:<pid>` is set once the worker is made.
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time

import redis

import rmq

LOG = "rmqtest:log"


def server_us(c: redis.Redis) -> int:
    s, us = c.time()
    return s * 1_000_000 + us


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--queue")
    p.add_argument("--topic")
    p.add_argument("--slots", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--lease-ms", type=int, default=30_000)
    p.add_argument("--grace-ms", type=int, default=30_000)
    p.add_argument("--sleep-ms", type=int, nargs=2, default=(0, 0))
    p.add_argument("--hang")
    a = p.parse_args()
    client = redis.Redis(port=a.port, socket_timeout=10, protocol=2)
    source = rmq.Topic(client, a.topic, a.slots) if a.topic else rmq.Queue(client, a.queue)
    pid = os.getpid()

    def handle(msg: rmq.Message) -> None:
        start = server_us(client)
        if a.hang is not None and msg.body == a.hang.encode():
            client.set("rmqtest:hanging", pid)
            threading.Event().wait()
        time.sleep(random.uniform(*a.sleep_ms) / 1000)
        end = server_us(client)
        client.rpush(LOG, b"|".join([msg.body, b"%d|%d|%d|%d" % (msg.deliveries, start, end, pid)]))

    worker = rmq.Worker(source, handle, concurrency=a.concurrency, lease_ms=a.lease_ms,
                        grace_ms=a.grace_ms)
    client.set(f"rmqtest:up:{pid}", 1)
    worker.run()
    print(worker.stats, flush=True)


if __name__ == "__main__":
    main()
