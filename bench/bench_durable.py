#!/usr/bin/env python3
"""What durable mode costs (issue #35): msgs/s and p99 push latency of the Python client,
async vs durable (WAIT 1 after each push), batches of 1 and 100 messages per push, and
durable 1 + AOF always (WAITAOF) on a server that has it.

Self-contained: starts its own primary and replica (redis-server with the module, on free
ports of 127.0.0.1, --save '' and no AOF unless the setting asks for it; both pinned to
core 0 with taskset when there are two cores, this client on core 1), stops them by pid.
One producer, one push in flight: the latency-bound case, where WAIT's extra round trip to
the replica shows most. Each cell is the median of --rounds rounds of --seconds seconds.
Writes bench/results/bench_durable.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/
import harness  # noqa: E402

REPO = harness.REPO
sys.path.insert(0, str(REPO / "clients" / "python"))

import rmq  # noqa: E402


def pair(binary: str, conf: list[str]) -> tuple[harness.Server, harness.Server]:
    """A primary and its replica, both pinned to core 0, synced."""
    kw = dict(pin=0 if (os.cpu_count() or 1) >= 2 else None, binary=binary, client_timeout=30,
              tag="rmq-bench-durable")
    p = harness.Server(conf=["--repl-diskless-sync-delay", "0", *conf], **kw).start()
    r = harness.Server(conf=["--repl-diskless-sync-delay", "0", *conf, "--replicaof", "127.0.0.1",
                             str(p.port)], **kw).start()
    c = p.client()
    if not harness.poll(lambda: "online" in str(c.info("replication").get("slave0", "")), 30):
        raise RuntimeError("replica did not sync")
    return p, r


def one_round(queue: rmq.Queue, batch: int, seconds: float, tag: str) -> tuple[float, float]:
    """msgs/s and p99 push latency (ms) of pushes of `batch` new messages each."""
    lat = []
    n = 0
    end = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < end:
        msgs = [f"{tag}-{n + i}" for i in range(batch)]
        t = time.perf_counter()
        queue.push(*msgs, priority=0)
        lat.append(time.perf_counter() - t)
        n += batch
    elapsed = time.perf_counter() - start
    lat.sort()
    return n / elapsed, lat[int(len(lat) * 0.99)] * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1 s rounds, 3 rounds")
    ap.add_argument("--server", default="redis-server")
    ap.add_argument("--aof-server", help="a server with WAITAOF for the AOF row (default: "
                    "Redis 8.2 from scripts/install-server, skipped when unavailable)")
    ap.add_argument("--out", type=Path, default=harness.RESULTS / "bench_durable.md")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.rounds = 1.0, 3
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})
    aof_server = a.aof_server
    if aof_server is None:
        got = subprocess.run(["bash", str(REPO / "scripts" / "install-server"), "redis-8.2"],
                             capture_output=True, text=True)
        aof_server = got.stdout.strip().splitlines()[-1] if got.returncode == 0 else None
    aof = ["--appendonly", "yes", "--appendfsync", "always"]
    # (name, server, configuration, durable mode, the row it is compared with)
    settings = [("async", a.server, [], None, None),
                ("durable 1", a.server, [], rmq.Durable(1, 5000), "async")]
    if aof_server:
        settings += [("async, AOF always", aof_server, aof, None, None),
                     ("durable 1 + AOF always", aof_server, aof, rmq.Durable(1, 5000, aof=True),
                      "async, AOF always")]
    rows = []
    for name, server, conf, durable, base in settings:
        p, r = pair(server, conf)
        try:
            c = p.client()
            version = c.info("server")["redis_version"]
            for batch in (1, 100):
                rates, p99s = [], []
                for k in range(a.rounds):
                    q = rmq.Queue(c, f"bench-{batch}-{k}", durable=durable)
                    rate, p99 = one_round(q, batch, a.seconds, f"r{k}")
                    rates.append(rate)
                    p99s.append(p99)
                    c.delete(f"bench-{batch}-{k}")
                rows.append((name, Path(server).name, version, batch, statistics.median(rates),
                             statistics.median(p99s), base))
                print(f"{name:24} batch {batch:3}: {rows[-1][4]:9.0f} msgs/s  p99 "
                      f"{rows[-1][5]:.3f} ms", flush=True)
        finally:
            r.stop()
            p.stop()
    rate_of = {(row[0], row[3]): row[4] for row in rows}
    lines = ["# Cost of durable mode", "",
             f"`python3 bench/bench_durable.py{' --quick' if a.quick else ''}` (part of "
             f"`make bench`): one producer (the Python client, one push in flight) against a "
             f"primary with one replica on 127.0.0.1, both pinned to core 0, the client on core "
             f"1; medians of {a.rounds} rounds of {a.seconds:g} s on this shared 2-core machine. "
             "Durable: each push is followed by WAIT 1 5000 (WAITAOF 1 1 5000 with AOF) in the "
             "same pipeline.", "",
             "| setting | server | batch | msgs/s | vs the same without durable | p99 push "
             "latency |",
             "|---|---|---:|---:|---:|---:|"]
    for name, binary, version, batch, rate, p99, base in rows:
        ratio = f"{rate / rate_of[(base, batch)]:.2f} of {base}" if base else "-"
        lines.append(f"| {name} | {binary} {version} | {batch} | {rate:,.0f} | {ratio} | "
                     f"{p99:.3f} ms |")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
