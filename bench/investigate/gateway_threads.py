#!/usr/bin/env python3
"""rmq-gateway's CPU per message and msgs/s by worker threads (--threads), side by side: the
load of `make bench-gateway` (boto3 worker processes looping SendMessageBatch (10),
ReceiveMessage (10), DeleteMessageBatch) against one Redis, a fresh gateway per run, the
settings alternating round by round; medians. For choosing the gateway's default. Writes
scripts/results/gateway_threads.md (--out elsewhere).

  python3 bench/investigate/gateway_threads.py [--threads 1,2] [--rounds 3] [--seconds 5]
"""

import argparse
import datetime
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/
import bench_gateway  # noqa: E402
from bench_gateway import Gateway, Server, harness  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2", help="the --threads values to compare")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--workers", type=int, default=4, help="boto3 load processes")
    ap.add_argument("--out", default=str(harness.RESULTS / "gateway_threads.md"))
    a = ap.parse_args()
    settings = a.threads.split(",")
    runs = {t: [] for t in settings}
    server = Server(tag="rmq-gw-threads").start()
    try:
        for rnd in range(a.rounds):
            for t in settings:
                gw = Gateway(server, extra=["--threads", t]).start()
                try:
                    r = bench_gateway.throughput(gw.url, gw.proc.pid, server.client(), a.workers, a.seconds, f"t{t}r{rnd}")
                finally:
                    gw.stop()
                runs[t].append(r)
                print(f"--threads {t} round {rnd}: {r['msgs_s']:.0f} msgs/s, gateway {r['cpu_us']:.1f} µs/msg, "
                      f"Redis {r['redis_us']:.1f} µs/msg", flush=True)
    finally:
        server.stop()
    lines = ["# rmq-gateway: worker threads", "",
             f"`python3 bench/investigate/gateway_threads.py --threads {a.threads} --rounds {a.rounds} "
             f"--seconds {a.seconds:g} --workers {a.workers}`, "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores shared with "
             f"other work (load average {os.getloadavg()[0]:.1f} at the end); medians of {a.rounds} rounds.", "",
             "| --threads | msgs/s | gateway CPU µs/msg | Redis CPU µs/msg |", "|---|---|---|---|"]
    for t, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("msgs_s", "cpu_us", "redis_us")}
        lines.append(f"| {t} | {med['msgs_s']:.0f} | {med['cpu_us']:.1f} | {med['redis_us']:.1f} |")
    harness.write_report(a.out, "\n".join(lines))
    print("\n".join(lines))

if __name__ == "__main__":
    main()
