#!/usr/bin/env python3
"""How the dashboard holds up with many queues: 100 vs 10,000 queues, side by side.

    python3 scripts/bench_dashboard.py [--queues 10000] [--rounds 15]

Its own redis-server with the module (tests/server_support.Server: a free port, stopped by
pid) and its own `python -m rmq dashboard` (tests/dashboard_support.Dashboard). For a small
(100) and a large (--queues) set of queues it measures, as medians of --rounds:
- one sample (Source.snapshot: RMQ.QUEUES + every queue's RMQ.INFO), wall time in this
  process and the server's CPU for it (INFO commandstats usec of rmq.queues and rmq.info);
- HTTP requests to the running dashboard: the list page (first page by name, a late page
  sorted by waiting, a filter), /api/queues, a queue's page, and a /metrics scrape.
Server-side paging means a page costs about the same with 10,000 queues as with 100 but
for sorting and filtering the sample in memory; /metrics reads every queue afresh, so it
grows with the count. Writes scripts/results/bench_dashboard.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (REPO / "tests", REPO / "clients/python", REPO / "clients/python/tests"):
    sys.path.insert(0, str(p))

from dashboard_support import Dashboard  # noqa: E402
from server_support import Server  # noqa: E402

from rmq.dashboard.source import Source  # noqa: E402

REQUESTS = (
    ("list page 1 by name", "/"),
    ("list: a late page by waiting, desc", "/?sort=waiting&desc=1&page={late}"),
    ("list: filter q_9*", "/?match=q_9*"),
    ("/api/queues page 1", "/api/queues"),
    ("a queue's page", "/queues/q_7"),
    ("/metrics scrape", "/metrics"),
)


def fill(r, count: int) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(count):
        pipe.execute_command("RMQ.PUSH", f"q_{i}", "PRIORITY", 1,
                             *[f"m{j}" for j in range(i % 3 + 1)])
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()


def usec(r) -> int:
    stats = r.info("commandstats")
    return sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in ("rmq.queues", "rmq.info"))


def timed(call, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        call()
        out.append((time.perf_counter() - t) * 1000)
    return out


def get(url: str) -> None:
    with urllib.request.urlopen(url, timeout=60) as resp:
        resp.read()


def measure(count: int, rounds: int) -> dict[str, float]:
    server = Server(tag="rmq-bench-dash").start()
    dash = None
    try:
        r = server.client()
        fill(r, count)
        source = Source(server.client())
        before = usec(r)
        wall = timed(source.snapshot, rounds)
        got = {"sample: wall ms": statistics.median(wall),
               "sample: server CPU ms": (usec(r) - before) / rounds / 1000}
        dash = Dashboard(server.port, "--interval", "3600").wait_ready(timeout=120)
        late = max(1, count // 50 - 1)
        for name, path in REQUESTS:
            url = dash.url + path.format(late=late)
            get(url)  # warm
            got[f"{name}: ms"] = statistics.median(timed(lambda: get(url), rounds))
        return got
    finally:
        if dash:
            dash.stop()
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    started = time.time()
    load0 = os.getloadavg()
    small, large = measure(100, args.rounds), measure(args.queues, args.rounds)
    rows = [f"| {k} | {small[k]:.2f} | {large[k]:.2f} | {large[k] / small[k]:.1f}× |"
            for k in small]
    text = "\n".join([
        "# Dashboard with many queues (`scripts/bench_dashboard.py`)",
        "",
        f"Command: `python3 scripts/bench_dashboard.py --queues {args.queues} "
        f"--rounds {args.rounds}`  ",
        f"Run: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"{time.time() - started:.0f} s in all; load average at start "
        f"{' '.join(f'{x:.2f}' for x in load0)}, at end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
        f"Machine: {os.cpu_count()} cores (shared with other work), Python "
        f"{platform.python_version()}; one redis-server with the module on 127.0.0.1, "
        "the dashboard (waitress) and this client on the same machine, nothing pinned.",
        "",
        f"Medians of {args.rounds} rounds (ms). A sample is what the dashboard reads every "
        "`--interval` (2 s by default); pages are served from the last sample.",
        "",
        f"| measure | 100 queues | {args.queues:,} queues | ratio |",
        "|---|---|---|---|",
        *rows,
        "",
    ])
    out = REPO / "scripts/results/bench_dashboard.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
