#!/usr/bin/env python3
"""The cost of the v3 observability on the hot path (issue 22): per-queue counters, the
queue registry (RMQ.QUEUES) and the pause check, on push, pop and ack.

Instructions the server runs per message (valgrind --tool=callgrind, counted between
`callgrind_control -z` and `-d`: repeatable whatever else the machine does), for the driver's
`cpu` phases (push N, pop N, ack N on one queue; 1 message per command and batches of 100),
on three redis-servers run side by side, each phase on each in turn:
  - base: a module without any of it (--base, e.g. main's build),
  - ops: this work tree's module as it is loaded by default (counters on),
  - ops, stats-queues 0: the same with no queue counted (the counters off).
Figures: instructions per message for the whole server and for the commands alone (the
inclusive cost of redis-server's call()), and the ratios ops / base and counters on / off.
Target: ops / base <= 1.03 on each of push, pop and ack (commands alone).

Uses bench/harness (harness.pinned: servers on core 0 stopped by pid, the load here on core 1;
harness.phases: the callgrind meter and the phases). Prints a table and writes
bench/results/bench_ops.md.
"""

import argparse
import os
import shutil
import sys
from pathlib import Path

import harness
from harness import median, pinned
from harness.phases import Instr, instr_phases
from harness.pinned import log

RESULTS = harness.RESULTS / "bench_ops.md"
TARGET = 1.03
PHASES = ("push", "pop", "ack")


def measure(servers, n, rounds):
    """{(batch, phase, measure): {server name: median per message}}."""
    got = {}
    for r in range(rounds):
        for batch in (1, 100):
            order = servers if r % 2 == 0 else servers[::-1]
            for name, server, meter in order:
                res = instr_phases(server.client(), n, batch, meter)
                for phase, (total, _dist, extra) in res.items():
                    got.setdefault((batch, phase, "total"), {}).setdefault(name, []).append(total)
                    got.setdefault((batch, phase, "cmd"), {}).setdefault(name, []).append(extra["cmd"])
                log(f"  round {r + 1} batch {batch:>3} {name:22} " +
                    " ".join(f"{p} {res[p][2]['cmd']:,.0f}" for p in PHASES) + " instr/msg in the command")
    return {k: {name: median(v) for name, v in by.items()} for k, by in got.items()}


def report(figs, a, names):
    base, on, off = names
    lines = [
        "# Observability cost on the hot path (bench/bench_ops.py)\n",
        f"Instructions per message (callgrind), median of {a.rounds} rounds, {a.messages:,} messages per "
        "phase on one queue; **cmd** = the commands alone (redis-server's call()), **total** = the whole "
        f"server. base = `{a.base}`; ops = this tree; ops/base target ≤ {TARGET}×.\n",
        "| batch | phase | measure | base | ops (counters on) | ops, stats-queues 0 | ops / base | on / off |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    worst = 0.0
    for batch in (1, 100):
        for phase in PHASES:
            for m in ("cmd", "total"):
                f = figs[(batch, phase, m)]
                r, r_onoff = f[on] / f[base], f[on] / f[off]
                if m == "cmd":
                    worst = max(worst, r)
                lines.append(f"| {batch} | {phase} | {m} | {f[base]:,.0f} | {f[on]:,.0f} | {f[off]:,.0f} | "
                             f"{r:.3f}× | {r_onoff:.3f}× |")
    verdict = "PASS" if worst <= TARGET else "MISS"
    lines.append(f"\nWorst ops / base on the commands: {worst:.3f}× — {verdict} (target ≤ {TARGET}×).\n")
    return "\n".join(lines), worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the module to compare with (e.g. main's target/release/librmq.so)")
    ap.add_argument("--messages", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results/bench_ops.md")
    a = ap.parse_args()
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        raise SystemExit("bench-ops: valgrind (callgrind_control) not found")
    for p in (Path(a.base), pinned.MODULE):
        if not p.exists():
            raise SystemExit(f"bench-ops: module missing: {p}")
    os.sched_setaffinity(0, {pinned.LOAD_CORE})
    names = ("base", "ops", "ops, stats-queues 0")
    servers = []
    try:
        for name, module in zip(names, (a.base, pinned.MODULE, pinned.MODULE)):
            s = pinned.Server()
            s.take_module(str(module))
            meter = Instr(s)
            s.start()
            if name == names[2]:
                s.client().config_set("rmq.stats-queues", 0)
            servers.append((name, s, meter))
        log(f"bench-ops: servers under callgrind: {', '.join(f'{n} pid {s.proc.pid}' for n, s, _ in servers)}")
        figs = measure(servers, a.messages, a.rounds)
    finally:
        for _, s, _ in servers:
            s.cleanup()
    text, worst = report(figs, a, names)
    print(text)
    if not a.no_write:
        harness.write_report(RESULTS, text)
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
