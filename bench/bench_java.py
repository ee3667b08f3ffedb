#!/usr/bin/env python3
"""The Java worker (clients/java) against a hand-written TPOP/ACK loop on Lettuce and
against Redisson's delayed queue (RDelayedQueue + RBlockingQueue), on one server in the
same run (`make bench-java`).

Builds clients/java's rmq-bench module (Maven profile `bench`, with Redisson), starts one
redis-server with the module on a free port of 127.0.0.1 (pinned to core 0 with taskset
when there are two cores; the JVM on core 1), runs dev.rmq.bench.JavaBench against it
(whose docstring says what each peer does and what is timed) and stops the server by pid.
Reports msgs/s and the server's CPU per message (utime + stime from /proc/<pid>/stat)
per round, their medians, and the median of the per-round ratios against the targets
(worker >= 0.8x the hand loop, >= 5x Redisson). Writes bench/results/bench_java.md.
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

JAVA = harness.REPO / "clients" / "java"
PEERS = ["rmq-worker", "hand-loop", "redisson"]


def build() -> str:
    """Packages rmq-client and rmq-bench; returns the bench's class path."""
    cp_file = JAVA / "rmq-bench" / "target" / "bench.classpath"
    subprocess.run(["mvn", "-q", "-B", "-Pbench", "-pl", "rmq-bench", "-am", "-DskipTests",
                    "package", "dependency:build-classpath",
                    f"-Dmdep.outputFile={cp_file.relative_to(JAVA / 'rmq-bench')}"],
                   cwd=JAVA, check=True)
    return f"{JAVA / 'rmq-bench' / 'target' / 'classes'}:{cp_file.read_text().strip()}"


