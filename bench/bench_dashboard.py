#!/usr/bin/env python3
"""How the dashboard holds up with many queues: 100, 10,000 and 100,000 queues, side by side.

    python3 bench/bench_dashboard.py [--queues 10000,100000] [--rounds 15]

Its own redis-server with the module (tests/server_support.Server: a free port, stopped by
pid) and its own `python -m rmq dashboard` (tests/dashboard_support.Dashboard). For a small
(100) and each larger (--queues) set of queues it measures, as medians of --rounds:
- one read of the servers (Source.snapshot: RMQ.QUEUES + every queue's RMQ.INFO), wall
  time in this process and the server's CPU for it (INFO commandstats usec of rmq.queues
  and rmq.info), and one whole sample (Sampler.sample: the read, the rows and the /metrics
  text) — what the dashboard does in the background every `--interval`;
- HTTP requests to a dashboard that does not sample meanwhile (--interval 3600): the list
  page (first page by name, a late page sorted by waiting, a filter), /api/queues, a
  queue's page, and a /metrics scrape;
- a /metrics scrape of a dashboard sampling as it does by default (--interval 2), so the
  scrape shares the process with the background read;
- what a scrape costs the Redis server: RMQ commands' CPU (commandstats) over the scrapes.
Pages and /metrics are served from the last sample in memory, so they cost about the same
with many queues as with 100 but for sorting, filtering and sending the sample. Targets
(issue 31): a scrape <= 300 ms at 10,000 queues and <= 3 s at 100,000.
Writes bench/results/bench_dashboard.md.
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

import harness
from harness import Server

REPO = harness.REPO
for p in (REPO / "tests", REPO / "clients/python", REPO / "clients/python/tests"):
    sys.path.insert(0, str(p))

from dashboard_support import Dashboard  # noqa: E402

from rmq.dashboard.sampler import Sampler  # noqa: E402
from rmq.dashboard.source import Source  # noqa: E402

REQUESTS = (
    ("list page 1 by name", "/"),
    ("list: a late page by waiting, desc", "/?sort=waiting&desc=1&page={late}"),
    ("list: filter q_9*", "/?match=q_9*"),
    ("/api/queues page 1", "/api/queues"),
    ("a queue's page", "/queues/q_7"),
    ("/metrics scrape", "/metrics"),
)
#: The scrape targets of issue 31, in ms, by queue count.
SCRAPE_TARGET_MS = {10_000: 300, 100_000: 3000}
SAMPLE = "whole sample (read, rows, /metrics text): wall ms"
BUSY = "/metrics scrape while sampling (--interval 2)"
GZIP = ", gzip"


def fill(r, count: int) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(count):
        pipe.execute_command("RMQ.PUSH", f"q_{i}", "PRIORITY", 1,
                             *[f"m{j}" for j in range(i % 3 + 1)])
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()


def usec(r, commands=("rmq.queues", "rmq.info")) -> int:
    stats = r.info("commandstats")
    return sum(v.get("usec", 0) for k, v in stats.items()
               if k.startswith("cmdstat_") and k[len("cmdstat_"):] in commands)


def rmq_usec(r) -> int:
    """Server CPU of every RMQ command so far."""
    stats = r.info("commandstats")
    return usec(r, [k[len("cmdstat_"):] for k in stats if k.startswith("cmdstat_rmq.")])


def timed(call, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        call()
        out.append((time.perf_counter() - t) * 1000)
    return out


def get(url: str, gzip: bool = False) -> int:
    """Fetches the whole body (compressed as sent when gzip is asked, as Prometheus does)."""
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=120) as resp:
        return len(resp.read())


def measure(count: int, rounds: int) -> dict[str, float]:
    server = Server(tag="rmq-bench-dash").start()
    dashes = []
    try:
        r = server.client()
        fill(r, count)
        source = Source(server.client(encoding_errors="surrogateescape"))
        before = usec(r)
        wall = timed(source.snapshot, rounds)
        got = {"read (snapshot): wall ms": statistics.median(wall),
               "read (snapshot): server CPU ms": (usec(r) - before) / rounds / 1000,
               SAMPLE: statistics.median(timed(Sampler(source).sample, rounds))}
        quiet = Dashboard(server.port, "--interval", "3600")
        dashes.append(quiet)
        quiet.wait_ready(timeout=600)
        late = max(1, count // 50 - 1)
        for name, path in REQUESTS:
            url = quiet.url + path.format(late=late)
            get(url)  # warm
            before = rmq_usec(r)
            got[f"{name}: ms"] = statistics.median(timed(lambda: get(url), rounds))
            if path == "/metrics":
                got["server CPU of RMQ commands per scrape: ms"] = (
                    (rmq_usec(r) - before) / rounds / 1000)
                got[f"{name}{GZIP}: ms"] = statistics.median(
                    timed(lambda: get(url, gzip=True), rounds))
        got["/metrics size: MB"] = get(quiet.url + "/metrics") / 1e6
        got[f"/metrics size{GZIP}: MB"] = get(quiet.url + "/metrics", gzip=True) / 1e6
        busy = Dashboard(server.port, "--interval", "2")
        dashes.append(busy)
        busy.wait_ready(timeout=600)
        url = busy.url + "/metrics"
        get(url)
        # scrapes for long enough to span several background samples (each at least
        # 4 times a sample's duration apart)
        window = max(20.0, 3 * 4 * got[SAMPLE] / 1000)
        before, started = rmq_usec(r), time.monotonic()
        scrapes: dict[bool, list[float]] = {False: [], True: []}
        while time.monotonic() - started < window:
            for packed in (False, True):
                scrapes[packed] += timed(lambda: get(url, gzip=packed), 1)
            time.sleep(0.2)
        for packed, suffix in ((False, ""), (True, GZIP)):
            got[f"{BUSY}{suffix}: ms"] = statistics.median(scrapes[packed])
            got[f"{BUSY}{suffix}: slowest ms"] = max(scrapes[packed])
        got["server CPU of the background reads: ms per s"] = (
            (rmq_usec(r) - before) / 1000 / (time.monotonic() - started))
        return got
    finally:
        for d in dashes:
            d.stop()
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", default="10000,100000",
                    help="the larger queue counts, comma-separated (100 is always measured)")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    sizes = [100, *(int(n) for n in args.queues.split(","))]
    started = time.time()
    load0 = os.getloadavg()
    got = {n: measure(n, args.rounds) for n in sizes}
    rows = [f"| {k} | " + " | ".join(f"{got[n][k]:.2f}" for n in sizes) + " |"
            for k in got[100]]
    verdicts = []
    for n, target in SCRAPE_TARGET_MS.items():
        if n not in got:
            continue
        for suffix, how in (("", "plain"), (GZIP, "gzip, as Prometheus asks")):
            worst = max(got[n][f"/metrics scrape{suffix}: ms"], got[n][f"{BUSY}{suffix}: ms"])
            verdicts.append(
                f"- {n:,} queues, {how}: scrape median {worst:.0f} ms (the slower of the "
                f"quiet and the sampling dashboard), target <= {target} ms: "
                f"{'met' if worst <= target else 'MISSED'}; slowest single scrape while "
                f"sampling {got[n][f'{BUSY}{suffix}: slowest ms']:.0f} ms")
    text = "\n".join([
        "# Dashboard with many queues (`bench/bench_dashboard.py`)",
        "",
        f"Command: `python3 bench/bench_dashboard.py --queues {args.queues} "
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
        f"Medians of {args.rounds} rounds (ms unless named). A sample is what the dashboard "
        "reads and renders in the background every `--interval` (2 s by default, stretched "
        "to 4 times the last sample's duration); pages and /metrics are served from the "
        "last sample.",
        "",
        "| measure | " + " | ".join(f"{n:,} queues" for n in sizes) + " |",
        "|---|" + "---|" * len(sizes),
        *rows,
        "",
        "Scrape targets (issue 31):",
        *verdicts,
        "",
    ])
    out = harness.RESULTS / "bench_dashboard.md"
    harness.write_report(out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
