#!/usr/bin/env python3
"""Where rmq-gateway's CPU per message goes under `make bench-gateway`'s load, natively:
its own redis-server and gateway (with credentials: every SigV4 checked; --threads 1) on
core 0, bench/driver's sqs-load (SigV4-signing, kept-alive, batches of 10) on core 1,
`perf record` (sampling, no call graphs: the release build has no frame pointers) attached
to the gateway while the load runs. Reports the CPU per message (/proc) split into the
kernel's share and the gateway's own code, grouped by what the functions do, and the top
functions. Writes bench/results/profile_gateway_perf.md (--out elsewhere).

    python3 bench/profile_gateway_perf.py [--seconds 10] [--kind standard|fifo|priority] [--top 25]

Sampling, so shares are ±1-2 points; callgrind instruction counts of the same loop (without
the kernel's share) are bench/profile_gateway.py's.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict

import harness
from harness.sqs_load import DRIVER, KEY, LOAD_CORE, SECRET, SERVER_CORE, create_queue, pin, proc_cpu
from gateway_support import Gateway  # noqa: E402  (tests/, on sys.path through harness)

# (what, regex on "dso symbol"), first match wins; the rest is "other".
GROUPS = [
    ("kernel: sockets, epoll, scheduling", r"^kernel "),
    ("hashes: MD5 of bodies (MD5OfMessageBody), SHA-256 / HMAC (SigV4 check, receipt handles)",
     r"md5|sha2|hmac|Sha256|compress256|digest"),
    ("JSON (serde_json: requests in, replies out)", r"serde_json|serde::|serde_core"),
    ("Redis protocol (redis crate: commands, reply parsing)", r"redis::|combine::"),
    ("HTTP (hyper, axum, http)", r"hyper|axum|http::|httparse|h1::"),
    ("tokio runtime (tasks, timers, I/O driver)", r"tokio|mio::"),
    ("allocator (mimalloc)", r"mi_|mimalloc"),
    ("memcpy/memmove/strings (libc)", r"libc\.so|memcpy|memmove|memset|memcmp|__strlen"),
    ("the gateway's own code (actions, sigv4, queue, replies)", r"rmq_gateway::"),
    ("dates (chrono: the SigV4 X-Amz-Date; clock reads)", r"chrono|clock_gettime|Timespec"),
    ("UTF-8 checks, string and iterator helpers (core, alloc)", r"core::|alloc::|memchr"),
]


def perf_symbols(data):
    """(share %, dso, symbol) of every sampled function, self time."""
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso,symbol",
                          "--percent-limit", "0", "-q"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)", line)
        if m:
            pct, dso, ring, sym = m.groups()
            # perf pads the symbol and ends the row with empty columns ("-   -").
            sym = re.sub(r"(\s+-)+\s*$", "", sym).strip()
            rows.append((float(pct), "kernel" if ring == "k" else dso, sym))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--kind", default="standard", choices=("standard", "fifo", "priority"))
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", default=str(harness.RESULTS / "profile_gateway_perf.md"))
    args = ap.parse_args()
    os.sched_setaffinity(0, {LOAD_CORE})
    server = harness.Server(tag="rmq-perf-gw", pin=SERVER_CORE).start()
    gw = Gateway(server, credentials=f"{KEY} {SECRET}\n", extra=["--threads", 1]).start()
    pin(gw.proc.pid, SERVER_CORE)
    data = os.path.join(tempfile.mkdtemp(prefix="rmq-perf-"), "perf.data")
    try:
        def load(name, secs):
            q = create_queue(gw.url, name, args.kind)
            argv = ["taskset", "-c", str(LOAD_CORE), str(DRIVER), "sqs-load", "--endpoint", f"127.0.0.1:{gw.port}",
                    "--queue-url", q, "--kind", args.kind, "--access-key", KEY, "--secret", SECRET,
                    "--connections", str(args.connections), "--secs", str(secs)]
            return json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)

        load("warm", 3)
        perf = subprocess.Popen(["perf", "record", "-q", "-F", "1999", "-o", data, "-p", str(gw.proc.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rc = server.client()
        rc.config_resetstat()
        c0, r0 = proc_cpu(gw.proc.pid), proc_cpu(server.proc.pid)
        with open(f"/proc/{gw.proc.pid}/stat") as f:
            st0 = f.read().rsplit(")", 1)[1].split()
        r = load("prof", args.seconds)
        with open(f"/proc/{gw.proc.pid}/stat") as f:
            st1 = f.read().rsplit(")", 1)[1].split()
        cpu, rcpu = proc_cpu(gw.proc.pid) - c0, proc_cpu(server.proc.pid) - r0
        stats = rc.info("commandstats")
        perf.send_signal(2)
        perf.wait(60)
    finally:
        gw.stop()
        server.stop()
    n = r["consumed"]
    ticks = os.sysconf("SC_CLK_TCK")
    user_us = (int(st1[11]) - int(st0[11])) / ticks / n * 1e6
    sys_us = (int(st1[12]) - int(st0[12])) / ticks / n * 1e6
    rows = perf_symbols(data)
    groups = defaultdict(float)
    for pct, dso, sym in rows:
        key = f"{dso} {sym}"
        name = next((g for g, rx in GROUPS if re.search(rx, key)), "other")
        groups[name] += pct
    total = sum(groups.values()) or 1
    per_msg = cpu / n * 1e6
    lines = [
        "# rmq-gateway: where the CPU per message goes (perf, natively)",
        "",
        f"`python3 bench/profile_gateway_perf.py --seconds {args.seconds:g} --kind {args.kind} --connections "
        f"{args.connections}`, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"{harness.cpu_model('unknown CPU')}, load average {os.getloadavg()[0]:.1f}. The gateway (credentials: every "
        "request's SigV4 checked; `--threads 1`) and its redis-server on core 0, bench/driver's sqs-load on core 1 "
        f"({args.connections} kept-alive connections looping SendMessageBatch (10), ReceiveMessage (10), "
        f"DeleteMessageBatch on a {args.kind} queue); `perf record -F 1999` on the gateway for the {args.seconds:g} s.",
        "",
        f"{n:,} messages consumed, {r['msgs_s']:,.0f} msgs/s. The gateway's CPU per message: {per_msg:.1f} µs "
        f"({user_us:.1f} user + {sys_us:.1f} kernel, /proc); its Redis's: {rcpu / n * 1e6:.1f} µs.",
        "",
        "| what (self time, grouped by function name) | share of samples | ≈ µs per message |",
        "|---|---:|---:|",
    ]
    for name, pct in sorted(groups.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {name} | {pct / total * 100:.1f}% | {pct / total * per_msg:.1f} |")
    lines += ["", "What the gateway asks of Redis per message (INFO commandstats over the same run; a command's usec is "
              "its time inside Redis, without the round trip):", "",
              "| command | calls per message | usec per call | usec per message |", "|---|---:|---:|---:|"]
    by_cmd = sorted(((k.removeprefix("cmdstat_"), v) for k, v in stats.items() if k != "cmdstat_config"),
                    key=lambda kv: -kv[1]["usec"])
    for name, v in by_cmd:
        if v["calls"] < n / 100:  # the run's setup (CreateQueue, the stats reset), not its messages
            continue
        lines.append(f"| {name.upper()} | {v['calls'] / n:.2f} | {v['usec_per_call']:.1f} | {v['usec'] / n:.2f} |")
    cmd_us = sum(v["usec"] for _, v in by_cmd) / n
    first_receive = [v for k, v in by_cmd if k in ("hsetnx", "hget", "hdel")]
    fr_calls, fr_us = sum(v["calls"] for v in first_receive) / n, sum(v["usec"] for v in first_receive) / n
    lines.append(f"| all | {sum(v['calls'] for _, v in by_cmd) / n:.2f} | | {cmd_us:.2f} |")
    lines += ["", f"Redis's CPU per message ({rcpu / n * 1e6:.1f} µs) is {rcpu / n * 1e6 / cmd_us:.1f}× its commands' "
              "time: the rest is its own reads, writes and epoll waits for the round trips."]
    lines += ["", "Reading it: the kernel's share is each HTTP request's and each Redis round trip's write, read and "
              "epoll wait (3 requests and 3 round trips per 10 messages, one each) and the wake-ups between the gateway and "
              "Redis, which share one core here (`finish_task_switch`, `_raw_spin_unlock_irqrestore` on the wake-up "
              "path); batching more messages per request is what lowers it per message. What is left is spread over "
              "the redis crate, hyper, the allocator and JSON, none a hot spot of its own. On Redis's side, HSETNX, HGET "
              "(only for a receive that asks for the attribute) and HDEL are the gateway's ApproximateFirstReceiveTimestamp "
              "records (gateway/src/first_receive.rs): a receive that does not ask leaves them to be written a few ms "
              "later, all of those ms in one pipeline, and a delivery deleted before then writes none: "
              f"{fr_calls:.2f} of the {sum(v['calls'] for _, v in by_cmd) / n:.2f} command calls per message, "
              f"{fr_us:.2f} of the {cmd_us:.2f} µs of command time.",
              "", f"Top {args.top} functions (self time):", "", "| share | where | function |", "|---:|---|---|"]
    for pct, dso, sym in sorted(rows, key=lambda x: -x[0])[: args.top]:
        lines.append(f"| {pct / total * 100:.1f}% | {dso} | `{sym[:110].replace('|', '/')}` |")
    harness.write_report(args.out, "\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
