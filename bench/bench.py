#!/usr/bin/env python3
"""RMQ benchmark against its peers (make bench).

Starts its OWN redis-server on a free port (`--save '' --appendonly no`, the module loaded,
pinned to core 0 with `taskset -c 0`); this script and the load driver (the Rust crate in
bench/driver, built in release mode by `make bench`) run pinned to core 1. The server is
stopped by its pid at the end (SIGTERM, then SIGKILL), never by name.

Peers, side by side in one run:
  PING             the transport floor;
  bare zset        the sorted-set moves of one lifecycle: ZADD q; ZPOPMAX q + ZADD prepare;
                   ZREM prepare (the data-structure floor);
  Lua (EVALSHA)    the original RMQ design: bench/lua/{push,pop,ack}.lua, same semantics and
                   the same meta{Q} layout as the module (priority kind);
  Streams          XADD; XREADGROUP COUNT n; XACK + XDEL;
  RMQ              RMQ.PUSH q PRIORITY p m…; RMQ.POP q [COUNT n]; RMQ.ACK q m….

Figures (every one the median of --rounds rounds, peers interleaved within each round):
  1. server CPU per message pushed, popped, acked: INFO commandstats usec (and the server
     process's CPU from INFO cpu, which includes network I/O), CONFIG RESETSTAT before each
     phase; unbatched (1 message per command, 100 commands per round trip) and batched
     (100 messages per command; Streams: 100 XADDs pipelined);
  2. memory per waiting and per in-flight message (MEMORY USAGE … SAMPLES 0 on every key of
     the queue) against a plain sorted set holding the same members and scores;
  3. end-to-end messages/s: producers push and consumers pop + ack flat out (pipelined),
     unbatched and batched-100, plus batched-100 with ~800 messages in flight;
  4. push→pop latency percentiles at a fixed offered load (10k msgs/s);
  5. scale: usec per RMQ.PUSH / RMQ.POP / RMQ.ACK with 1k, 1M and 10M messages waiting
     (bare ZADD / ZPOPMAX+ZADD / ZREM on a sorted set of the same size alongside).

Prints a table and writes bench/results/bench.md. Every wait is bounded: each driver run
has a timeout and the whole run a watchdog (--budget seconds). Exit status 1 on an error;
missed targets are reported (FAIL) but do not fail the run unless --strict is given.

Environment: RMQ_MODULE (module, default <repo>/target/release/librmq.so) and RMQ_MODULE_NOTE
(what it was built from, for the report), RMQ_SERVER_BIN or REDIS_SERVER (binary, default redis-server on
PATH), RMQ_BENCH_DRIVER (driver binary). The server loads a private copy of the module, so a
rebuild during the run changes nothing.
"""

import argparse
import atexit
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import harness
from harness import median
from harness.figures import NOISY, Fig, fmt, fmt_ratio, ratio
from harness.pinned import (DRIVER, LOAD_CORE, MODULE, PROBES, REPO, RETRIES, SERVER, SERVER_CORE,
                            LoadMeter, Retries, driver, git_commit, log, machine_info, machine_rows,
                            module_desc, parse_common, speed_probe, top_processes)

RESULTS = harness.RESULTS / "bench.md"

PEERS = ["rmq", "zset", "lua", "streams"]
NAMES = {"rmq": "RMQ", "zset": "bare zset", "lua": "Lua (EVALSHA)", "streams": "Streams", "ping": "PING"}

# Targets (issue 6).
E2E_TARGET = 150_000          # msgs/s, RMQ end to end, batched-100 push+pop+ack
MEM_WAITING_TARGET = 1.1      # RMQ bytes per waiting message / plain sorted set
MEM_INFLIGHT_TARGET = 2.0     # RMQ bytes per in-flight message / plain sorted set
SCALE_TARGET = 2.0            # usec per call at 10M waiting / at 1k


# ------------------------------------------------------------------------------------------
# The measurements.

def per_msg(phase, n):
    return phase["usec"] / n, phase["cpu_us"] / n


