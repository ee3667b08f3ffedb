#!/usr/bin/env python3
"""What the delivery features cost -- message groups, topics (TPOP) and queue policies --
against plain ungrouped delivery and against v1 (the module before them), with peers side by
side in one run (make bench-delivery-features; `make bench-v2` is its old name).

Uses bench/harness: the server start/stop by pid, pinning (redis-server on core 0 with
`taskset -c 0`, this script and the load driver bench/driver on core 1), the driver runner
with bounded re-runs of disturbed runs (harness.pinned), medians over interleaved rounds
(harness.figures.Fig), the load meter and the speed probe. Two servers run side by side: one
with the module of this work tree (v2) and one with the v1 module (commit bf45ec8, built by
scripts/build-v1 into target/v1/librmq.so) for the before/after figures; only one of them
is ever under load. Both are stopped by their pids at the end.

Figures (the median of --rounds rounds; the peers of a figure interleaved within a round,
and ratios the median of per-round ratios):

 1. Held-back backlog (issue 10). Queue `bk`: one message of group `busy` in flight, 100,000
    more of `busy` waiting (held back, PRIORITY 10), and --cycles ungrouped messages `x:i` at
    PRIORITY 1 (below the backlog, so a POP that walked the held-back messages would pay for
    it). Queue `nb`: the same without the 100,000. Phases of --cycles single commands (100
    per round trip, CONFIG RESETSTAT before each): RMQ.POP (each gives an x), RMQ.ACK x:i,
    RMQ.PUSH x:i back, RMQ.PUSH … GROUP busy new:i (held back), RMQ.CANCEL new:i. Server
    usec per call from INFO commandstats. Target: bk/nb ≤ 1.5× for POP and grouped PUSH.
 2. Group throughput (issue 10): 10,000 groups × 10 messages (driver `gfill`), drained by 16
    consumer connections (driver `drain`: each loops {ack what it popped last; pop COUNT
    100}, one round trip), grouped vs the same messages ungrouped, in both push orders (a
    group's 10 messages adjacent in the queue's order, or interleaved across groups);
    Streams (XREADGROUP COUNT 100; XACK + XDEL) and bare sorted sets (ZPOPMAX 100 + ZADD
    prepare; ZREM prepare) on the same messages. msgs/s and server usec per message
    (commandstats). Target: grouped ≥ 0.6× ungrouped (issue 21; issue 10 asked 0.8×).
 3. v1 vs v2 on ungrouped traffic: bench.py's `cpu` phases (push N, pop N, ack N; 1 message
    per command and batches of 100) on the v1 server and on the v2 server, alternately.
    Target: v2 keeps v1's figures (v2/v1 ≤ 1.0×; ≤ 1.05× passes, a noise band).
 4. TPOP on a topic of 1024 slots with one non-empty queue (the 1023 others were pushed to
    and drained before): phases as in 1 with RMQ.TPOP t 1024 or RMQ.POP on that queue.
    Target: usec per TPOP ≤ 1.1× per POP (issue 21).
 5. TPOP on a topic of 64 slots, all non-empty, COUNT 100, drained as in 2 (acks go to each
    message's queue) vs POP COUNT 100 on one queue with the same messages. Targets: msgs/s
    ≥ 0.9×, and usec per message of the pop command (POP/TPOP) ≥ 0.9×.
 6. Policy (issue 12): the phases of 3 on a queue with RMQ.POLICY retries 5 backoff-ms 1000
    lease-ms 30000 vs none (target ≤ 1.05× per push/pop/ack), and, reported apart, a rate
    limit that never bites (rate 10^9 per 1000 ms; the bucket warmed: one POP, then 200 ms,
    before measuring).
 7. POP past a group just turned busy (issue 21): --stall messages of group G pushed while G
    is idle, one POP (G busy), a message o1 of another group, then POP COUNT 10 (must answer
    o1, then 100 more such POPs, each past the same backlog): usec per POP (commandstats)
    against the same with a 200-message backlog, and the worst
    PING latency seen by a probe connection from the POP that makes G busy on; then the same
    backlog written as an older version left it (all in `Q`, G busy): a blocked POP COUNT 10
    is answered o1 once the backlog is set aside in bounded steps, with the PING probe's
    worst latency meanwhile. Target: the POP's usec does not grow with the backlog (≤ 1.5×).

Then (unless --no-callgrind) all of it once more on two servers run under valgrind
--tool=callgrind, smaller, counting the instructions the server ran per call or message
(callgrind_control -z before a phase, -d after): figures that repeat exactly whatever else
the machine does, with the same targets.

Prints a table and writes bench/results/bench_delivery_features.md. Bounded: each driver run has a
timeout and the whole run a watchdog (--budget). Misses are reported (MISS), never hidden;
exit status 1 on an error, or on a miss with --strict.

Environment: as bench.py (RMQ_MODULE, REDIS_SERVER, RMQ_BENCH_DRIVER) plus RMQ_MODULE_V1
(default target/v1/librmq.so).
"""

import argparse
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import harness
from harness import median, pinned, resp
from harness.figures import NOISY, Fig, fmt, fmt_ratio, ratio
from harness.phases import Instr, Usec, cmdstats, instr_phases, per_call, pipelined
from harness.pinned import LoadMeter, Retries, log, speed_probe

REPO = pinned.REPO
MODULE_V1 = Path(os.environ.get("RMQ_MODULE_V1", REPO / "target" / "v1" / "librmq.so")).resolve()
RESULTS = harness.RESULTS / "bench_delivery_features.md"

# Targets (issues 10, 11, 12, 21).
T_BACKLOG = 1.5        # usec per POP (and grouped PUSH) with the backlog / without
T_GROUPED = 0.6        # grouped msgs/s / ungrouped msgs/s (at least; issue 21)
T_V1 = 1.0             # v2 usec / v1 usec (at most); within T_V1_NOISE reported as kept
T_V1_NOISE = 1.05
T_TPOP_ONE = 1.1       # usec per TPOP (1024 slots, one busy) / per POP on that queue (issue 21)
T_TPOP_BATCH = 0.6     # TPOP COUNT 100 throughput / POP COUNT 100, QUANTUM 1 (at least; issue 21)
T_TPOP_QUANTUM = 0.9   # the same with QUANTUM 100 (issue 21)
T_POLICY = 1.05        # usec per message with a policy / without
T_STALL = 1.5          # usec of the POP past a 200k backlog just turned busy / past 200

POLICY = "retries 5 backoff-ms 1000 lease-ms 30000"
RATE = "rate 1000000000 rate-window-ms 1000"
LONG_LEASE = 3_600_000


# ------------------------------------------------------------------------------------------
# Servers: harness.pinned's Server, the one under load being pinned.SERVER (its driver runner and
# load meter read that global).

V2 = pinned.SERVER
V1 = pinned.Server()


@contextmanager
def on(server):
    """Runs the driver and the load meter (harness.pinned) against `server`."""
    prev = pinned.SERVER
    pinned.SERVER = server
    try:
        yield server
    finally:
        pinned.SERVER = prev


def client(server=None):
    return (server or pinned.SERVER).client()


def tpop_batch_targets(T, tb, a, issue, tpop, target, quantum="", tail=""):
    """Section 5's targets for the TPOP peer `tpop` against POP: drain msgs/s TPOP / POP,
    and the pop command's usec per message POP / TPOP (the median of the per-round ratios;
    None when the rounds do not pair up). Returns both ratios."""
    rt = tb["msgs_per_s"].ratio(tpop, "pop")
    T.at_least(issue, f"drain msgs/s, TPOP COUNT {a.count}{quantum} over {a.batch_slots} busy queues / "
               f"POP COUNT {a.count}{tail}", rt, target)
    t, p = tb["cmd"].v.get((tpop, "rmq.tpop"), []), tb["cmd"].v.get(("pop", "rmq.pop"), [])
    ru = median([y / x for x, y in zip(t, p) if x]) if len(t) == len(p) else None
    T.at_least(issue, f"server usec/msg: POP COUNT {a.count} / TPOP COUNT {a.count}{quantum} (TPOP command only)",
               ru, target)
    return rt, ru


def record(figs, key, who, ph):
    """Adds a phase's (value, disturbance, extras) to figs[key] and figs[key:extra]."""
    v, dist, extra = ph
    figs[key].add(who, v, dist)
    for k, x in extra.items():
        ck = (*key[:-1], f"{key[-1]}:{k}") if isinstance(key, tuple) else f"{key}:{k}"
        figs[ck].add(who, x, dist)


