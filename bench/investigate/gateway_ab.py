#!/usr/bin/env python3
"""rmq-gateway's CPU per message and msgs/s side by side, by build (--binary) and worker
threads (--threads): the load of `make bench-gateway` (boto3 worker processes looping
SendMessageBatch (10), ReceiveMessage (10), DeleteMessageBatch) against one Redis, a fresh
gateway per run, the settings alternating round by round; medians. On a shared machine the
rounds of one setting spread more than a few percent, so a change is told from the noise only
by alternating it with its peer. Writes bench/results/gateway_ab.md (--out elsewhere).

  python3 bench/investigate/gateway_ab.py [--binary OLD,target/release/rmq-gateway] [--threads 1,2]
                                          [--rounds 5] [--seconds 5]
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
    ap.add_argument("--binary", default=str(harness.REPO / "target" / "release" / "rmq-gateway"),
                    help="the gateway builds to compare, comma-separated")
    ap.add_argument("--threads", default="1,2", help="the --threads values to compare, comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--workers", type=int, default=4, help="boto3 load processes")
    ap.add_argument("--out", default=str(harness.RESULTS / "gateway_ab.md"))
    a = ap.parse_args()
    settings = [(b, t) for b in a.binary.split(",") for t in a.threads.split(",")]
    runs = {s: [] for s in settings}
    server = Server(tag="rmq-gw-ab").start()
    saved = os.environ.get("RMQ_GATEWAY")
    try:
        for rnd in range(a.rounds):
            for binary, t in settings:
                os.environ["RMQ_GATEWAY"] = binary  # which build gateway_support.Gateway starts
                gw = Gateway(server, extra=["--threads", t]).start()
                try:
                    r = bench_gateway.throughput(gw.url, gw.proc.pid, server.client(), a.workers, a.seconds, f"ab{rnd}")
                finally:
                    gw.stop()
                runs[(binary, t)].append(r)
                print(f"{binary} --threads {t} round {rnd}: {r['msgs_s']:.0f} msgs/s, gateway {r['cpu_us']:.1f} µs/msg, "
                      f"Redis {r['redis_us']:.1f} µs/msg", flush=True)
    finally:
        server.stop()
        if saved is None:
            os.environ.pop("RMQ_GATEWAY", None)
        else:
            os.environ["RMQ_GATEWAY"] = saved
    lines = ["# rmq-gateway side by side: builds and worker threads", "",
             f"`python3 bench/investigate/gateway_ab.py --binary {a.binary} --threads {a.threads} --rounds {a.rounds} "
             f"--seconds {a.seconds:g} --workers {a.workers}`, "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores shared with "
             f"other work (load average {os.getloadavg()[0]:.1f} at the end); medians of {a.rounds} rounds, "
             "min–max of the gateway's CPU in brackets.", "",
             "| build | --threads | msgs/s | gateway CPU µs/msg | Redis CPU µs/msg |", "|---|---|---|---|---|"]
    for (binary, t), rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("msgs_s", "cpu_us", "redis_us")}
        cpu = [r["cpu_us"] for r in rs]
        lines.append(f"| {binary} | {t} | {med['msgs_s']:.0f} | {med['cpu_us']:.1f} ({min(cpu):.1f}–{max(cpu):.1f}) "
                     f"| {med['redis_us']:.1f} |")
    harness.write_report(a.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