def run_cpu(rounds, n, figs):
    """figs[(batch, what)] where what in push/pop/ack/life (commandstats) and
    cpu_life (process CPU); also per-command detail for the floor comparison."""
    for r in range(rounds):
        speed_probe("server CPU per message")
        for batch in (1, 100):
            # RMQ right next to its ratio's peer, in turns first and second: the machine's
            # speed drifts within a round (the RMQ/bare ratio moved 0.9-1.8x between rounds
            # when the Lua and Streams runs came between the two).
            pair = ["zset", "rmq"] if r % 2 == 0 else ["rmq", "zset"]
            for peer in ["ping", *pair, "lua", "streams"]:
                j = driver("cpu", 240, peer=peer, batch=batch, messages=n)
                if peer == "ping":
                    calls = j["ping"]["calls"]
                    us = j["ping"]["usec"] / calls
                    cpu = j["ping"]["cpu_us"] / calls
                    # One lifecycle takes 3 commands per `batch` messages.
                    for what in ("push", "pop", "ack"):
                        figs[(batch, what)].add("ping", us / batch, j["_dist"])
                        figs[(batch, "cpu_" + what)].add("ping", cpu / batch, j["_dist"])
                    figs[(batch, "life")].add("ping", 3 * us / batch, j["_dist"])
                    figs[(batch, "cpu_life")].add("ping", 3 * cpu / batch, j["_dist"])
                    continue
                life = cpu_life = 0.0
                for what in ("push", "pop", "ack"):
                    us, cpu = per_msg(j[what], n)
                    figs[(batch, what)].add(peer, us, j["_dist"])
                    figs[(batch, "cpu_" + what)].add(peer, cpu, j["_dist"])
                    life += us
                    cpu_life += cpu
                figs[(batch, "life")].add(peer, life, j["_dist"])
                figs[(batch, "cpu_life")].add(peer, cpu_life, j["_dist"])
                log(f"  cpu round {r + 1} batch {batch:>3} {peer:8} lifecycle {life:6.2f} usec/msg "
                    f"(process {cpu_life:6.2f})")


def run_memory(rounds, n, figs):
    for r in range(rounds):
        speed_probe("memory")
        for peer in ["zset", "rmq", "lua", "streams"]:
            j = driver("memory", 240, quality=False, peer=peer, messages=n)
            figs["waiting"].add(peer, j["waiting"]["total"] / n)
            if "inflight" in j:
                figs["inflight"].add(peer, j["inflight"]["total"] / n)
                figs["detail"].add(peer, j)
            else:
                figs["inflight"].add(peer, j["waiting"]["total"] / n)
            log(f"  memory round {r + 1} {peer:8} waiting {j['waiting']['total'] / n:6.1f} B/msg"
                + (f", in flight {j['inflight']['total'] / n:6.1f} B/msg" if "inflight" in j else ""))


E2E_CONFIGS = [
    ("unbatched", dict(batch=1)),
    ("batch100", dict(batch=100)),
    ("batch100_deep", dict(batch=100, pop_depth=4)),
]


def run_e2e(rounds, secs, warmup, figs):
    for r in range(rounds):
        speed_probe("end to end")
        for name, cfg in E2E_CONFIGS:
            for peer in ["zset", "lua", "streams", "rmq"]:
                j = driver("e2e", secs + warmup + 60, peer=peer, secs=secs, warmup=warmup, **cfg)
                figs[name].add(peer, j["msgs_per_s"], j["_dist"])
                figs[name + "_cpu"].add(peer, j["server_cpu_pct"], j["_dist"])
                figs[name + "_inflight"].add(peer, j["inflight_at_end"], j["_dist"])
                acked = max(j["acked"], 1)
                for cmd, (calls, usec) in j["window"].items():
                    figs[name + "_win"].add((peer, cmd), usec / acked, j["_dist"])
                log(f"  e2e round {r + 1} {name:13} {peer:8} {j['msgs_per_s']:>9,.0f} msgs/s "
                    f"(server CPU {j['server_cpu_pct']:.0f}%, in flight {j['inflight_at_end']})")


def run_latency(rounds, secs, warmup, rate, figs):
    for r in range(rounds):
        speed_probe("latency")
        for peer in ["lua", "streams", "rmq"]:
            j = driver("latency", secs + warmup + 60, peer=peer, secs=secs, warmup=warmup, rate=rate)
            for p in ("p50_us", "p99_us", "p999_us"):
                figs[p].add(peer, j[p], j["_dist"])
            figs["lost"].add(peer, j["expected"] - j["measured"])
            log(f"  latency round {r + 1} {peer:8} p50 {j['p50_us']:8.0f} us  p99 {j['p99_us']:8.0f} us  "
                f"p999 {j['p999_us']:8.0f} us  ({j['measured']} of {j['expected']} measured)")


