"""Worker throughput against a hand-written consume loop, on a standalone server.

    python3 clients/python/bench_worker.py [--messages N] [--rounds R] [--concurrency C]
                                           [--slots S] [--queue]

Starts its own redis-server with the module (the repository's test harness: RMQ_MODULE,
RMQ_SERVER_BIN), stopped by pid at the end; with 2 cores or more the server is pinned to
core 0 and this process to core 1 (so runs do not depend on where the scheduler puts them). Each round pushes N messages into a topic of S
slots and consumes them twice: with rmq.Worker (no-op handler, C handlers, one blocking
connection to the server) and with a loop written by hand on one connection (RMQ.TPOP
COUNT C, then one RMQ.ACK per queue for the batch, pipelined). Prints messages/s, the
median of R rounds, and the ratio (target: the worker at >= 0.8x the loop). --queue uses
one queue and RMQ.POP instead of a topic and RMQ.TPOP.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Union

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "tests")]

import redis  # noqa: E402

import rmq  # noqa: E402
from server_support import Server  # noqa: E402

Source = Union[rmq.Queue, rmq.Topic]
PIN = (os.cpu_count() or 1) >= 2 and shutil.which("taskset") is not None


class PinnedServer(Server):
    """The harness's server, on core 0 when PIN (taskset execs it: the pid stays)."""

    def argv(self) -> list[str]:
        return ["taskset", "-c", "0", *super().argv()] if PIN else super().argv()


def fill(source: Source, n: int) -> None:
    for i in range(0, n, 5000):
        source.push(*(b"m%08d" % j for j in range(i, min(n, i + 5000))), priority=1)


def by_hand(client: redis.Redis, source: Source, n: int, count: int) -> float:
    """Consume n messages with a plain loop; returns seconds."""
    if isinstance(source, rmq.Topic):
        take = ["RMQ.TPOP", source.name, source.slots]
    else:
        take = ["RMQ.POP", source.name]
    start, done = time.perf_counter(), 0
    while done < n:
        reply = client.execute_command(*take, "COUNT", count, "LEASE", 30_000, "BLOCK", 1000)
        if not reply:
            continue
        per_queue: dict[bytes, list[bytes]] = {}
        for entry in reply:
            queue, msg = (entry[0], entry[1]) if len(entry) == 3 else (source.name, entry[0])
            per_queue.setdefault(queue, []).append(msg)
        pipe = client.pipeline(transaction=False)
        for queue, msgs in per_queue.items():
            pipe.execute_command("RMQ.ACK", queue, *msgs)
        pipe.execute()
        done += len(reply)
    return time.perf_counter() - start


def with_worker(source: Source, n: int, count: int) -> float:
    """Consume n messages with rmq.Worker and a no-op handler; returns seconds."""
    worker = rmq.Worker(source, lambda m: None, concurrency=count, lease_ms=30_000)
    thread = threading.Thread(target=worker.run, daemon=True)
    start = time.perf_counter()
    thread.start()
    while worker.stats.processed < n or worker.in_flight:
        time.sleep(0.002)
    took = time.perf_counter() - start
    worker.stop()
    thread.join(30)
    return took


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--slots", type=int, default=16)
    p.add_argument("--queue", action="store_true", help="one queue and RMQ.POP")
    a = p.parse_args()
    if PIN:
        os.sched_setaffinity(0, {1})
    server = PinnedServer(tag="rmq-bench").start()
    try:
        client = server.client(socket_timeout=10)
        source: Source = (rmq.Queue(client, "bench") if a.queue
                          else rmq.Topic(client, "bench", a.slots))
        runs: dict[str, list[float]] = {"hand-written loop": [], "rmq.Worker": []}
        consume: dict[str, Callable[[], float]] = {
            "hand-written loop": lambda: by_hand(client, source, a.messages, a.concurrency),
            "rmq.Worker": lambda: with_worker(source, a.messages, a.concurrency),
        }
        for _ in range(a.rounds):
            for name, run in consume.items():
                fill(source, a.messages)
                runs[name].append(a.messages / run())
        what = "RMQ.POP, 1 queue" if a.queue else f"RMQ.TPOP, {a.slots} slots"
        print(f"{a.messages} messages, {what}, {a.concurrency} handlers / COUNT "
              f"{a.concurrency}, median of {a.rounds} rounds"
              f"{', server on core 0, client on core 1' if PIN else ''}\n")
        print(f"{'consumer':<20}{'msg/s':>10}  rounds")
        for name, rates in runs.items():
            print(f"{name:<20}{statistics.median(rates):>10.0f}  "
                  + " ".join(f"{x:.0f}" for x in rates))
        ratio = statistics.median(runs["rmq.Worker"]) / statistics.median(runs["hand-written loop"])
        print(f"\nworker / loop: {ratio:.2f}x (target >= 0.80x)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