def push_many(c, q, prio, msgs, group=None, batch=1000):
    def add(p, i):
        chunk = msgs[i * batch:(i + 1) * batch]
        p.execute_command("RMQ.PUSH", q, "PRIORITY", prio, *(["GROUP", group] if group else []), *chunk)
    pipelined(c, -(-len(msgs) // batch), add, per_rt=10)


# ------------------------------------------------------------------------------------------
# 1. Held-back backlog, and 4. TPOP on a topic with one non-empty queue: phases of k single
# commands of one kind (100 per round trip), measured apart: k pops of the k ungrouped
# messages x:i that wait above everything else but the held-back backlog, k acks, k pushes
# of them back.

def xs(k):
    return [f"x:{i:07}" for i in range(k)]


def run_single(c, n, cmd_for):
    """n commands cmd_for(i), pipelined; returns the replies."""
    return pipelined(c, n, lambda p, i: p.execute_command(*cmd_for(i)))


def pop_phases(c, q, k, pop_cmd, meter):
    """k single pops (pop_cmd, each must give an x), k RMQ.ACK, k RMQ.PUSH back at PRIORITY 1.
    Returns {pop, ack, push: (value per call, disturbance)}."""
    names = xs(k)
    got = []

    def pops():
        got.extend(run_single(c, k, lambda i: pop_cmd))

    out = {"pop": meter.phase(c, pop_cmd[0].lower(), k, pops)}
    popped = sorted(next(v for v in e if isinstance(v, bytes) and v.startswith(b"x:")).decode()
                    for r in got for e in (r or []))
    if popped != names:
        raise RuntimeError(f"{' '.join(map(str, pop_cmd))}: {len(popped)} of the {k} x messages popped "
                           f"(first replies {got[:3]!r})")
    out["ack"] = meter.phase(c, "rmq.ack", k, lambda: run_single(c, k, lambda i: ("RMQ.ACK", q, names[i])))
    out["push"] = meter.phase(c, "rmq.push", k,
                              lambda: run_single(c, k, lambda i: ("RMQ.PUSH", q, "PRIORITY", 1, names[i])))
    return out


def backlog_setup(c, q, size, k):
    c.execute_command("RMQ.PUSH", q, "PRIORITY", 10, "GROUP", "busy", "busy:in-flight")
    got = c.execute_command("RMQ.POP", q, "LEASE", LONG_LEASE)
    assert got and got[0][0] == b"busy:in-flight", got
    push_many(c, q, 10, [f"held:{i:08}" for i in range(size)], group="busy")
    push_many(c, q, 1, xs(k))
    info = c.execute_command("RMQ.INFO", q)
    if isinstance(info, list):
        info = dict(zip(info[::2], info[1::2]))
    log(f"  backlog: {q} waiting {info.get(b'waiting')}, in flight {info.get(b'inflight')}")


def run_backlog(rounds, backlog, k, figs, meter):
    c = client()
    c.flushall()
    for q, size in (("bk", backlog), ("nb", 0)):
        backlog_setup(c, q, size, k)
    for r in range(rounds):
        speed_probe("held-back backlog")
        for q in (("bk", "nb") if r % 2 == 0 else ("nb", "bk")):
            gw0 = c.info("rmq").get("rmq_group_waits", 0)
            res = pop_phases(c, q, k, ("RMQ.POP", q), meter)
            gw = c.info("rmq").get("rmq_group_waits", 0) - gw0
            news = [f"new:{r}:{i:07}" for i in range(k)]
            res["grouped_push"] = meter.phase(c, "rmq.push", k, lambda: run_single(
                c, k, lambda i: ("RMQ.PUSH", q, "PRIORITY", 10, "GROUP", "busy", news[i])))
            res["cancel"] = meter.phase(c, "rmq.cancel", k, lambda: run_single(c, k, lambda i: ("RMQ.CANCEL", q, news[i])))
            for key, ph in res.items():
                record(figs, key, q, ph)
            figs["group_waits_per_pop"].add(q, gw / k)
            log(f"  backlog round {r + 1} {q}: POP {res['pop'][0]:.2f}, grouped PUSH {res['grouped_push'][0]:.2f} "
                f"{meter.unit} per call (group_waits/POP {gw / k:.2f})")
    c.flushall()


def run_tpop_one(rounds, slots, k, figs, meter):
    c = client()
    c.flushall()
    topic, busy = "t", 569 % slots
    q = f"{topic}_{busy}"
    # Every queue of the topic used once and drained (so the module has seen them), then one
    # queue with 1,000 messages at PRIORITY 0 below the k x messages.
    run_single(c, slots, lambda i: ("RMQ.PUSH", f"{topic}_{i}", "PRIORITY", 1, "once"))
    run_single(c, slots, lambda i: ("RMQ.POP", f"{topic}_{i}"))
    run_single(c, slots, lambda i: ("RMQ.ACK", f"{topic}_{i}", "once"))
    left = c.dbsize()
    if left:
        raise RuntimeError(f"tpop: {left} keys left after draining the topic")
    push_many(c, q, 0, [f"low:{i:05}" for i in range(1000)])
    push_many(c, q, 1, xs(k))
    # A topic's first TPOP makes the caller's ACL verdict over all its queue keys, once: one
    # call (its message acked and pushed back) before the rounds, so they measure a TPOP
    # loop's steady state, as the callgrind pass's 2,000 calls would not otherwise.
    [[_, m, _]] = c.execute_command("RMQ.TPOP", topic, slots)
    c.execute_command("RMQ.ACK", q, m)
    c.execute_command("RMQ.PUSH", q, "PRIORITY", 1, m)
    for r in range(rounds):
        speed_probe("TPOP, one non-empty queue")
        order = [("tpop", ("RMQ.TPOP", topic, slots)), ("pop", ("RMQ.POP", q))]
        for name, cmd in (order if r % 2 == 0 else order[::-1]):
            res = pop_phases(c, q, k, cmd, meter)
            record(figs, "call", name, res["pop"])
            record(figs, "ack", name, res["ack"])
        log(f"  tpop-one round {r + 1}: TPOP {figs['call'].v['tpop'][-1]:.2f}, "
            f"POP {figs['call'].v['pop'][-1]:.2f} {meter.unit} per call")
    c.flushall()


# ------------------------------------------------------------------------------------------
# 7. POP past a group just turned busy (issue 21), with a PING probe.

PROBE = """
import select, sys, time, redis
c = redis.Redis(port=int(sys.argv[1]))
lat = []
while not select.select([sys.stdin], [], [], 0)[0]:
    t = time.perf_counter()
    c.ping()
    lat.append((time.perf_counter() - t) * 1000)
    time.sleep(0.001)
lat.sort()
print(lat[-1] if lat else 0.0, lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else 0.0)
"""


class PingProbe:
    """PINGs the server back to back from its own process (no GIL shared with the load)
    until stopped: the worst and the 99th-percentile latency (ms) meanwhile."""

    def __init__(self, server):
        self.p = subprocess.Popen([sys.executable, "-c", PROBE, str(server.port)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.result = None
        time.sleep(0.3)  # connected and pinging

    def stop(self):
        """(worst, p99) in ms; once stopped, the same figures again."""
        if self.result is None:
            out, _ = self.p.communicate("stop\n", timeout=60)
            mx, p99 = out.split()
            self.result = float(mx), float(p99)
        return self.result

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.stop()
        else:
            self.p.kill()
            self.p.wait()

    @property
    def worst(self):
        return self.stop()[0]


def run_stall(rounds, size, figs):
    c = client()
    for r in range(rounds):
        c.flushall()
        for q, n in (("small", 200), ("big", size)):
            for i in range(0, n, 10_000):
                c.execute_command("RMQ.PUSH", q, "DELAY", 0, "GROUP", "G",
                                  *(f"m{j}" for j in range(i, min(n, i + 10_000))))
            # The probe runs from the POP that makes G busy to the POP past it (with 50 ms
            # around them, so it has samples).
            with PingProbe(pinned.SERVER) as probe:
                time.sleep(0.05)
                assert c.execute_command("RMQ.POP", q, "LEASE", LONG_LEASE) == [[b"m0", 1]]
                c.execute_command("RMQ.PUSH", q, "DELAY", 0, "GROUP", "other", "o1")
                c.config_resetstat()
                got = c.execute_command("RMQ.POP", q, "COUNT", 10)
                # One call's usec is too coarse: 100 more, each past the same backlog.
                for k in range(2, 102):
                    c.execute_command("RMQ.PUSH", q, "DELAY", 0, "GROUP", f"other{k}", f"o{k}")
                    if c.execute_command("RMQ.POP", q, "COUNT", 10) != [[f"o{k}".encode(), 1]]:
                        raise RuntimeError(f"stall: POP COUNT 10 on {q} did not give o{k}")
                    c.execute_command("RMQ.ACK", q, f"o{k}")
                usec = per_call(cmdstats(c), "rmq.pop")
                time.sleep(0.05)
            if got != [[b"o1", 1]]:
                raise RuntimeError(f"stall: POP COUNT 10 on {q} gave {got!r}, not o1")
            figs["pop_usec"].add(q, usec)
            figs["ping_ms"].add(q, probe.worst)
        # The same backlog as an older version left it: in `Q`, G busy.
        c.flushall()
        pipelined(c, size // 1000, lambda p, i: p.zadd("old", {f"v{j}": 1000 + j for j in range(i * 1000, i * 1000 + 1000)}))
        pipelined(c, size // 1000, lambda p, i: p.hset("meta{old}", mapping={f"wv{j}": "0::G" for j in range(i * 1000, i * 1000 + 1000)}))
        c.hset("meta{old}", "kind", "fixed")
        assert c.execute_command("RMQ.POP", "old", "LEASE", LONG_LEASE) == [[b"v0", 1]]
        c.execute_command("RMQ.PUSH", "old", "DELAY", 0, "GROUP", "other", "o1")
        with PingProbe(pinned.SERVER) as probe:
            t0 = time.perf_counter()
            got = client().execute_command("RMQ.POP", "old", "COUNT", 10, "BLOCK", 60_000)
            took = time.perf_counter() - t0
        if got != [[b"o1", 1]]:
            raise RuntimeError(f"stall: blocked POP on the old backlog gave {got!r}, not o1")
        figs["old_s"].add("old", took)
        figs["ping_ms"].add("old", probe.worst)
        log(f"  stall round {r + 1}: POP past {size:,} {figs['pop_usec'].v['big'][-1]:.1f} usec, past 200 "
            f"{figs['pop_usec'].v['small'][-1]:.1f} usec; old data: o1 after {took:.2f} s; worst PING "
            f"{figs['ping_ms'].v['big'][-1]:.2f} / {figs['ping_ms'].v['old'][-1]:.2f} ms")
    c.flushall()


def stall_report(a, figs, T):
    f, p = figs["pop_usec"], figs["ping_ms"]
    r, ok = ratio_at_most(f, "big", "small", T_STALL)
    T.add(21, f"usec of POP COUNT 10 past a {a.stall:,}-message group just turned busy / past 200", fmt_ratio(r),
          f"≤ {T_STALL}×", ok)
    return [
        f"### 8. POP past a group just turned busy (issue 21; {a.stall:,} messages, PING probe back to back from its own process)\n",
        f"`RMQ.PUSH q DELAY 0 GROUP G` × {a.stall:,} while G is idle; `RMQ.POP q` (G busy); `RMQ.PUSH q DELAY 0 "
        "GROUP other o1`; `RMQ.POP q COUNT 10` (answers o1), then 100 more {push o<k> in its own group; "
        "POP COUNT 10 (answers it); ACK}, G still busy: usec per POP from INFO commandstats over the 101. "
        "Small: the same with 200 messages. Old data: the backlog written by hand as an older version left it (all in `Q`, G busy), "
        "then a blocked `RMQ.POP old COUNT 10 BLOCK 60000`, answered o1 once the backlog is set aside (at most "
        "256 per step). Worst PING: the probe's longest round trip from the POP that makes G busy to the "
        "POP past it (50 ms before and after included), or through the blocked POP.\n",
        "| run | POP usec | worst PING ms | o1 after (s) |",
        "|---|---|---|---|",
        f"| {a.stall:,} held back | {cell(f, 'big')} | {cell(p, 'big')} | |",
        f"| 200 held back | {cell(f, 'small')} | {cell(p, 'small')} | |",
        f"| {a.stall:,} in `Q` (older version's data), blocked POP | | {cell(p, 'old')} | "
        f"{fmt(figs['old_s'].med('old'))} |",
        "",
        f"Ratio {a.stall:,} / 200: {fmt_ratio(r)} (target ≤ {T_STALL}×: {'PASS' if ok else '**MISS**'}).",
        "",
    ]


# ------------------------------------------------------------------------------------------
# 2. and 5.: drain a filled queue (or topic) with the driver.

def drain_run(name, fill, drain, figs, n, timeout, meter):
    """FLUSHALL; driver gfill (fill opts); driver drain (drain opts); records figures under name.
    A disturbed drain is re-run (pinned.driver's rule) after a new FLUSHALL and fill."""
    fills = []

    def setup():
        client().flushall()
        fills.append(pinned.driver("gfill", timeout, quality=False, **fill))

    if isinstance(meter, Instr):
        setup()
        j, instr = meter.around(lambda: pinned.driver("drain", timeout, quality=False, messages=n, **drain))
        figs["instr_per_msg"].add(name, instr["total"] / max(j["acked"], 1))
        figs["instr_per_msg:cmd"].add(name, instr["cmd"] / max(j["acked"], 1))
    else:
        j = pinned.driver("drain", timeout, setup=setup, messages=n, **drain)
    f = fills[-1]
    if j["dbsize_after"] != 0 and drain["peer"] in ("rmq", "tpop"):
        raise RuntimeError(f"drain {name}: {j['dbsize_after']} keys left after draining")
    d = j["_dist"]
    figs["msgs_per_s"].add(name, j["msgs_per_s"], d)
    figs["usec_per_msg"].add(name, j["usec_per_msg"], d)
    figs["cpu_per_msg"].add(name, j["server_cpu_us_per_msg"], d)
    figs["group_waits_per_msg"].add(name, j["group_waits"] / max(j["acked"], 1), d)
    for cmd, (calls, usec) in j["window"].items():
        figs["cmd"].add((name, cmd), usec / max(j["acked"], 1), d)
        figs["per_call"].add((name, cmd), usec / max(calls, 1), d)
        figs["calls_per_100"].add((name, cmd), 100 * calls / max(j["acked"], 1), d)
    log(f"  {name:28} {j['msgs_per_s']:>9,.0f} msgs/s  {j['usec_per_msg']:5.2f} usec/msg "
        + (f"{figs['instr_per_msg'].v[name][-1]:,.0f} instr/msg " if isinstance(meter, Instr) else "")
        + f"(fill {f['secs']:.1f} s, group_waits/msg {j['group_waits'] / max(j['acked'], 1):.2f}, "
        f"consumers took {j['per_consumer_min']}..{j['per_consumer_max']})")


GROUP_CONFIGS = [
    # name, peer, grouped, order
    ("grouped, adjacent", "rmq", 1, "adjacent"),
    ("ungrouped, adjacent", "rmq", 0, "adjacent"),
    ("grouped, interleaved", "rmq", 1, "interleaved"),
    ("ungrouped, interleaved", "rmq", 0, "interleaved"),
    ("Streams", "streams", 0, "adjacent"),
    ("bare zset", "zset", 0, "adjacent"),
]


def run_groups(rounds, groups, per_group, consumers, count, figs, meter):
    n = groups * per_group
    for r in range(rounds):
        speed_probe("group throughput")
        cfgs = GROUP_CONFIGS if r % 2 == 0 else GROUP_CONFIGS[::-1]
        for name, peer, grouped, order in cfgs:
            drain_run(name, dict(peer=peer, queue="q", groups=groups, per_group=per_group, grouped=grouped, order=order),
                      dict(peer=peer, queue="q", consumers=consumers, count=count), figs, n, 600, meter)


def run_tpop_batch(rounds, slots, messages, consumers, count, figs, meter):
    fill = dict(groups=messages // 10, per_group=10, grouped=0, order="adjacent")
    for r in range(rounds):
        speed_probe("TPOP, all queues busy")
        cfgs = [("tpop", dict(peer="tpop", queue="t", slots=slots)), ("pop", dict(peer="rmq", queue="q")),
                ("tpop q100", dict(peer="tpop", queue="t", slots=slots, quantum=100))]
        for name, who in (cfgs if r % 2 == 0 else cfgs[::-1]):
            drain_run(name, dict(fill, **who), dict(who, consumers=consumers, count=count), figs,
                      fill["groups"] * 10, 600, meter)


# ------------------------------------------------------------------------------------------
# 3. and 6.: bench.py's cpu phases on v1, v2, v2 with a policy, v2 with a rate limit.

CPU_CONFIGS = [
    # name, module, extra driver options
    ("v1", "v1", {}),
    ("v2", "v2", {}),
    ("v2 + policy", "v2", {"policy": POLICY}),
    ("v2 + rate limit", "v2", {"policy": RATE, "warm_ms": 200}),
]


def run_cpu(rounds, n, figs, servers):
    """servers: "v1"/"v2" -> (server, its meter). With Usec, the driver's `cpu` mode (bench.py's
    phases); with Instr, the same phases sent by instr_phases."""
    for r in range(rounds):
        speed_probe("v1 vs v2, policy")
        for batch in (1, 100):
            cfgs = CPU_CONFIGS if r % 2 == 0 else CPU_CONFIGS[::-1]
            for name, module, extra in cfgs:
                server, meter = servers[module]
                if isinstance(meter, Instr):
                    res = instr_phases(client(server), n, batch, meter, extra.get("policy", ""), extra.get("warm_ms", 0))
                    for what, ph in res.items():
                        record(figs, (batch, "instr_" + what), name, ph)
                    record(figs, (batch, "instr"), name, (sum(ph[0] for ph in res.values()), 0.0,
                                                           {"cmd": sum(ph[2]["cmd"] for ph in res.values())}))
                    log(f"  cpu batch {batch:>3} {name:16} " + " ".join(
                        f"{k} {ph[0]:,.0f} ({ph[2]['cmd']:,.0f} in the command)" for k, ph in res.items()) + " instr/msg")
                    continue
                with on(server):
                    j = pinned.driver("cpu", 600, peer="rmq", batch=batch, messages=n, **extra)
                life = 0.0
                for what in ("push", "pop", "ack"):
                    us = j[what]["usec"] / n
                    figs[(batch, what)].add(name, us, j["_dist"])
                    figs[(batch, "cpu_" + what)].add(name, j[what]["cpu_us"] / n, j["_dist"])
                    life += us
                figs[(batch, "life")].add(name, life, j["_dist"])
                log(f"  cpu round {r + 1} batch {batch:>3} {name:16} push {j['push']['usec'] / n:5.2f} "
                    f"pop {j['pop']['usec'] / n:5.2f} ack {j['ack']['usec'] / n:5.2f} usec/msg")


# ------------------------------------------------------------------------------------------
# Report.

class Targets:
    def __init__(self):
        self.rows = []

    def add(self, issue, what, value, target, ok, cmd_note=""):
        self.rows.append((issue, what, value, target, "PASS" if ok else "**MISS**", cmd_note))

    def at_least(self, issue, what, r, target):
        """A ratio `r` that must be at least `target` (None, not measured: a miss)."""
        self.add(issue, what, fmt_ratio(r), f"≥ {target}×", r is not None and r >= target)

    def at_most(self, issue, what, r, target):
        self.add(issue, what, fmt_ratio(r), f"≤ {target}×", r is not None and r <= target)

    def missed(self):
        return [r for r in self.rows if r[4] != "PASS"]

    def md(self):
        out = ["### Targets\n", "| issue | figure | measured | target | result |", "|---|---|---|---|---|"]
        for issue, what, value, target, res, _ in self.rows:
            out.append(f"| {issue} | {what} | {value} | {target} | {res} |")
        return out


def cell(fig, key):
    v = fig.med(key)
    s = fmt(v)
    if v is not None and fig.noisy(key):
        s += " ~"
    if v is not None and not fig.all_clean(key):
        s += " *"
    return s


def ratio_at_most(fig, a, b, limit):
    r = fig.ratio(a, b)
    return r, r is not None and r <= limit


def build_report(a, bk, gr, cpu, t1, tb, cg, loads):
    T = Targets()
    out = []

    # 1. backlog
    r_pop, ok = ratio_at_most(bk["pop"], "bk", "nb", T_BACKLOG)
    T.add(10, "usec per RMQ.POP, 100k held back / none", fmt_ratio(r_pop), f"≤ {T_BACKLOG}×", ok)
    r_push, ok = ratio_at_most(bk["grouped_push"], "bk", "nb", T_BACKLOG)
    T.add(10, "usec per grouped RMQ.PUSH into the busy group, 100k held back / none", fmt_ratio(r_push),
          f"≤ {T_BACKLOG}×", ok)
    out.append(f"### 1. POP and PUSH cost with {a.backlog:,} messages held back (issue 10; usec per call, "
               "INFO commandstats)\n")
    out.append(f"Queue `bk`: one message of group `busy` in flight, {a.backlog:,} more of `busy` waiting "
               f"(PRIORITY 10), {a.cycles:,} ungrouped messages `x:i` at PRIORITY 1; `nb`: the same without the "
               f"{a.backlog:,}. Phases of {a.cycles:,} single commands each (100 per round trip, CONFIG RESETSTAT "
               "before each): RMQ.POP (each gives an x), RMQ.ACK x:i, RMQ.PUSH x:i back, RMQ.PUSH PRIORITY 10 "
               "GROUP busy new:i (held back), RMQ.CANCEL new:i; the two queues alternate per round.\n")
    out.append("| command | with backlog (bk) | without (nb) | bk / nb | target | result |")
    out.append("|---|---|---|---|---|---|")
    for key, lab, tgt in (("pop", "RMQ.POP of an ungrouped x", True), ("ack", "RMQ.ACK x", False),
                          ("push", "RMQ.PUSH x (ungrouped)", False),
                          ("grouped_push", "RMQ.PUSH GROUP busy (held back)", True),
                          ("cancel", "RMQ.CANCEL of that message", False)):
        f = bk[key]
        r = f.ratio("bk", "nb")
        res = ("PASS" if r is not None and r <= T_BACKLOG else "**MISS**") if tgt else ""
        out.append(f"| {lab} | {cell(f, 'bk')} | {cell(f, 'nb')} | {fmt_ratio(r)} | "
                   f"{f'≤ {T_BACKLOG}×' if tgt else ''} | {res} |")
    out.append("")
    out.append(f"INFO rmq group_waits per POP during the POP phase: bk {fmt(bk['group_waits_per_pop'].med('bk'))}, "
               f"nb {fmt(bk['group_waits_per_pop'].med('nb'))}.")
    out.append("")

    # 2. groups
    f = gr["msgs_per_s"]
    u = gr["usec_per_msg"]
    for order in ("adjacent", "interleaved"):
        r = f.ratio(f"grouped, {order}", f"ungrouped, {order}")
        T.at_least(21, f"drain msgs/s, 10k groups × 10, {order}: grouped / ungrouped", r, T_GROUPED)
        ru = u.ratio(f"ungrouped, {order}", f"grouped, {order}")
        T.at_least(21, f"server usec/msg, {order}: ungrouped / grouped (i.e. grouped costs 1/x)", ru, T_GROUPED)
    out.append(f"### 2. Draining {a.groups:,} groups × {a.per_group} messages (issue 10)\n")
    out.append(f"{a.groups * a.per_group:,} messages pushed first (driver `gfill`; adjacent: group j's "
               f"{a.per_group} messages at PRIORITY groups−j, one after another; interleaved: message k of "
               f"every group at PRIORITY {a.per_group}−k), then drained by {a.consumers} consumer connections "
               f"(driver `drain`), each looping {{ack what it popped last; pop COUNT {a.count}}} in one round trip. "
               "Ungrouped: the same messages and priorities without GROUP. Streams: XADD each, "
               f"XREADGROUP COUNT {a.count}, XACK + XDEL; bare zset: ZADD, ZPOPMAX {a.count} + ZADD prepare, "
               "ZREM prepare. usec/msg: INFO commandstats over the drain (pop + ack commands) ÷ messages; "
               "process CPU: INFO cpu of the server ÷ messages (includes network I/O).\n")
    out.append("| run | msgs/s | vs ungrouped (same order) | server usec/msg | pop cmd usec/msg | ack cmd usec/msg | "
               "process CPU usec/msg | group_waits/msg | pops per 100 msgs |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    popcmd = {"rmq": "rmq.pop", "streams": "xreadgroup", "zset": "zpopmax"}
    ackcmd = {"rmq": "rmq.ack", "streams": "xack", "zset": "zrem"}
    for name, peer, grouped, order in GROUP_CONFIGS:
        vs = fmt_ratio(f.ratio(name, f"ungrouped, {order}")) if peer == "rmq" and grouped else ""
        if peer != "rmq":
            vs = fmt_ratio(f.ratio(name, "ungrouped, adjacent")) + " (of RMQ ungrouped)"
        out.append(f"| {name} | {cell(f, name)} | {vs} | {cell(u, name)} | "
                   f"{fmt(gr['cmd'].med((name, popcmd[peer])))} | {fmt(gr['cmd'].med((name, ackcmd[peer])))} | "
                   f"{cell(gr['cpu_per_msg'], name)} | {fmt(gr['group_waits_per_msg'].med(name))} | "
                   f"{fmt(gr['calls_per_100'].med((name, popcmd[peer])))} |")
    out.append("")
    out.append("Streams' ack column is XACK only (XDEL "
               f"{fmt(gr['cmd'].med(('Streams', 'xdel')))} usec/msg more); bare zset's pop column is ZPOPMAX only "
               f"(ZADD prepare {fmt(gr['cmd'].med(('bare zset', 'zadd')))} usec/msg more).")
    out.append("")

    # 3. v1 vs v2, 6. policy
    out.append("### 3. and 6. Ungrouped push / pop / ack: v1 vs v2, and v2 with a policy (issues 10, 12)\n")
    out.append(f"bench.py's `cpu` phases: push {a.cpu_messages:,} messages, pop them all, ack them all (CONFIG "
               "RESETSTAT before each; unbatched = 1 message per command, 100 commands per round trip; batch "
               "100 = 100 messages per command, 10 per round trip); usec per message from INFO commandstats. "
               f"v1 = the module at commit {a.v1_commit} (before groups) on its own server, v2 = this tree's, "
               f"alternating per run. Policy: `RMQ.POLICY q SET {POLICY}`; rate limit: `RMQ.POLICY q SET {RATE}` "
               "(never bites; one POP on the empty queue and 200 ms before measuring, so the bucket, which "
               "starts with one token, has refilled).\n")
    out.append("| phase | v1 | v2 | v2 / v1 | result | v2 + policy | policy / v2 | result | v2 + rate limit | rate / v2 |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for batch, tag in ((1, "unbatched"), (100, "batch 100")):
        for what in ("push", "pop", "ack", "life"):
            fg = cpu[(batch, what)]
            rv = fg.ratio("v2", "v1")
            rp = fg.ratio("v2 + policy", "v2")
            rr = fg.ratio("v2 + rate limit", "v2")
            lab = f"{'**lifecycle**' if what == 'life' else what}, {tag}"
            v_ok = rv is not None and rv <= T_V1_NOISE
            p_ok = rp is not None and rp <= T_POLICY
            if what != "life":
                T.add(10, f"v2 / v1 usec per message, {what}, {tag}", fmt_ratio(rv),
                      f"≤ {T_V1}× (±5% noise)", v_ok)
                T.add(12, f"policy / none usec per message, {what}, {tag}", fmt_ratio(rp), f"≤ {T_POLICY}×", p_ok)
            out.append(f"| {lab} | {cell(fg, 'v1')} | {cell(fg, 'v2')} | {fmt_ratio(rv)} | "
                       f"{'PASS' if v_ok else '**MISS**'} | {cell(fg, 'v2 + policy')} | {fmt_ratio(rp)} | "
                       f"{'PASS' if p_ok else '**MISS**'} | {cell(fg, 'v2 + rate limit')} | {fmt_ratio(rr)} |")
    out.append("")
    out.append("Server process CPU per message lifecycle (INFO cpu; includes network I/O): " + "; ".join(
        f"{tag}: " + ", ".join(
            f"{name} {fmt(sum(cpu[(batch, 'cpu_' + w)].med(name) or 0 for w in ('push', 'pop', 'ack')))}"
            for name, _, _ in CPU_CONFIGS)
        for batch, tag in ((1, "unbatched"), (100, "batch 100"))) + " usec.")
    out.append("")

    # 4. TPOP one busy
    r1 = t1["call"].ratio("tpop", "pop")
    T.at_most(11, f"usec per RMQ.TPOP ({a.tpop_slots} slots, one non-empty) / RMQ.POP on that queue", r1,
              T_TPOP_ONE)
    out.append(f"### 4. TPOP on a topic of {a.tpop_slots} slots with one non-empty queue (issue 11)\n")
    out.append(f"Every queue of the topic pushed to once and drained first; then one queue with 1,000 messages "
               f"at PRIORITY 0 and {a.cycles:,} `x:i` at PRIORITY 1, and one TPOP (its message acked and pushed "
               "back: a topic's first TPOP makes the caller's ACL verdict over its queue keys, once). Phases as in 1: {a.cycles:,} single "
               f"RMQ.TPOP t {a.tpop_slots} (each gives an x) or RMQ.POP on that queue, then the acks and pushes "
               "back; TPOP and POP alternate per round; usec per call.\n")
    out.append("| RMQ.TPOP | RMQ.POP | TPOP / POP | target | result | RMQ.ACK after TPOP / after POP |")
    out.append("|---|---|---|---|---|---|")
    out.append(f"| {cell(t1['call'], 'tpop')} | {cell(t1['call'], 'pop')} | {fmt_ratio(r1)} | ≤ {T_TPOP_ONE}× | "
               f"{'PASS' if r1 is not None and r1 <= T_TPOP_ONE else '**MISS**'} | "
               f"{fmt(t1['ack'].med('tpop'))} / {fmt(t1['ack'].med('pop'))} |")
    out.append("")

    # 5. TPOP batch
    rt, ru = tpop_batch_targets(T, tb, a, 11, "tpop", T_TPOP_BATCH, tail=" on one")
    out.append(f"### 5. TPOP COUNT {a.count} on a topic of {a.batch_slots} slots, all non-empty (issue 11)\n")
    out.append(f"{a.tpop_messages:,} messages spread evenly over the {a.batch_slots} queues (or all in one queue), drained "
               f"as in 2 by {a.consumers} consumers, each looping {{acks; RMQ.TPOP t {a.batch_slots} COUNT {a.count} | "
               f"RMQ.POP q COUNT {a.count}}}; TPOP's acks go one RMQ.ACK per queue.\n")
    out.append("| run | msgs/s | server usec/msg (all) | pop command usec/msg | RMQ.ACK usec/msg | ACK calls per 100 msgs | "
               "pops per 100 msgs |")
    out.append("|---|---|---|---|---|---|---|")
    for name, popc in (("tpop", "rmq.tpop"), ("pop", "rmq.pop")):
        acks = tb["per_call"].med((name, "rmq.ack"))
        ackm = tb["cmd"].med((name, "rmq.ack"))
        calls_per_100 = 100 * ackm / acks if acks and ackm else None
        out.append(f"| {'RMQ.TPOP' if name == 'tpop' else 'RMQ.POP'} | {cell(tb['msgs_per_s'], name)} | "
                   f"{cell(tb['usec_per_msg'], name)} | {fmt(tb['cmd'].med((name, popc)))} | {fmt(ackm)} | "
                   f"{fmt(calls_per_100)} | {fmt(tb['calls_per_100'].med((name, popc)))} |")
    out.append("")
    out.append(f"TPOP / POP: msgs/s {fmt_ratio(rt)}; all commands usec/msg "
               f"{fmt_ratio(tb['usec_per_msg'].ratio('tpop', 'pop'))}; the pop command alone "
               f"{fmt_ratio(None if ru is None else 1 / ru)}.")
    out.append("")
    # 5b. the same with QUANTUM 100 (issue 21)
    rq, rqu = tpop_batch_targets(T, tb, a, 21, "tpop q100", T_TPOP_QUANTUM, quantum=" QUANTUM 100")
    out.append(f"With `QUANTUM 100` (each queue's turn takes up to 100, issue 21): msgs/s "
               f"{cell(tb['msgs_per_s'], 'tpop q100')}, pop command usec/msg "
               f"{fmt(tb['cmd'].med(('tpop q100', 'rmq.tpop')))}; TPOP QUANTUM 100 / POP: msgs/s {fmt_ratio(rq)}, "
               f"the pop command alone {fmt_ratio(None if rqu is None else 1 / rqu)}.")
    out.append("")

    if cg:
        out += callgrind_report(a, T, *cg)

    # Load
    out.append("### Other load on the machine during the run\n")
    out.append(f"Share of a core taken by other processes (on core {pinned.SERVER_CORE}, the server's; core "
               f"{pinned.LOAD_CORE}, the load's) and by the hypervisor (steal), per section; speed probe: a fixed "
               f"CPU loop on core {pinned.SERVER_CORE} at the start of every round (ms; max ≫ min: the machine "
               "itself ran slower in some rounds). `~` after a figure: its rounds spread more than "
               f"{NOISY * 100:.0f}% of the median; `*`: fewer than {Fig.MIN_CLEAN} undisturbed rounds "
               "(disturbed ones are in it).\n")
    out.append("| section | others, core 0 | others, core 1 | steal 0 / 1 | wall | speed probe min / median / max |")
    out.append("|---|---|---|---|---|---|")
    for name, (q, wall) in loads.items():
        pr = pinned.PROBES.get(name, [])
        ps = f"{min(pr):.0f} / {median(pr):.0f} / {max(pr):.0f}" if pr else "—"
        out.append(f"| {name} | {q['others0']:.2f} | {q['others1']:.2f} | {q['steal0']:.2f} / {q['steal1']:.2f} | "
                   f"{wall:.0f} s | {ps} |")
    R = pinned.RETRIES
    out.append("")
    out.append(f"Driver runs: {R.runs}; re-run because disturbed (> {Retries.DISTURBED * 100:.0f}% of a core): "
               f"{R.retried}; kept although disturbed: {R.kept_disturbed}.")
    out.append("")

    # Per-round values
    out.append("### Per-round values of the key figures\n")
    out.append("| figure | rounds |")
    out.append("|---|---|")

    def rounds_of(lab, fig, key):
        xs = fig.v.get(key, [])
        ds = fig.d.get(key, [])
        out.append(f"| {lab} | " + ", ".join(fmt(x) + ("†" if d > Retries.DISTURBED else "") for x, d in zip(xs, ds)) + " |")

    rounds_of("1. RMQ.POP usec, backlog", bk["pop"], "bk")
    rounds_of("1. RMQ.POP usec, no backlog", bk["pop"], "nb")
    rounds_of("1. grouped RMQ.PUSH usec, backlog", bk["grouped_push"], "bk")
    rounds_of("1. grouped RMQ.PUSH usec, no backlog", bk["grouped_push"], "nb")
    for name, *_ in GROUP_CONFIGS:
        rounds_of(f"2. msgs/s, {name}", gr["msgs_per_s"], name)
    for batch in (1, 100):
        for name, _, _ in CPU_CONFIGS:
            rounds_of(f"3/6. lifecycle usec/msg, batch {batch}, {name}", cpu[(batch, "life")], name)
    rounds_of("4. RMQ.TPOP usec", t1["call"], "tpop")
    rounds_of("4. RMQ.POP usec", t1["call"], "pop")
    rounds_of("5. msgs/s, TPOP", tb["msgs_per_s"], "tpop")
    rounds_of("5. msgs/s, POP", tb["msgs_per_s"], "pop")
    rounds_of("5. msgs/s, TPOP QUANTUM 100", tb["msgs_per_s"], "tpop q100")
    out.append("")
    out.append(f"† a round whose run was disturbed (> {Retries.DISTURBED * 100:.0f}% of a core taken by others).")
    return T.md() + [""] + out, T


def callgrind_report(a, T, bk, gr, cpu, t1, tb):
    """The same figures counted in instructions (one round: they repeat exactly)."""
    out = ["### Instructions per call or message (valgrind --tool=callgrind; repeatable whatever the machine does)\n",
           "The sections above run once more, each on a redis-server under callgrind (v1's too), with fewer "
           f"messages ({a.cg_cycles:,} single commands per phase in 1 and 4, {a.cg_groups:,} groups × "
           f"{a.per_group} in 2, {a.cg_groups * a.per_group:,} messages in 5, {a.cg_cpu_messages:,} in 3 and 6) and "
           f"the same {a.backlog:,} held back in 1. Counted between `callgrind_control -z` and `-d`: **command** = "
           "the inclusive instructions of redis-server's `call()`, which runs one command (what INFO "
           "commandstats times); **server** = every instruction the server ran (commands plus network I/O, "
           "parsing, replies, timers), whose ratios are closer to 1. Per call or per message. A target is "
           "judged on the command count, except the drains' (2 and 5: throughput), judged on the whole server; "
           "in the drains, empty pops by waiting consumers count too.\n",
           "| figure | command A | command B | A / B | server A | server B | A / B | target | result |",
           "|---|---|---|---|---|---|---|---|---|"]

    def row(issue, lab, figs, key, ka, kb, limit=None, at_least=False, target=True, judge="cmd"):
        tot, cmd = figs[key], figs[f"{key}:cmd" if isinstance(key, str) else (*key[:-1], f"{key[-1]}:cmd")]
        ta, tb_, ca, cb = tot.med(ka), tot.med(kb), cmd.med(ka), cmd.med(kb)
        rt, rc = ratio(ta, tb_), ratio(ca, cb)
        r = rc if judge == "cmd" else rt
        ok = (r is not None and (r >= limit if at_least else r <= limit)) if limit else None
        tgt = (f"{'≥' if at_least else '≤'} {limit}× ({'command' if judge == 'cmd' else 'server'})") if limit else ""
        res = "" if ok is None else ("PASS" if ok else "**MISS**")
        out.append(f"| {lab} | {fmt(ca)} | {fmt(cb)} | {fmt_ratio(rc)} | {fmt(ta)} | {fmt(tb_)} | {fmt_ratio(rt)} | "
                   f"{tgt} | {res} |")
        if target and ok is not None:
            T.add(issue, f"(callgrind) {lab}", fmt_ratio(r), tgt, ok)

    row(10, "RMQ.POP: 100k held back (A) / none (B)", bk, "pop", "bk", "nb", T_BACKLOG)
    row(10, "grouped RMQ.PUSH into the busy group: held back / none", bk, "grouped_push", "bk", "nb", T_BACKLOG)
    for key, lab in (("ack", "RMQ.ACK x"), ("push", "RMQ.PUSH x (ungrouped)"), ("cancel", "RMQ.CANCEL")):
        row(10, f"{lab}: held back / none", bk, key, "bk", "nb", target=False)
    for order in ("adjacent", "interleaved"):
        row(21, f"per message drained, {order}: ungrouped (A) / grouped (B)", gr, "instr_per_msg",
            f"ungrouped, {order}", f"grouped, {order}", T_GROUPED, at_least=True, judge="total")
    row(10, "per message drained: Streams (A) / RMQ ungrouped adjacent (B)", gr, "instr_per_msg", "Streams",
        "ungrouped, adjacent", target=False)
    row(10, "per message drained: bare zset (A) / RMQ ungrouped adjacent (B)", gr, "instr_per_msg", "bare zset",
        "ungrouped, adjacent", target=False)
    for batch, tag in ((1, "unbatched"), (100, "batch 100")):
        for what in ("push", "pop", "ack", ""):
            key = (batch, "instr_" + what if what else "instr")
            lab = f"per message, {what or 'lifecycle'}, {tag}"
            row(10, f"{lab}: v2 (A) / v1 (B)", cpu, key, "v2", "v1", T_V1_NOISE, target=bool(what))
            row(12, f"{lab}: policy (A) / none (B)", cpu, key, "v2 + policy", "v2", T_POLICY, target=bool(what))
            row(12, f"{lab}: rate limit (A) / none (B)", cpu, key, "v2 + rate limit", "v2", target=False)
    row(11, f"RMQ.TPOP ({a.tpop_slots} slots, one non-empty) / RMQ.POP", t1, "call", "tpop", "pop", T_TPOP_ONE)
    row(11, "RMQ.ACK after TPOP / after POP", t1, "ack", "tpop", "pop", target=False)
    row(11, f"per message drained: POP COUNT {a.count} (A) / TPOP COUNT {a.count} over {a.batch_slots} (B)",
        tb, "instr_per_msg", "pop", "tpop", T_TPOP_BATCH, at_least=True, judge="total")
    row(11, f"same, command only, judged as the TPOP target on usec: POP (A) / TPOP (B)", tb, "instr_per_msg",
        "pop", "tpop", T_TPOP_BATCH, at_least=True)
    row(21, f"per message drained: POP COUNT {a.count} (A) / TPOP COUNT {a.count} QUANTUM 100 (B)",
        tb, "instr_per_msg", "pop", "tpop q100", T_TPOP_QUANTUM, at_least=True, judge="total")
    row(21, "same, command only: POP (A) / TPOP QUANTUM 100 (B)", tb, "instr_per_msg", "pop", "tpop q100",
        T_TPOP_QUANTUM, at_least=True)
    out.append("")
    return out


def header(a, m, elapsed, commit):
    cmd = "make bench-delivery-features" + (f" BENCH_ARGS='{a.raw_args}'" if a.raw_args else "")
    return [
        "# What the delivery features cost: groups, topics, policies (v2)",
        "",
        f"Command: `{cmd}` (bench/bench_delivery_features.py, with bench/harness; load driver bench/driver). "
        f"Every figure is the median of {a.rounds} rounds, peers interleaved within each round; ratios are "
        "medians of per-round ratios. The machine is shared and noisy: read ratios, not absolute figures.",
        "",
        *pinned.machine_rows(m),
        f"| module (v2) | {pinned.module_desc(commit)}; loaded a copy, sha256 {m['module_sha']} |",
        f"| module (v1) | {MODULE_V1.relative_to(REPO) if MODULE_V1.is_relative_to(REPO) else MODULE_V1}, built from "
        f"commit {a.v1_commit} by scripts/build-v1; sha256 {m['v1_sha']} |",
        f"| pinning | both redis-servers `taskset -c {pinned.SERVER_CORE}` (one under load at a time), driver "
        f"and script `taskset -c {pinned.LOAD_CORE}` |",
        f"| run time | {elapsed / 60:.1f} min |",
        "",
        "",
    ]


def v1_commit():
    try:
        return (MODULE_V1.parent / "COMMIT").read_text().strip()[:7]
    except OSError:
        return "unknown (RMQ_MODULE_V1)"


# ------------------------------------------------------------------------------------------
# 7. Blocked TPOP (issue 21): what a blocked TPOP costs must not grow with `slots`.

BLOCK_SLOTS = (16384, 1)


def wait_blocked_clients(c, n, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if c.info("rmq").get("rmq_blocked_clients") == n:
            return True
        time.sleep(0.002)
    return False


def run_tpop_blocked(rounds, clients, figs):
    """On an empty topic: (a) RMQ.TPOP big <slots> BLOCK 10, 200 calls one after the other,
    server usec per call (commandstats: the call that blocks) and wall ms per call, against
    the same without BLOCK; (b) 20 workers looping on it (redis-benchmark -c 20 -n 400), PING latency meanwhile;
    (c) `clients` raw connections each sending RMQ.TPOP big <slots> BLOCK 0: seconds until all
    are blocked, used_memory held, seconds until all are released after the sockets close,
    and PING latency over (c). Each for 16,384 slots and for 1 (the peer: no slot cost)."""
    srv = pinned.SERVER
    c = client()
    for r in range(rounds):
        speed_probe("blocked TPOP")
        for slots in (BLOCK_SLOTS if r % 2 == 0 else BLOCK_SLOTS[::-1]):
            c.flushall()
            for blocking in (True, False):
                opts = ("BLOCK", 10) if blocking else ()
                c.config_resetstat()
                t = time.perf_counter()
                for _ in range(200):
                    c.execute_command("RMQ.TPOP", "big", slots, *opts)
                wall = (time.perf_counter() - t) * 1000 / 200
                usec = per_call(cmdstats(c), "rmq.tpop")
                figs["usec_block" if blocking else "usec_plain"].add(slots, usec)
                if blocking:
                    figs["wall_block"].add(slots, wall)
            probe = PingProbe(srv)
            # 20 workers looping on the blocking TPOP, from another process (redis-benchmark).
            subprocess.run(["taskset", "-c", str(pinned.LOAD_CORE), "redis-benchmark", "-p", str(srv.port), "-c", "20",
                            "-n", "400", "-q", "RMQ.TPOP", "big", str(slots), "BLOCK", "10"],
                           check=True, capture_output=True, timeout=300)
            mx, p99 = probe.stop()
            figs["ping_loop_max"].add(slots, mx)
            figs["ping_loop_p99"].add(slots, p99)
            mem0 = c.info("memory")["used_memory"]
            c.config_resetstat()
            probe = PingProbe(srv)
            t = time.perf_counter()
            socks = []
            for _ in range(clients):
                sk = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
                sk.sendall(resp("RMQ.TPOP", "big", slots, "BLOCK", 0))
                socks.append(sk)
            if not wait_blocked_clients(c, clients, 120):
                raise RuntimeError(f"blocked TPOP: {clients} clients did not all block")
            figs["register_s"].add(slots, time.perf_counter() - t)
            figs["usec_register"].add(slots, per_call(cmdstats(c), "rmq.tpop"))
            figs["memory_mb"].add(slots, (c.info("memory")["used_memory"] - mem0) / 1e6)
            t = time.perf_counter()
            for sk in socks:
                sk.close()
            if not wait_blocked_clients(c, 0, 120):
                raise RuntimeError("blocked TPOP: clients not released")
            figs["release_s"].add(slots, time.perf_counter() - t)
            mx, p99 = probe.stop()
            figs["ping_many_max"].add(slots, mx)
            figs["ping_many_p99"].add(slots, p99)
            log(f"  blocked TPOP, {slots} slots: {figs['usec_block'].v[slots][-1]:.1f} usec/call blocking, "
                f"{figs['usec_plain'].v[slots][-1]:.1f} without; {clients} clients registered in "
                f"{figs['register_s'].v[slots][-1]:.2f} s, {figs['memory_mb'].v[slots][-1]:.1f} MB, released in "
                f"{figs['release_s'].v[slots][-1]:.2f} s; PING max {figs['ping_many_max'].v[slots][-1]:.1f} ms")
    c.close()


def blocked_report(a, bl, T):
    """Section 7's table (issue 21)."""
    big, one = BLOCK_SLOTS
    out = [f"### 7. Blocked TPOP on an empty topic: {big:,} slots vs 1 (issue 21)\n",
           f"(a) 200 × `RMQ.TPOP big <slots> BLOCK 10` one after the other (each times out), server usec per call "
           "(commandstats: the call that blocks the client) and wall ms per call, vs the same without BLOCK; "
           f"(b) 20 workers looping on it (redis-benchmark -c 20 -n 400), PING latency meanwhile; (c) {a.blocked_clients:,} connections "
           "each blocked in `RMQ.TPOP big <slots> BLOCK 0`: seconds until all are blocked, memory they hold, seconds "
           "until all are released once their sockets close, PING latency over (c). Medians of the rounds.\n",
           "| slots | usec/call BLOCK 10 | usec/call no BLOCK | wall ms/call BLOCK 10 | PING max / p99 ms, (b) | "
           "register s | usec/call registering (c) | MB held | release s | PING max / p99 ms, (c) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for s in BLOCK_SLOTS:
        out.append(f"| {s:,} | {cell(bl['usec_block'], s)} | {cell(bl['usec_plain'], s)} | {cell(bl['wall_block'], s)} | "
                   f"{fmt(bl['ping_loop_max'].med(s))} / {fmt(bl['ping_loop_p99'].med(s))} | "
                   f"{cell(bl['register_s'], s)} | {cell(bl['usec_register'], s)} | {cell(bl['memory_mb'], s)} | "
                   f"{cell(bl['release_s'], s)} | "
                   f"{fmt(bl['ping_many_max'].med(s))} / {fmt(bl['ping_many_p99'].med(s))} |")
    out.append("")
    # Judged on the server's own time and memory; the wall times of (c) are the script's
    # socket work as much as the server's, on a shared machine.
    for key, what in (("usec_block", "server usec per blocking call (a)"),
                      ("usec_register", "server usec per call registering 1,000 clients (c)"),
                      ("memory_mb", "memory held by 1,000 blocked clients")):
        r = bl[key].ratio(big, one)
        # Memory and times this small are noise-bound: within 2× (or under 1 MB / 50 ms) they do not grow.
        small = {"memory_mb": 1.0}.get(key, 0)
        ok = r is not None and (r <= 2.0 or (bl[key].med(big) or 0) <= small)
        T.add(21, f"blocked TPOP {what}, {big:,} slots / 1 slot", fmt_ratio(r), "does not grow with slots (≤ 2×)", ok)
    return out


# ------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--backlog", type=int, default=100_000, help="held-back messages of the busy group (1)")
    ap.add_argument("--cycles", type=int, default=10_000, help="pop/ack/push cycles per measurement (1, 4)")
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--per-group", type=int, default=10)
    ap.add_argument("--consumers", type=int, default=16)
    ap.add_argument("--count", type=int, default=100, help="COUNT of the draining pops (2, 5)")
    ap.add_argument("--cpu-messages", type=int, default=50_000)
    ap.add_argument("--tpop-slots", type=int, default=1024)
    ap.add_argument("--batch-slots", type=int, default=64)
    ap.add_argument("--tpop-messages", type=int, default=100_000)
    ap.add_argument("--blocked-clients", type=int, default=1_000, help="blocked TPOP clients (7)")
    ap.add_argument("--stall", type=int, default=200_000, help="backlog of the group just turned busy (8)")
    ap.add_argument("--no-callgrind", action="store_true", help="skip the instruction counts (valgrind)")
    ap.add_argument("--cg-cycles", type=int, default=2_000, help="single commands per phase under callgrind")
    ap.add_argument("--cg-groups", type=int, default=2_000, help="groups (× --per-group) drained under callgrind")
    ap.add_argument("--cg-cpu-messages", type=int, default=5_000)
    ap.add_argument("--quick", action="store_true", help="small sizes, 2 rounds (a smoke test; not for results)")
    ap.add_argument("--only", default="", help="comma list of sections to run: backlog,groups,cpu,tpop1,tpopb,tpopblk,stall")
    a = pinned.parse_common(ap, 1500, 180, RESULTS)
    if a.quick:
        a.rounds = 2
        a.backlog, a.cycles, a.groups, a.cpu_messages, a.tpop_messages = 20_000, 2_000, 2_000, 10_000, 20_000
        a.stall = 20_000
        a.cg_cycles, a.cg_groups, a.cg_cpu_messages = 500, 500, 1_000
    if a.rounds < 1:
        raise SystemExit("--rounds must be >= 1")
    for p, what in ((pinned.MODULE, "module (cargo build --release)"), (MODULE_V1, "v1 module (scripts/build-v1)"),
                    (pinned.DRIVER, "driver (make bench-delivery-features builds it)")):
        if not p.exists():
            raise SystemExit(f"bench-delivery-features: {what} missing: {p}")
    if shutil.which("taskset") is None:
        raise SystemExit("bench-delivery-features: taskset not found (util-linux)")
    if not a.no_callgrind and not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        raise SystemExit("bench-delivery-features: valgrind (callgrind_control) not found; install valgrind or pass --no-callgrind")
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("bench-delivery-features: needs at least 2 cores (servers on core 0, load on core 1)")
    a.v1_commit = v1_commit()
    os.sched_setaffinity(0, {pinned.LOAD_CORE})

    CG2, CG1 = pinned.Server(), pinned.Server()
    SERVERS = [V2, V1, CG2, CG1]

    def stop_all():
        for srv in SERVERS:
            srv.stop()

    def on_signal(signum, frame):
        stop_all()
        os._exit(130)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    for srv in SERVERS:
        atexit.register(srv.cleanup)

    def watchdog():
        log(f"bench-delivery-features: still running after {a.budget:.0f} s (--budget); stopping the servers and giving up")
        stop_all()
        os._exit(1)

    wd = threading.Timer(a.budget, watchdog)
    wd.daemon = True
    wd.start()

    t_start = time.time()
    pinned.RETRIES.budget_s = a.retry_budget
    pinned.RETRIES.deadline = t_start + a.budget - 120
    log("bench-delivery-features: sampling other load for 1 s …")
    lm = LoadMeter()
    m = pinned.machine_info(lm.others(), pinned.top_processes(1.0))
    commit = pinned.git_commit()
    m["module_sha"] = V2.take_module()
    m["v1_sha"] = V1.take_module(MODULE_V1)
    V2.start()
    V1.start()
    log(f"bench-delivery-features: redis-server v2 pid {V2.proc.pid} port {V2.port}, v1 pid {V1.proc.pid} port {V1.port} "
        f"(core {pinned.SERVER_CORE}); driver on core {pinned.LOAD_CORE}")

    bk, gr, cpu, t1, tb, st = (defaultdict(Fig) for _ in range(6))
    bl = defaultdict(Fig)
    cg = None
    loads = {}
    only = set(filter(None, a.only.split(",")))

    def section(key, name, fn, *args):
        if only and key not in only:
            return
        log(f"bench-delivery-features: {name} …")
        meter, t = LoadMeter(), time.time()
        fn(*args)
        loads[name] = (meter.read(), time.time() - t)
        log(f"bench-delivery-features: {name} done in {time.time() - t:.0f} s")

    def sections(rounds, bk, gr, cpu, t1, tb, sv2, sv1, tag, cycles, groups, cpu_messages, tpop_messages):
        m2, m1 = sv2[1], sv1[1]
        with on(sv2[0]):
            section("backlog", f"held-back backlog{tag}", run_backlog, rounds, a.backlog, cycles, bk, m2)
            section("tpop1", f"TPOP, one non-empty queue{tag}", run_tpop_one, rounds, a.tpop_slots, cycles, t1, m2)
        section("cpu", f"v1 vs v2, policy{tag}", run_cpu, rounds, cpu_messages, cpu, {"v2": sv2, "v1": sv1})
        with on(sv2[0]):
            section("groups", f"group throughput{tag}", run_groups, rounds, groups, a.per_group, a.consumers,
                    a.count, gr, m2)
            section("tpopb", f"TPOP, all queues busy{tag}", run_tpop_batch, rounds, a.batch_slots, tpop_messages,
                    a.consumers, a.count, tb, m2)

    try:
        with on(V2):
            section("tpopblk", "blocked TPOP", run_tpop_blocked, a.rounds, a.blocked_clients, bl)
        sections(a.rounds, bk, gr, cpu, t1, tb, (V2, Usec()), (V1, Usec()), "", a.cycles, a.groups,
                 a.cpu_messages, a.tpop_messages)
        with on(V2):
            section("stall", "POP past a group just turned busy", run_stall, a.rounds, a.stall, st)
        if not a.no_callgrind:
            V2.stop()
            V1.stop()
            cg = tuple(defaultdict(Fig) for _ in range(5))
            i2, i1 = Instr(CG2), Instr(CG1)
            CG2.take_module()
            CG1.take_module(MODULE_V1)
            CG2.start()
            CG1.start()
            log(f"bench-delivery-features: under callgrind: redis-server v2 pid {CG2.proc.pid} port {CG2.port}, "
                f"v1 pid {CG1.proc.pid} port {CG1.port}")
            sections(1, *cg, (CG2, i2), (CG1, i1), " (callgrind)", a.cg_cycles, a.cg_groups, a.cg_cpu_messages,
                     a.cg_groups * a.per_group)
        loads["whole run"] = (lm.read(), time.time() - t_start)
    finally:
        stop_all()
    elapsed = time.time() - t_start

    body, T = build_report(a, bk, gr, cpu, t1, tb, cg, loads)
    if bl or st:
        # Sections 7 and 8 add their targets to the table at the top.
        head = len(T.md())
        extra = (blocked_report(a, bl, T) if bl else []) + (stall_report(a, st, T) if st else [])
        body = T.md() + body[head:] + extra
    md = "\n".join(header(a, m, elapsed, commit) + body)
    out = Path(a.out)
    harness.write_report(out, md)
    print(md)
    print(f"\nwrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")
    missed = T.missed()
    print("targets missed: " + ("; ".join(r[1] for r in missed) if missed else "none"))
    wd.cancel()
    return 1 if (a.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