def run_scale(rounds, sizes, cycles, figs):
    c = SERVER.client()
    for size in sizes:
        c.flushall()
        t = time.time()
        for peer, q in (("rmq", "q"), ("zset", "z")):
            f = driver("fill", 600, quality=False, peer=peer, queue=q, messages=size)
            log(f"  scale: {peer} {q} filled with {size:,} in {f['secs']:.1f} s")
        for r in range(rounds):
            speed_probe("scale")
            for peer, q in (("rmq", "q"), ("zset", "z")):
                j = driver("scale", 240, peer=peer, queue=q, cycles=cycles, depth=100,
                           start=r * cycles * 100)
                n = j["messages"]
                for what in ("push", "pop", "ack"):
                    figs[(size, what)].add(peer, j[what]["usec"] / n, j["_dist"])
                log(f"  scale {size:>10,} round {r + 1} {peer:5} push {j['push']['usec'] / n:5.2f} "
                    f"pop {j['pop']['usec'] / n:5.2f} ack {j['ack']['usec'] / n:5.2f} usec/msg")
        info = c.info("memory")
        figs[(size, "used_memory")].add("server", info.get("used_memory", 0))
        log(f"  scale {size:,}: {time.time() - t:.0f} s, server used_memory {info.get('used_memory_human')}")
    c.flushall()


# ------------------------------------------------------------------------------------------
# Report.

