#!/usr/bin/env python3
"""Memory per message of 100 bytes (issue 31, make bench): RMQ's waiting, in-flight and
grouped waiting messages beside the same messages in a bare sorted set, a Stream and BullMQ.

One redis-server with the module on a free 127.0.0.1 port (stopped by its pid), --messages
distinct 100-byte messages each time, FLUSHALL between peers; a peer's bytes are the sum of
MEMORY USAGE ... SAMPLES 0 over every key it made, divided by the messages:

  rmq waiting        RMQ.PUSH q PRIORITY p m (batches of 100)
  rmq in flight      the same, then RMQ.POP q COUNT 100 until all are in flight
  rmq grouped        RMQ.PUSH g PRIORITY p GROUP <one of messages/10 groups> m: each group's
                     first message in `g`, the others held back behind it
  bare zset          ZADD z p m
  stream             XADD s * m <message>
  bullmq             Queue.addBulk of jobs whose data is the message (BullMQ from the Node
                     client's devDependencies, clients/node/node_modules; skipped with a note
                     when they are not installed: `npm ci` in clients/node)

Prints the table and writes bench/results/bench_memory.md.
"""

import argparse
import datetime
import json
import os
import subprocess
from pathlib import Path

import redis

import harness

REPO = harness.REPO
NODE_DIR = REPO / "clients/node"
RESULTS = harness.RESULTS / "bench_memory.md"
SIZE = 100
BATCH = 100

# BullMQ's jobs, added in bulk, then the bytes of every key under its prefix.
BULL_JS = """
import { Queue } from "bullmq";
const [port, n, size] = process.argv.slice(2).map(Number);
const q = new Queue("mem", { connection: { host: "127.0.0.1", port } });
const jobs = [];
for (let i = 0; i < n; i++) jobs.push({ name: "j", data: { m: String(i).padStart(size, "x") } });
for (let i = 0; i < n; i += 1000) await q.addBulk(jobs.slice(i, i + 1000));
await q.close();
const version = JSON.parse((await import("node:fs")).readFileSync(
  new URL("./node_modules/bullmq/package.json", import.meta.url))).version;
console.log(JSON.stringify({ version }));
"""


def messages(n):
    return [str(i).encode().rjust(SIZE, b"x") for i in range(n)]


def usage(c, pattern="*"):
    total = 0
    for k in c.scan_iter(match=pattern, count=1000):
        total += c.memory_usage(k, samples=0) or 0
    return total


def rmq(c, n, popped=False, groups=False):
    p = c.pipeline(transaction=False)
    msgs = messages(n)
    q = "g" if groups else "q"
    for i in range(0, n, BATCH):
        for j, m in enumerate(msgs[i:i + BATCH]):
            if groups:
                p.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "GROUP", f"grp{(i + j) % (n // 10)}", m)
        if not groups:
            p.execute_command("RMQ.PUSH", q, "PRIORITY", 1, *msgs[i:i + BATCH])
    p.execute()
    if popped:
        for _ in range(0, n, BATCH):
            c.execute_command("RMQ.POP", q, "COUNT", BATCH, "LEASE", 3_600_000)
        assert c.zcard(f"prepare{{{q}}}") == n
    return usage(c)


def zset(c, n):
    p = c.pipeline(transaction=False)
    msgs = messages(n)
    for i in range(0, n, BATCH):
        p.zadd("z", {m: 1 for m in msgs[i:i + BATCH]})
    p.execute()
    return usage(c)


def stream(c, n):
    p = c.pipeline(transaction=False)
    for m in messages(n):
        p.xadd("s", {"m": m})
    p.execute()
    return usage(c)


def bullmq(port, c, n):
    if not (NODE_DIR / "node_modules/bullmq").exists():
        return None, "not installed (npm ci in clients/node)"
    script = NODE_DIR / f".bench_memory_{os.getpid()}.mjs"
    script.write_text(BULL_JS)
    try:
        out = subprocess.run(["node", str(script), str(port), str(n), str(SIZE)], capture_output=True,
                             text=True, check=True, timeout=600).stdout
    finally:
        script.unlink()
    version = json.loads(out.strip().splitlines()[-1])["version"]
    return usage(c, "bull:mem:*"), f"BullMQ {version}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="10,000 messages (a smoke test)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args()
    n = 10_000 if a.quick else a.messages
    rows = []
    server = harness.Server(tag="rmq-bench-memory").start()
    try:
        c = redis.Redis(port=server.port)
        version = c.info("server")["redis_version"]
        for label, f in [("RMQ waiting", lambda: rmq(c, n)),
                         ("RMQ in flight", lambda: rmq(c, n, popped=True)),
                         ("RMQ grouped waiting (10 messages a group)", lambda: rmq(c, n, groups=True)),
                         ("bare sorted set", lambda: zset(c, n)),
                         ("Stream entry", lambda: stream(c, n))]:
            c.flushall()
            rows.append((label, f() / n, ""))
        c.flushall()
        total, note = bullmq(server.port, c, n)
        rows.append(("BullMQ job", total / n if total is not None else None, note))
    finally:
        server.stop()
    lines = ["# Memory per message of 100 bytes (issue 31)", "",
             f"`python3 bench/bench_memory.py --messages {n}`, "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, server {version} — {n:,} "
             "distinct messages per peer; the sum of MEMORY USAGE (SAMPLES 0) over every key the peer made, "
             "per message.", "",
             "| what | bytes per message | note |", "|---|---|---|"]
    lines += [f"| {label} | {'%.0f' % v if v is not None else '—'} | {note} |" for label, v, note in rows]
    md = "\n".join(lines)
    harness.write_report(a.out, md)
    print(md)


if __name__ == "__main__":
    main()
