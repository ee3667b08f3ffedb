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

With --journal (issue 42), instead: the journal's cost, on two servers of this tree's module
and the base's:
  - a whole lifecycle (push, pop, ack: the same phases) with the queue's policy `journal`
    on (keeping every event) against off, in instructions per message (target on / off
    <= 1.5), with the share of Redis's own append to the Stream (RM_StreamAdd, inclusive)
    and, as the peer, the same entries sent as bare XADD commands; and the journal's memory
    per event (MEMORY USAGE of journal{Q} / its entries);
  - grouped drains of a `fixed` queue (DELAY 0, messages spread over --groups groups; pops of
    up to 100 and their acks until it is empty): this tree against the base, which must
    not be slower (the group order rule must not cost the common path).
That writes bench/results/bench_journal.md.

Uses bench/harness (harness.pinned: servers on core 0 stopped by pid, the load here on core 1;
harness.phases: the callgrind meter and the phases; the meter fixes the servers' random seeds,
so servers given the same commands build the same sorted sets). Prints a table and writes
bench/results/bench_ops.md.
"""

import argparse
import os
import shutil
import sys
from pathlib import Path

import harness
from harness import median, pinned
from harness.phases import Instr, instr_phases, pipelined
from harness.pinned import log

RESULTS = harness.RESULTS / "bench_ops.md"
JOURNAL_RESULTS = harness.RESULTS / "bench_journal.md"
TARGET = 1.03
JOURNAL_TARGET = 1.5
# Keeps every event of a run (3 a message), so the memory per event is of a journal not trimmed.
JOURNAL_POLICY = "journal 1000000"
# Redis's own append of an entry to a Stream, inside the journal's cost.
STREAM_ADD = "RM_StreamAdd"
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


def journal_memory(c):
    """(bytes, entries) of journal{q}."""
    n = c.xlen("journal{q}")
    return c.memory_usage("journal{q}", samples=0), n


def measure_journal(base, ops, n, rounds, groups):
    """{lifecycle figures}, {(batch, journal on/off): bytes per event}, {grouped drain figures}:
    each {key: {server or setting: median per message}}."""
    life, mem, drain, floor = {}, {}, {}, []
    for r in range(rounds):
        for batch in (1, 100):
            for journal in ((False, True) if r % 2 == 0 else (True, False)):
                name = "on" if journal else "off"
                res = instr_phases(ops[1].client(), n, batch, ops[2], policy=JOURNAL_POLICY if journal else "")
                for p in PHASES:
                    total, _dist, extra = res[p]
                    for m, v in (("total", total), ("cmd", extra["cmd"])):
                        life.setdefault((batch, m, p), {}).setdefault(name, []).append(v)
                for m in ("total", "cmd"):
                    per = sum(life[(batch, m, p)][name][-1] for p in PHASES)
                    life.setdefault((batch, m), {}).setdefault(name, []).append(per)
                if journal:
                    append = sum(res[p][2][STREAM_ADD] for p in PHASES)
                    life.setdefault((batch, STREAM_ADD), {}).setdefault(name, []).append(append)
                if journal:
                    size, entries = journal_memory(ops[1].client())
                    if entries != 3 * n:
                        raise RuntimeError(f"journal: {entries} entries after {n} lifecycles, not {3 * n}")
                    mem.setdefault(batch, []).append(size / entries)
                log(f"  round {r + 1} batch {batch:>3} journal {name:3} lifecycle "
                    f"{life[(batch, 'cmd')][name][-1]:,.0f} instr/msg in the commands")
        floor.append(bare_xadds(ops[1].client(), n, ops[2]))
        log(f"  round {r + 1} bare XADDs of a lifecycle's entries {floor[-1]:,.0f} instr/msg in the commands")
        for name, server, meter in (base, ops) if r % 2 == 0 else (ops, base):
            total, cmd = grouped_drain(server.client(), n, groups, meter)
            drain.setdefault("total", {}).setdefault(name, []).append(total)
            drain.setdefault("cmd", {}).setdefault(name, []).append(cmd)
            log(f"  round {r + 1} grouped drain {name:4} {cmd:,.0f} instr/msg in the commands")
    med = lambda d: {k: {name: median(v) for name, v in by.items()} for k, by in d.items()}
    return med(life), {b: median(v) for b, v in mem.items()}, med(drain), median(floor)


def bare_xadds(c, n, meter):
    """The floor of the journal's cost: the XADDs, sent as commands, of the 3 entries a
    lifecycle writes (pushed, popped, acked: the fields and values the journal gives them),
    in command-only instructions per message."""
    c.flushall()
    entries = [("pushed", ("priority", 3)), ("popped", ("id", 1_000)), ("acked", ("id", 1_000))]

    def add(p, i):
        event, (field, value) = entries[i % 3]
        p.execute_command("XADD", "journal{peer}", "*", "event", event, "message", f"msg:{i // 3:016}",
                          "deliveries", int(event != "pushed"), "by", 5, field, value + i // 3)

    _, d = meter.around(lambda: pipelined(c, 3 * n, add))
    return d["cmd"] / n


def grouped_drain(c, n, groups, meter):
    """Pushes n messages to a `fixed` queue (DELAY 0) over `groups` groups, then counts the
    drain: POP COUNT 100 and the ACK of what it took, until all n are acked. Returns
    (whole-server, command-only) instructions per message."""
    c.flushall()
    pipelined(c, n, lambda p, i: p.execute_command("RMQ.PUSH", "q", "DELAY", 0, "GROUP", f"g{i % groups}", f"msg:{i:016}"))

    def drain():
        acked = 0
        while acked < n:
            got = c.execute_command("RMQ.POP", "q", "COUNT", 100)
            if not got:
                raise RuntimeError(f"grouped drain: nothing to pop after {acked} of {n}")
            acked += c.execute_command("RMQ.ACK", "q", *(e[0] for e in got))
        return acked

    _, d = meter.around(drain)
    return d["total"] / n, d["cmd"] / n


def journal_report(life, mem, drain, floor, a):
    lines = [
        "# The journal's cost and grouped drains (bench/bench_ops.py --journal)\n",
        f"Instructions per message (callgrind), median of {a.rounds} rounds, {a.messages:,} messages per "
        "phase on one queue; **cmd** = the commands alone (redis-server's call()), **total** = the whole "
        f"server. Lifecycle = push + pop + ack of each message, this tree's module, the queue's policy "
        f"`{JOURNAL_POLICY}` (on) or none (off); target on / off ≤ {JOURNAL_TARGET}×.\n",
        "| batch | phase | measure | journal off | journal on | on / off |",
        "|---|---|---|---:|---:|---:|",
    ]
    worst = 0.0
    for batch in (1, 100):
        for p in (*PHASES, "lifecycle"):
            for m in ("cmd", "total"):
                f = life[(batch, m)] if p == "lifecycle" else life[(batch, m, p)]
                r = f["on"] / f["off"]
                if p == "lifecycle" and m == "cmd":
                    worst = max(worst, r)
                name = "**lifecycle**" if p == "lifecycle" else p
                lines.append(f"| {batch} | {name} | {m} | {f['off']:,.0f} | {f['on']:,.0f} | {r:.3f}× |")
    verdict = "PASS" if worst <= JOURNAL_TARGET else "MISS"
    lines.append(f"\nWorst lifecycle on / off on the commands: {worst:.3f}× — {verdict} (target ≤ {JOURNAL_TARGET}×).\n")
    for batch in (1, 100):
        off, on = life[(batch, "cmd")]["off"], life[(batch, "cmd")]["on"]
        append = life[(batch, STREAM_ADD)]["on"]
        lines.append(f"Batch {batch}: the journal adds {on - off:,.0f} instructions a lifecycle (3 entries); "
                     f"{append:,.0f} of them are Redis's own appends to the Stream ({STREAM_ADD}, inclusive), "
                     f"which alone make (off + appends) / off = {(off + append) / off:.3f}×.")
    lines.append(f"\nThe peer: the same 3 entries a message sent as bare XADD commands cost {floor:,.0f} "
                 "instructions a message in the commands.\n")
    lines.append("Memory per journal event (MEMORY USAGE journal{q} SAMPLES 0 / XLEN, after the lifecycles: "
                 "3 entries a message, messages of 20 bytes): " +
                 ", ".join(f"batch {b}: {v:,.0f} bytes" for b, v in sorted(mem.items())) + ".\n")
    r_cmd, r_total = (drain[m]["ops"] / drain[m]["base"] for m in ("cmd", "total"))
    dverdict = "PASS" if r_cmd <= 1.0 else "MISS"
    lines += [
        f"Grouped drain of a `fixed` queue: {a.messages:,} messages (DELAY 0) over {a.groups} groups, then "
        f"POP COUNT 100 and the ACK of what it took until empty; base = `{a.base}`, ops = this tree.\n",
        "| measure | base | ops | ops / base |",
        "|---|---:|---:|---:|",
        f"| cmd | {drain['cmd']['base']:,.0f} | {drain['cmd']['ops']:,.0f} | {r_cmd:.3f}× |",
        f"| total | {drain['total']['base']:,.0f} | {drain['total']['ops']:,.0f} | {r_total:.3f}× |",
        f"\nGrouped drain ops / base on the commands: {r_cmd:.3f}× — {dverdict} (target ≤ 1.0×: not slower).\n",
    ]
    return "\n".join(lines), worst <= JOURNAL_TARGET and r_cmd <= 1.0


def start(module, stats_queues=None, fns=()):
    s = pinned.Server()
    s.take_module(str(module))
    meter = Instr(s, fns)
    s.start()
    if stats_queues is not None:
        s.client().config_set("rmq.stats-queues", stats_queues)
    return s, meter


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the module to compare with (e.g. main's target/release/librmq.so)")
    ap.add_argument("--messages", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--journal", action="store_true", help="the journal's cost and grouped drains instead")
    ap.add_argument("--groups", type=int, default=100, help="groups of the grouped drain (--journal)")
    ap.add_argument("--no-write", action="store_true", help="do not write the results file")
    a = ap.parse_args()
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        raise SystemExit("bench-ops: valgrind (callgrind_control) not found")
    for p in (Path(a.base), pinned.MODULE):
        if not p.exists():
            raise SystemExit(f"bench-ops: module missing: {p}")
    os.sched_setaffinity(0, {pinned.LOAD_CORE})
    names = ("base", "ops", "ops, stats-queues 0") if not a.journal else ("base", "ops")
    servers = []
    try:
        for name, module in zip(names, (a.base, pinned.MODULE, pinned.MODULE)):
            fns = (STREAM_ADD,) if a.journal and name == "ops" else ()
            s, meter = start(module, 0 if name == "ops, stats-queues 0" else None, fns)
            servers.append((name, s, meter))
        log(f"bench-ops: servers under callgrind: {', '.join(f'{n} pid {s.proc.pid}' for n, s, _ in servers)}")
        if a.journal:
            figs = measure_journal(servers[0], servers[1], a.messages, a.rounds, a.groups)
        else:
            figs = measure(servers, a.messages, a.rounds)
    finally:
        for _, s, _ in servers:
            s.cleanup()
    if a.journal:
        text, ok = journal_report(*figs, a)
        path = JOURNAL_RESULTS
    else:
        text, worst = report(figs, a, names)
        ok, path = worst <= TARGET, RESULTS
    print(text)
    if not a.no_write:
        harness.write_report(path, text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