def build_report(a, m, cpu, mem, e2e, lat, scale, loads, elapsed, commit):
    out = []
    P = ["rmq", "zset", "lua", "streams"]
    head = ("| figure | RMQ | bare zset | Lua (EVALSHA) | Streams | PING | RMQ/Lua | RMQ/bare | "
            "RMQ/Streams | target | result |")
    sep = "|" + "---|" * 11
    notes_noisy = []
    notes_dirty = []

    def row(label, fig, key=None, unit="", ping=True, target="", result="", lower_better=True):
        vals = {p: fig.med(p) for p in P + ["ping"]}
        cells = []
        for p in P + ["ping"]:
            if p == "ping" and not ping:
                cells.append("—")
                continue
            s = fmt(vals[p], unit)
            if vals[p] is not None and fig.noisy(p):
                s += " ~"
                notes_noisy.append(f"{label} / {NAMES[p]}")
            if vals[p] is not None and not fig.all_clean(p):
                s += " *"
                notes_dirty.append(f"{label} / {NAMES[p]}")
            cells.append(s)
        rr = [fmt_ratio(fig.ratio("rmq", x)) for x in ("lua", "zset", "streams")]
        return f"| {label} | " + " | ".join(cells) + " | " + " | ".join(rr) + f" | {target} | {result} |"

    # 1. server CPU (commandstats)
    out.append("### Server CPU per message, INFO commandstats (usec; lower is better)\n")
    out.append("Phases: push N, pop all N, ack all N, CONFIG RESETSTAT before each; "
               f"N = {a.cpu_messages:,} messages of 20 bytes. Unbatched = 1 message per command "
               "(100 commands per round trip); batch 100 = 100 messages per command (Streams: "
               "XADD one per message, XREADGROUP COUNT 100, XACK + XDEL of 100 ids). PING column: "
               "PING usec per call × commands per message (the transport floor; commandstats "
               "counts only command execution, not reading, parsing or replying).\n")
    out.append(head)
    out.append(sep)
    for batch, tag in ((1, "unbatched"), (100, "batch 100")):
        for what, lab in (("push", "push"), ("pop", "pop"), ("ack", "ack"), ("life", "**lifecycle push+pop+ack**")):
            out.append(row(f"{lab}, {tag}", cpu[(batch, what)]))
    out.append("")
    out.append("### Server process CPU per message lifecycle, INFO cpu (usec; includes network I/O)\n")
    out.append(head)
    out.append(sep)
    for batch, tag in ((1, "unbatched"), (100, "batch 100")):
        for what, lab in (("cpu_push", "push"), ("cpu_pop", "pop"), ("cpu_ack", "ack"), ("cpu_life", "**lifecycle**")):
            out.append(row(f"{lab}, {tag}", cpu[(batch, what)]))
    out.append("")

    # 2. end to end
    r100 = e2e["batch100"].med("rmq")
    e2e_ok = r100 is not None and r100 >= E2E_TARGET
    out.append("### End to end, messages/s pushed → popped → acked (higher is better; ratios RMQ/peer)\n")
    out.append(f"Rust driver (bench/driver), {a.e2e_secs:g} s measured after {a.e2e_warmup:g} s warm-up; 2 producer "
               "and 2 consumer connections, all pipelined: producers send 100 single-message commands "
               "(unbatched) or 4 commands of 100 messages per round trip and hold back when 20,000 "
               "messages are outstanding; each consumer sends, per round trip, the acks of what it "
               "popped last plus 100 pops of 1 (unbatched) or 2 pops of COUNT 100 (≈400 in flight); "
               "the last row pops 4 × COUNT 100 per round trip (≈800 in flight).\n")
    out.append(head)
    out.append(sep)
    out.append(row("msgs/s, unbatched", e2e["unbatched"], ping=False, lower_better=False))
    out.append(row("**msgs/s, batch 100**", e2e["batch100"], ping=False,
                   target=f"RMQ ≥ {E2E_TARGET:,}", result="PASS" if e2e_ok else "**FAIL**", lower_better=False))
    out.append(row("msgs/s, batch 100, ≈800 in flight", e2e["batch100_deep"], ping=False, lower_better=False))
    out.append(row("server process CPU %, batch 100", e2e["batch100_cpu"], ping=False))
    out.append("")
    out.append("Server usec per acked message in the steady state of each end-to-end run "
               "(INFO commandstats over the measured window):\n")
    out.append("| command | unbatched | batch 100 | batch 100, ≈800 in flight |")
    out.append("|---|---|---|---|")
    cmds = {"rmq": ["rmq.push", "rmq.pop", "rmq.ack"], "zset": ["zadd", "zpopmax", "zrem"],
            "lua": ["evalsha"], "streams": ["xadd", "xreadgroup", "xack", "xdel"]}
    for p in P:
        for cmd in cmds[p]:
            vals = [e2e[f"{n}_win"].med((p, cmd)) for n in ("unbatched", "batch100", "batch100_deep")]
            out.append(f"| {NAMES[p]}: {cmd.upper()} | " + " | ".join(fmt(v) for v in vals) + " |")
    out.append("")

    # 3. latency
    out.append(f"### Push → pop latency at a fixed offered load of {a.rate:,.0f} msgs/s (usec; lower is better)\n")
    out.append("One producer pushes one message per command on a fixed schedule; each message carries "
               "its scheduled send time (a late send counts against it). Two consumers pop COUNT 100 "
               "and ack: RMQ with RMQ.POP … BLOCK 100, Streams with XREADGROUP … BLOCK 100, Lua "
               "polls (it cannot block) and sleeps 1 ms after an empty pop.\n")
    out.append(head)
    out.append(sep)
    for p, lab in (("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9")):
        out.append(row(lab, lat[p], ping=False))
    out.append("")

    # 4. memory
    wr = mem["waiting"].ratio("rmq", "zset")
    ir = mem["inflight"].ratio("rmq", "zset")
    out.append(f"### Memory per message, {a.mem_messages:,} messages of 20 bytes (bytes; lower is better)\n")
    out.append("MEMORY USAGE … SAMPLES 0 summed over the queue's keys (RMQ and Lua: q, prepare{q}, "
               "meta{q}, dead{q}; Streams: the stream with its group) ÷ messages. Bare zset: a plain "
               "sorted set with the same members and scores (the baseline for both rows). In flight = "
               "all popped under a 1 h lease.\n")
    out.append(head)
    out.append(sep)
    out.append(row("bytes per waiting message", mem["waiting"], unit="B", ping=False,
                   target=f"RMQ/bare ≤ {MEM_WAITING_TARGET}×",
                   result=("PASS" if wr is not None and wr <= MEM_WAITING_TARGET else "**FAIL**")))
    out.append(row("bytes per in-flight message", mem["inflight"], unit="B", ping=False,
                   target=f"RMQ/bare ≤ {MEM_INFLIGHT_TARGET}×",
                   result=("PASS" if ir is not None and ir <= MEM_INFLIGHT_TARGET else "**FAIL**")))
    det = mem["detail"].v.get("rmq", [])
    if det:
        d = det[-1]
        out.append("")
        out.append("RMQ keys, last round (bytes): waiting " +
                   ", ".join(f"{k} {v:,}" for k, v in d["waiting"].items() if k != "total") +
                   "; in flight " + ", ".join(f"{k} {v:,}" for k, v in d["inflight"].items() if k != "total") + ".")
    out.append("")

    # 5. scale
    sizes = a.scale_sizes
    out.append("### Scale: server usec per call with N messages waiting (INFO commandstats; lower is better)\n")
    out.append(f"The queue (priority kind) is filled to N with batched pushes; then {a.scale_cycles} times "
               "{RESETSTAT; 100 single pushes of new messages; RESETSTAT; 100 single pops; RESETSTAT; "
               "100 single acks}, so the queue keeps its size. Bare: ZADD / ZPOPMAX + ZADD prepare / "
               "ZREM prepare on a plain sorted set of the same size.\n")
    big, small = sizes[-1], sizes[0]
    out.append("| command | " + " | ".join(f"N = {s:,}" for s in sizes) +
               f" | {big:,} / {small:,} | target | result | bare " + " / ".join(f"{s:,}" for s in sizes) +
               f" | bare {big:,} / {small:,} |")
    out.append("|" + "---|" * (len(sizes) + 6))
    scale_fail = []
    for what, lab in (("push", "RMQ.PUSH"), ("pop", "RMQ.POP"), ("ack", "RMQ.ACK")):
        vals = [scale[(s, what)].med("rmq") for s in sizes]
        bare = [scale[(s, what)].med("zset") for s in sizes]
        rr = ratio(vals[-1], vals[0])
        ok = rr is not None and rr <= SCALE_TARGET
        if not ok:
            scale_fail.append(lab)
        noisy = any(scale[(s, what)].noisy("rmq") for s in sizes)
        cells = [fmt(v) + ("" if scale[(sz, what)].all_clean("rmq") else " *") for v, sz in zip(vals, sizes)]
        out.append(f"| {lab} | " + " | ".join(cells) + f" | {fmt_ratio(rr)}{' ~' if noisy else ''} | "
                   f"≤ {SCALE_TARGET}× | {'PASS' if ok else '**FAIL**'} | " + " / ".join(fmt(v) for v in bare) +
                   f" | {fmt_ratio(ratio(bare[-1], bare[0]))} |")
    mems = [scale[(s, "used_memory")].med("server") for s in sizes]
    out.append("")
    out.append("Server used_memory after each size (RMQ queue + bare sorted set of N each): " +
               ", ".join(f"N = {s:,}: {m / 2**20:,.0f} MiB" for s, m in zip(sizes, mems) if m) + ".")
    out.append("")

    # Floor comparison per command.
    out.append("### RMQ per command against its bare floor (commandstats usec per message)\n")
    out.append("| command | unbatched RMQ | floor | RMQ/floor | batch 100 RMQ | floor | RMQ/floor | e2e batch 100 RMQ | floor | RMQ/floor |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    worst = []
    for what, lab, floor_lab in (("push", "RMQ.PUSH", "ZADD q"), ("pop", "RMQ.POP", "ZPOPMAX q + ZADD prepare"),
                                 ("ack", "RMQ.ACK", "ZREM prepare")):
        cells = []
        for batch in (1, 100):
            rv, fv = cpu[(batch, what)].med("rmq"), cpu[(batch, what)].med("zset")
            rr = ratio(rv, fv)
            cells += [fmt(rv), fmt(fv), fmt_ratio(rr)]
            if rr is not None:
                worst.append((rr, f"{lab} ({'unbatched' if batch == 1 else 'batch 100'}, "
                                  f"{fmt(rv)} vs {fmt(fv)} usec/msg for {floor_lab})"))
        rv = e2e["batch100_win"].med(("rmq", "rmq." + what))
        win = e2e["batch100_win"]
        za, zp, zr = win.med(("zset", "zadd")), win.med(("zset", "zpopmax")), win.med(("zset", "zrem"))
        # The bare run's ZADD time covers ZADD q and ZADD prepare (equal batches): split evenly.
        fv = {"push": None if za is None else za / 2,
              "pop": None if za is None or zp is None else zp + za / 2,
              "ack": zr}[what]
        cells += [fmt(rv), fmt(fv), fmt_ratio(ratio(rv, fv))]
        out.append(f"| {lab} vs {floor_lab} | " + " | ".join(cells) + " |")
    worst.sort(reverse=True)
    out.append("")
    out.append("The e2e floor splits the bare run's ZADD time evenly between ZADD q and ZADD prepare.")
    out.append("")
    if worst:
        out.append(f"Most expensive relative to its floor in the phase runs: **{worst[0][1]}, {worst[0][0]:.2f}×**.")
    e2e_worst = []
    for what, lab in (("push", "RMQ.PUSH"), ("pop", "RMQ.POP"), ("ack", "RMQ.ACK")):
        rv = e2e["batch100_win"].med(("rmq", "rmq." + what))
        if rv is not None:
            e2e_worst.append((rv, lab))
    tot = sum(v for v, _ in e2e_worst)
    if e2e_worst and tot:
        e2e_worst.sort(reverse=True)
        out.append(f"In the end-to-end steady state (batch 100) {e2e_worst[0][1]} takes "
                   f"{e2e_worst[0][0] / tot * 100:.0f}% of RMQ's command time ({fmt(e2e_worst[0][0])} of "
                   f"{fmt(tot)} usec per message).")
    out.append("")

    # Load.
    out.append("### Other load on the machine during the run\n")
    out.append("Average share of a core taken by processes other than this run's server, driver "
               "and script (busy time per core in /proc/stat minus ours; the server runs only on "
               f"core {SERVER_CORE}, the script and driver only on core {LOAD_CORE}), and by the "
               "hypervisor (steal: the VM's vCPU not running). Other work shares both cores: absolute "
               "figures move with it, ratios measured side by side in the same rounds less so.\n")
    out.append(f"| section | other processes on core {SERVER_CORE} (server's) | on core {LOAD_CORE} (load's) | "
               f"hypervisor steal, core {SERVER_CORE} / {LOAD_CORE} | wall time | speed probe on core {SERVER_CORE}, ms: "
               "min / median / max |")
    out.append("|---|---|---|---|---|---|")
    allp = [x for v in PROBES.values() for x in v]
    for name, (q, wall) in loads.items():
        pr = allp if name == "whole run" else PROBES.get(name, [])
        ps = f"{min(pr):.0f} / {median(pr):.0f} / {max(pr):.0f}" if pr else "—"
        out.append(f"| {name} | {q['others0']:.2f} | {q['others1']:.2f} | {q['steal0']:.2f} / {q['steal1']:.2f} | "
                   f"{wall:.0f} s | {ps} |")
    out.append("")
    kd = RETRIES.kept
    out.append(f"Measuring driver runs: {RETRIES.runs}; re-run because other processes or steal took more "
               f"than {Retries.DISTURBED * 100:.0f}% of a core during them: {RETRIES.retried} "
               f"({RETRIES.spent:.0f} s of the {RETRIES.budget_s:.0f} s retry budget); kept although still "
               f"disturbed (retries or budget used up): {RETRIES.kept_disturbed}"
               + (f"; disturbance of the kept runs: median {median(kd) * 100:.0f}%, max {max(kd) * 100:.0f}% of a core"
                  if kd else "") + ".")
    out.append("")
    out.append(f"The speed probe times the same CPU-bound loop on core {SERVER_CORE} at the start of every "
               "round; when its max is well above its min, the machine itself ran slower in some rounds "
               "(work outside this VM's view, or in it), and absolute figures from those rounds are "
               "lower; ratios are medians of per-round ratios.")
    out.append("")
    tb = ", ".join(f"{comm} (pid {pid}) {d * 100:.0f}%" for d, pid, comm in m["top_before"]) or "none above 2%"
    out.append(f"Before the start: {m['others_before']:.2f} cores taken (other processes + steal); top processes over 1 s: {tb}; "
               f"load average {' '.join(m['loadavg'])}.")
    out.append("")
    out.append(f"Medians and ratios use only the rounds whose runs were undisturbed (≤ {Retries.DISTURBED * 100:.0f}% "
               f"of a core taken) when at least {Fig.MIN_CLEAN} such rounds exist; `*` after a figure: "
               f"fewer did, so disturbed rounds are in it ({len(set(notes_dirty))} figures in this run). "
               f"`~`: the rounds used spread more than {NOISY * 100:.0f}% of their median ((max − min) / median; "
               f"{len(set(notes_noisy))} figures); read both as noisy.")
    out.append("")

    # Per-round values of the key figures.
    out.append("### Per-round values of the key figures\n")
    out.append("| figure | peer | rounds |")
    out.append("|---|---|---|")
    keyfigs = [("lifecycle usec/msg, unbatched", cpu[(1, "life")]),
               ("lifecycle usec/msg, batch 100", cpu[(100, "life")]),
               ("process CPU usec/msg lifecycle, batch 100", cpu[(100, "cpu_life")]),
               ("e2e msgs/s, unbatched", e2e["unbatched"]),
               ("e2e msgs/s, batch 100", e2e["batch100"]),
               ("e2e msgs/s, batch 100, ≈800 in flight", e2e["batch100_deep"]),
               ("latency p50 usec", lat["p50_us"]),
               ("latency p99 usec", lat["p99_us"])]
    for lab, fig in keyfigs:
        for p in P:
            if fig.v.get(p):
                out.append(f"| {lab} | {NAMES[p]} | " + ", ".join(
                    fmt(x) + ("†" if d > Retries.DISTURBED else "") for x, d in zip(fig.v[p], fig.d[p])) + " |")
    for what, lab in (("push", "RMQ.PUSH"), ("pop", "RMQ.POP"), ("ack", "RMQ.ACK")):
        for sz in sizes:
            f = scale[(sz, what)]
            out.append(f"| scale {lab} usec/call, N = {sz:,} | RMQ | " +
                       ", ".join(fmt(x) + ("†" if d > Retries.DISTURBED else "")
                                 for x, d in zip(f.v.get("rmq", []), f.d.get("rmq", []))) + " |")
    out.append("")
    out.append(f"† a round whose run was disturbed (> {Retries.DISTURBED * 100:.0f}% of a core taken by other "
               "processes or steal, after the allowed re-runs).")
    out.append("")

    # Targets first.
    targets = ["### Targets\n", "| target | RMQ | result |", "|---|---|---|"]
    targets.append(f"| end to end, batch 100, ≥ {E2E_TARGET:,} msgs/s | {fmt(r100)} msgs/s | "
                   f"{'PASS' if e2e_ok else '**FAIL**'} |")
    targets.append(f"| memory per waiting message ≤ {MEM_WAITING_TARGET}× plain sorted set | {fmt_ratio(wr)} | "
                   f"{'PASS' if wr is not None and wr <= MEM_WAITING_TARGET else '**FAIL**'} |")
    targets.append(f"| memory per in-flight message ≤ {MEM_INFLIGHT_TARGET}× plain sorted set | {fmt_ratio(ir)} | "
                   f"{'PASS' if ir is not None and ir <= MEM_INFLIGHT_TARGET else '**FAIL**'} |")
    for what, lab in (("push", "RMQ.PUSH"), ("pop", "RMQ.POP"), ("ack", "RMQ.ACK")):
        rr = ratio(scale[(big, what)].med("rmq"), scale[(small, what)].med("rmq"))
        targets.append(f"| {lab} usec/call at {big:,} waiting ≤ {SCALE_TARGET}× at {small:,} | {fmt_ratio(rr)} | "
                       f"{'PASS' if lab not in scale_fail else '**FAIL**'} |")
    out = targets + [""] + out

    summary = {
        "e2e_ok": e2e_ok, "mem_waiting": wr, "mem_inflight": ir, "scale_fail": scale_fail,
        "worst": worst[:3],
    }
    return "\n".join(out), summary


def header_md(a, m, elapsed, commit):
    cmd = "make bench" + (f" BENCH_ARGS='{a.raw_args}'" if a.raw_args else "")
    return "\n".join([
        "# RMQ benchmark",
        "",
        f"Command: `{cmd}` (bench/bench.py; load driver bench/driver; Lua peer bench/lua). "
        f"Every figure is the median of {a.rounds} rounds; peers interleaved within each round.",
        "",
        *machine_rows(m),
        f"| module | {module_desc(commit)}; loaded a copy, sha256 {m.get('module_sha', '?')} |",
        f"| pinning | redis-server `taskset -c {SERVER_CORE}`, driver and script `taskset -c {LOAD_CORE}` |",
        f"| run time | {elapsed / 60:.1f} min |",
        "",
        "",
    ])


# ------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu-messages", type=int, default=50_000)
    ap.add_argument("--mem-messages", type=int, default=100_000)
    ap.add_argument("--e2e-secs", type=float, default=5.0)
    ap.add_argument("--e2e-warmup", type=float, default=1.0)
    ap.add_argument("--lat-secs", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=10_000)
    ap.add_argument("--scale-sizes", default="1000,1000000,10000000")
    ap.add_argument("--scale-cycles", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="small sizes and short runs (a smoke test; not for results)")
    a = parse_common(ap, 1200, 240, RESULTS)
    if a.quick:
        a.cpu_messages, a.mem_messages = 10_000, 20_000
        a.e2e_secs, a.e2e_warmup, a.lat_secs = 1.5, 0.5, 1.5
        a.scale_sizes, a.scale_cycles = "1000,100000", 50
    a.scale_sizes = [int(s) for s in a.scale_sizes.split(",")]
    if a.rounds < 1:
        raise SystemExit("--rounds must be >= 1")

    for p, what in ((MODULE, "module (cargo build --release)"), (DRIVER, "driver (make bench builds it)")):
        if not p.exists():
            raise SystemExit(f"bench: {what} missing: {p}")
    if shutil.which("taskset") is None:
        raise SystemExit("bench: taskset not found (util-linux)")
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("bench: needs at least 2 cores (server on core 0, load on core 1)")
    os.sched_setaffinity(0, {LOAD_CORE})

    def on_signal(signum, frame):
        SERVER.stop()
        os._exit(130)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    atexit.register(SERVER.cleanup)

    def watchdog():
        log(f"bench: still running after {a.budget:.0f} s (--budget); stopping the server and giving up")
        SERVER.stop()
        os._exit(1)

    wd = threading.Timer(a.budget, watchdog)
    wd.daemon = True
    wd.start()

    t_start = time.time()
    RETRIES.budget_s = a.retry_budget
    RETRIES.deadline = t_start + a.budget - 240   # keep the last minutes for the report
    log("bench: sampling other load for 1 s …")
    lm = LoadMeter()
    top = top_processes(1.0)
    m = machine_info(lm.others(), top)
    commit = git_commit()
    m["module_sha"] = SERVER.take_module()
    SERVER.start()
    log(f"bench: redis-server pid {SERVER.proc.pid} on 127.0.0.1:{SERVER.port} (core {SERVER_CORE}); "
        f"driver on core {LOAD_CORE}")

    from collections import defaultdict
    cpu, mem, e2e, lat, scale = (defaultdict(Fig) for _ in range(5))
    loads = {}

    def section(name, fn, *args):
        log(f"bench: {name} …")
        meter, t = LoadMeter(), time.time()
        fn(*args)
        loads[name] = (meter.read(), time.time() - t)
        q = loads[name][0]
        log(f"bench: {name} done in {time.time() - t:.0f} s (other processes: core {SERVER_CORE} "
            f"{q['others0']:.2f}, core {LOAD_CORE} {q['others1']:.2f}; steal {q['steal0']:.2f} / {q['steal1']:.2f})")

    try:
        section("server CPU per message", run_cpu, a.rounds, a.cpu_messages, cpu)
        section("memory", run_memory, a.rounds, a.mem_messages, mem)
        section("end to end", run_e2e, a.rounds, a.e2e_secs, a.e2e_warmup, e2e)
        section("latency", run_latency, a.rounds, a.lat_secs, a.e2e_warmup, a.rate, lat)
        section("scale", run_scale, a.rounds, a.scale_sizes, a.scale_cycles, scale)
        loads["whole run"] = (lm.read(), time.time() - t_start)
    finally:
        SERVER.stop()
    elapsed = time.time() - t_start

    body, summary = build_report(a, m, cpu, mem, e2e, lat, scale, loads, elapsed, commit)
    md = header_md(a, m, elapsed, commit) + body
    out = Path(a.out)
    harness.write_report(out, md)
    print(md)
    print(f"\nwrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")
    missed = []
    if not summary["e2e_ok"]:
        missed.append("end-to-end batch 100")
    if summary["mem_waiting"] is None or summary["mem_waiting"] > MEM_WAITING_TARGET:
        missed.append("memory waiting")
    if summary["mem_inflight"] is None or summary["mem_inflight"] > MEM_INFLIGHT_TARGET:
        missed.append("memory in flight")
    missed += [f"scale {c}" for c in summary["scale_fail"]]
    print("targets missed: " + (", ".join(missed) if missed else "none"))
    wd.cancel()
    return 1 if (a.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