def versions(cp: str) -> dict[str, str]:
    """Lettuce's and Redisson's versions, from their jars' names on the class path."""
    out = {}
    for jar in cp.split(":"):
        name = Path(jar).name
        for lib in ("lettuce-core", "redisson"):
            if name.startswith(lib + "-") and name.endswith(".jar"):
                out[lib] = name[len(lib) + 1:-4]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--delay-ms", type=int, default=1, help="each message is due this long after its push")
    ap.add_argument("--out", default=str(harness.RESULTS / "bench_java.md"))
    a = ap.parse_args()

    cp = build()
    pin = (os.cpu_count() or 1) >= 2 and subprocess.run(["taskset", "--version"], capture_output=True).returncode == 0
    load_before = os.getloadavg()[0]
    server = harness.Server(pin=0 if pin else None, tag="rmq-bench-java", client_timeout=60).start()
    rows: dict[str, list[tuple[float, float, float]]] = {p: [] for p in PEERS}
    try:
        cmd = [*(["taskset", "-c", "1"] if pin else []), "java", "-Xmx2g", "-cp", cp, "dev.rmq.bench.JavaBench",
               "--port", str(server.port), "--pid", str(server.proc.pid), "--messages", str(a.messages),
               "--rounds", str(a.rounds), "--concurrency", str(a.concurrency), "--slots", str(a.slots),
               "--delay-ms", str(a.delay_ms)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        for line in proc.stdout:
            if not line.startswith("RESULT "):
                continue
            _, peer, rnd, rate, consume_us, total_us, _load_s = line.split()
            print(f"round {rnd}: {peer:10} {float(rate):>10,.0f} msgs/s, server {float(consume_us):.2f} µs/msg "
                  f"consuming, {float(total_us):.2f} µs/msg with the load", flush=True)
            if rnd != "0":
                rows[peer].append((float(rate), float(consume_us), float(total_us)))
        if proc.wait() != 0:
            raise SystemExit(f"JavaBench failed ({proc.returncode})")
        server_version = subprocess.run([server.binary or harness.server_binary(), "--version"],
                                        capture_output=True, text=True).stdout.strip()
    finally:
        server.stop()

    med = {p: statistics.median(r[0] for r in rows[p]) for p in PEERS}

    def ratio(x: str, y: str) -> float:
        return statistics.median(a[0] / b[0] for a, b in zip(rows[x], rows[y]))

    vs_loop, vs_redisson = ratio("rmq-worker", "hand-loop"), ratio("rmq-worker", "redisson")
    v = versions(cp)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    fmt = "{:,.0f}".format
    lines = [
        "# Java worker benchmark (bench/bench_java.py, `make bench-java`)",
        "",
        f"{a.messages:,} messages per peer per round, each due {a.delay_ms} ms after its push, a no-op handler "
        f"at concurrency {a.concurrency}, a topic of {a.slots} slots for RMQ; {a.rounds} rounds, the peers "
        f"interleaved in each, medians. One redis-server ({server_version}) with the module"
        + (", pinned to core 0; the JVM on core 1 (taskset)" if pin else " (not pinned)")
        + f". {java}, Lettuce {v.get('lettuce-core', '?')}, Redisson {v.get('redisson', '?')}. "
        "Timed: from the consumer's start to the last message acknowledged by the server "
        "(Redisson: taken, its queue has no acknowledgement or lease); loading is timed apart; a "
        "warm-up round of each peer first, not counted.",
        "",
        "- rmq-worker: `dev.rmq.Worker` on the topic (RMQ.TPOP per free handlers, batched RMQ.ACK)",
        f"- hand-loop: one Lettuce connection, `RMQ.TPOP COUNT {a.concurrency} LEASE 30000 BLOCK 1000`, "
        "then one `RMQ.ACK` per queue of the batch, pipelined",
        f"- redisson: `RDelayedQueue.offerAsync(m, {a.delay_ms} ms)` to load; {a.concurrency} threads each "
        "`RBlockingQueue.poll(1 s)` (BLPOP) and the no-op handler; Redisson's transfer task moves due "
        "messages from its sorted set to the list",
        "",
        "| peer | " + " | ".join(f"round {i + 1}" for i in range(a.rounds)) + " | median msgs/s |",
        "|---|" + "---:|" * (a.rounds + 1),
        *(f"| {p} | " + " | ".join(fmt(r[0]) for r in rows[p]) + f" | **{fmt(med[p])}** |" for p in PEERS),
        "",
        "Server CPU per message (medians; utime + stime of the redis-server process from /proc, "
        "10 ms ticks): while consuming, and over the load and the consumption together (the whole "
        "work of a message: push, transfer for Redisson, pop, ack).",
        "",
        "| peer | server µs/msg consuming | server µs/msg with the load |",
        "|---|---:|---:|",
        *(f"| {p} | {statistics.median(r[1] for r in rows[p]):.2f} | {statistics.median(r[2] for r in rows[p]):.2f} |"
          for p in PEERS),
        "",
        "Ratios: the median over the rounds of each round's ratio (the ratio of the medians in brackets).",
        "",
        f"- rmq-worker / hand-loop: **{vs_loop:.2f}×** ({med['rmq-worker'] / med['hand-loop']:.2f}×; "
        f"target ≥ 0.8×): {'PASS' if vs_loop >= 0.8 else 'MISS'}",
        f"- rmq-worker / redisson: **{vs_redisson:.2f}×** ({med['rmq-worker'] / med['redisson']:.2f}×; "
        f"target ≥ 5×): {'PASS' if vs_redisson >= 5 else 'MISS'}",
        "",
        f"Machine: {os.cpu_count()} cores ({harness.cpu_model('?')}), {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} "
        f"UTC, load average {load_before:.1f} at the start and {os.getloadavg()[0]:.1f} at the end; shared with "
        "other jobs, so figures vary between runs: compare the ratios, measured in the same run.",
    ]
    text = "\n".join(lines)
    print(text)
    print("wrote", harness.write_report(a.out, text))


if __name__ == "__main__":
    main()
