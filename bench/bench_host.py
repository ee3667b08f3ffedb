#!/usr/bin/env python3
"""What the module costs commands on keys that are not queues (issue 31 item 7; make bench).

Three servers of the same redis-server binary, each on a free 127.0.0.1 port and stopped by
its pid: `none` (no module), `floor` (bench/floor_module/floor.c: subscribed to the keyspace
event classes RMQ follows and with a command filter as RMQ's, doing nothing with either:
Redis's own dispatch) and `rmq` (this
work tree's module; --base adds another build, e.g. main's, as `base`). redis-benchmark runs
SET, GET, INCR, LPUSH, HSET, SADD and ZADD on new keys, pipelined (16 a round trip) and
not:

  callgrind  each server under `valgrind --tool=callgrind`, the same commands in the same
             order on each (new keys `key:<n>` in a fixed shuffled order, sent by this
             script in batches of 16 or one at a time: redis-benchmark's -r draws other
             keys each run, which moves the figures by ±1.5%); per command, the
             instructions inside call() (the command and the keyspace events it fires)
             and inside processCommand() (call() plus what Redis does before it: the
             command filters), and inside moduleCallCommandFilters() (the filters alone);
  wall       the servers without valgrind, pinned to core 0 (redis-benchmark to core 1),
             --rounds alternating rounds: INFO commandstats usec_per_call (the command and
             its events) and redis-benchmark's requests per second (everything, the command
             filter included); medians.

Bound, every row: rmq ≤ 1.03× floor in call() instructions, and in wall time the median
ratio to floor ≤ 1.03 or within the rounds' own spread (the machine is shared; callgrind
is the exact figure). Not 1.03× none: a module that follows keyspace events at all (the contract
needs them: DEL of Q cleans up, ZADD-written messages wake consumers) makes Redis walk its
subscriber list for every event of every command, which alone costs commands whose
events it does not follow up to 1.06× (floor ÷ none, shown beside; docs/EVENTS.md).
Prints the table, writes bench/results/bench_host.md; exit status 1 with --strict when a
row misses its bound.
"""

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import redis

import harness
from harness.callgrind import Callgrind, inclusive

REPO = Path(__file__).resolve().parent.parent
MODULE = Path(os.environ.get("RMQ_MODULE", REPO / "target/release/librmq.so"))
RESULTS = harness.RESULTS / "bench_host.md"
COMMANDS = ["set", "get", "incr", "lpush", "hset", "sadd", "zadd"]
BOUND = 1.03
SERVER_CORE, LOAD_CORE = "0", "1"
# Under callgrind a command can take milliseconds when the machine is busy: what call()
# does with its duration (the slow log past 10 ms, latency histograms) would count
# instructions that depend on the machine's load, not on the server.
QUIET = ["--slowlog-log-slower-than", "-1", "--latency-tracking", "no"]
# Work done on wall-clock timers that lands inside call() whenever a command allocates or
# looks a key up: jemalloc's purging of freed pages (its decay) and the cron's incremental
# rehashing. Off under callgrind, so that a row's count is the same run to run (with them
# it moved by up to 3%).
CG_QUIET = ["--activerehashing", "no"]
CG_ENV = {"MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def redismodule_h():
    """The redismodule.h of the redis-module crate the module builds with."""
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--manifest-path",
                                      str(REPO / "Cargo.toml")], capture_output=True, text=True,
                                     check=True).stdout)
    pkg = next(p for p in meta["packages"] if p["name"] == "redis-module")
    return Path(pkg["manifest_path"]).parent / "src" / "include"


def build_floor(tmp):
    out = tmp / "floor.so"
    subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-I", str(redismodule_h()), "-o", str(out),
                    str(REPO / "bench/floor_module/floor.c")], check=True)
    return out


def configs(tmp, base):
    """Name -> server arguments. Modules are private copies: a rebuild meanwhile changes
    nothing."""
    rmq = tmp / "librmq.so"
    shutil.copy(MODULE, rmq)
    out = {"none": [], "floor": ["--loadmodule", str(build_floor(tmp))], "rmq": ["--loadmodule", str(rmq)]}
    if base:
        shutil.copy(base, tmp / "base.so")
        out["base"] = ["--loadmodule", str(tmp / "base.so")]
    return out


def benchmark(port, cmd, n, pipeline):
    """redis-benchmark's requests per second."""
    args = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(n), "-r", "10000000",
            "-P", str(pipeline), "-t", cmd, "--csv"]
    run = subprocess.run(["taskset", "-c", LOAD_CORE, *args], capture_output=True, text=True, check=True, timeout=600)
    row = [line for line in run.stdout.splitlines() if line and not line.startswith('"test"')][-1]
    return float(row.split(",")[1].strip('"'))


ARGS = {"set": ["SET", None, "xxx"], "get": ["GET", None], "incr": ["INCR", None], "lpush": ["LPUSH", None, "xxx"],
        "hset": ["HSET", None, "field", "xxx"], "sadd": ["SADD", None, "xxx"], "zadd": ["ZADD", None, "1", "xxx"]}


def send(c, cmd, keys, pipeline):
    """`cmd` on each of `keys`, `pipeline` commands per round trip."""
    for i in range(0, len(keys), pipeline):
        p = c.pipeline(transaction=False)
        for k in keys[i:i + pipeline]:
            args = list(ARGS[cmd])
            args[1] = k
            p.execute_command(*args)
        p.execute()


def callgrind_pass(cfgs, n, pipelines):
    """{(config, cmd, pipeline): (call(), processCommand(), moduleCallCommandFilters()) per
    command}."""
    keys = [f"key:{i:012d}" for i in range(n)]
    random.Random(31).shuffle(keys)
    out = {}
    for name, args in cfgs.items():
        server = harness.Server(module=None, conf=[*args, *QUIET, *CG_QUIET], env=CG_ENV,
                                tag=f"rmq-host-cg-{name}")
        meter = Callgrind(server)
        server.start()
        try:
            c = redis.Redis(port=server.port)
            for p in pipelines:
                for cmd in COMMANDS:
                    c.flushall()
                    meter.zero()
                    send(c, cmd, keys, p)
                    f = meter.dump(f"{cmd}-{p}")
                    costs = inclusive(f, ["call", "processCommand", "moduleCallCommandFilters"])
                    Path(f).unlink()
                    out[(name, cmd, p)] = tuple(c / n for c in costs)
                    call, process, _ = costs
                    log(f"  callgrind {name:5} {cmd:5} -P {p:2}: call() {call / n:7,.0f}, "
                        f"processCommand() {process / n:7,.0f} per command")
        finally:
            server.stop()
    return out


def wall_pass(cfgs, rounds, n, pipelines):
    """{(config, cmd, pipeline): ([usec_per_call per round], [requests/s per round])}."""
    servers = {}
    for name, args in cfgs.items():
        server = harness.Server(module=None, conf=args, pin=SERVER_CORE, tag=f"rmq-host-{name}").start()
        servers[name] = (server, server.port, redis.Redis(port=server.port))
    out = {}
    try:
        names = list(cfgs)
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for cmd in COMMANDS:
                for p in pipelines:
                    for name in order:
                        _, port, c = servers[name]
                        c.flushall()
                        c.config_resetstat()
                        rps = benchmark(port, cmd, n[p], p)
                        usec = c.info("commandstats")[f"cmdstat_{cmd}"]["usec_per_call"]
                        u, q = out.setdefault((name, cmd, p), ([], []))
                        u.append(usec)
                        q.append(rps)
            log(f"  wall round {r + 1}/{rounds} done")
    finally:
        for server, _, _ in servers.values():
            server.stop()
    return out


def spread(xs):
    return (max(xs) - min(xs)) / statistics.median(xs) if xs and statistics.median(xs) else 0.0


def report(cg, wall, cfgs, pipelines, a):
    peers = list(cfgs)
    names = " / ".join(peers)
    lines = [
        "# Host overhead: commands on keys that are not queues (issue 31 item 7)",
        "",
        f"`python3 bench/bench_host.py --rounds {a.rounds} --cg-commands {a.cg_commands}"
        f"{' --base ' + str(a.base) if a.base else ''}` — commands on new keys; callgrind: "
        f"{a.cg_commands:,} commands per row, the same keys in the same order on every server; wall: "
        f"{a.rounds} alternating rounds of redis-benchmark -r 10000000 ({a.wall_commands:,} commands, "
        f"-P 1: {a.wall_commands // 4:,}). Server: "
        f"`{subprocess.run(['redis-server', '--version'], capture_output=True, text=True).stdout.strip()}`.",
        "",
        "Instructions per command (the servers under callgrind with jemalloc's decay and active "
        "rehashing off: wall-clock-driven work that moved the counts run to run) inside call() (the "
        "command and the keyspace events it fires: the issue's measure), inside processCommand() (call() and what precedes it, among which the "
        "command filters) and inside moduleCallCommandFilters() (the filters alone); wall: INFO "
        "commandstats usec_per_call (the command and its events) and redis-benchmark requests/s "
        "(everything), medians.",
        "",
        f"Bound, every row: call() rmq ÷ floor ≤ {BOUND}; wall rmq ÷ floor ≤ {BOUND} or within the "
        "rounds' own spread (±). The floor, not `none`: `floor` is a module that follows the keyspace "
        "event classes RMQ follows and has a command filter, and does nothing (bench/floor_module/"
        "floor.c). Any module that follows keyspace events at all makes Redis walk its subscriber "
        "list for every event of every command, matching or not (moduleNotifyKeyspaceEvent), and "
        "the contract needs them (DEL of Q cleans up its queue, ZADD-written messages wake consumers): "
        "floor ÷ none, shown beside, is that walk's cost, which no such module can go below. Why RMQ has the command filter, and what it costs over Redis's "
        "own dispatch of it: docs/EVENTS.md.",
        "",
        f"| command | -P | call() {names} | rmq ÷ floor | floor ÷ none | processCommand() {names} | "
        f"rmq ÷ floor | filters {names} | usec/call {names} | rmq ÷ floor | req/s {names} | "
        "floor ÷ rmq | within bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    missed, ref = [], "floor"
    for cmd in COMMANDS:
        for p in pipelines:
            row = [cmd.upper(), str(p)]
            call = {n: cg[(n, cmd, p)][0] for n in peers}
            process = {n: cg[(n, cmd, p)][1] for n in peers}
            cr, floor = call["rmq"] / call[ref], call["floor"] / call["none"]
            row += [" / ".join(f"{call[n]:,.0f}" for n in peers), f"{cr:.3f}", f"{floor:.3f}",
                    " / ".join(f"{process[n]:,.0f}" for n in peers), f"{process['rmq'] / process[ref]:.3f}",
                    " / ".join(f"{cg[(n, cmd, p)][2]:,.0f}" for n in peers)]
            usec = {n: statistics.median(wall[(n, cmd, p)][0]) for n in peers}
            rps = {n: statistics.median(wall[(n, cmd, p)][1]) for n in peers}
            ur = usec["rmq"] / usec[ref] if usec[ref] else float("nan")
            rr = rps[ref] / rps["rmq"] if rps["rmq"] else float("nan")
            noise_u = max(spread(wall[(ref, cmd, p)][0]), spread(wall[("rmq", cmd, p)][0]))
            noise_r = max(spread(wall[(ref, cmd, p)][1]), spread(wall[("rmq", cmd, p)][1]))
            wall_ok = ur <= max(BOUND, 1 + noise_u) and rr <= max(BOUND, 1 + noise_r)
            ok = cr <= BOUND and wall_ok
            verdict = "yes" if ok else "**no**"
            row += [" / ".join(f"{usec[n]:.3f}" for n in peers), f"{ur:.3f} (±{noise_u:.2f})",
                    " / ".join(f"{rps[n]:,.0f}" for n in peers), f"{rr:.3f} (±{noise_r:.2f})", verdict]
            if not ok:
                missed.append(f"{cmd} -P {p}")
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "±: the larger relative spread (max − min) ÷ median of the two servers' rounds. "
              "floor ÷ none: what Redis's dispatch of keyspace events to any subscribing module costs "
              "(every event a command fires goes through the module subscriber list, matching or not: "
              "GET on a missing key fires `keymiss`, INCR `new` and `incrby`).", "",
              "rows missing their bound: " + (", ".join(missed) if missed else "none")]
    return "\n".join(lines), missed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--cg-commands", type=int, default=20_000, help="commands per callgrind row")
    ap.add_argument("--wall-commands", type=int, default=200_000, help="commands per wall row (-P 1: a quarter)")
    ap.add_argument("--base", type=Path, help="another build of the module, shown as `base`")
    ap.add_argument("--quick", action="store_true", help="small runs (a smoke test; not for results)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a row misses its bound")
    a = ap.parse_args()
    # Stopped (make's ^C, a timeout): the servers are stopped by the `finally`s on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if a.quick:
        a.rounds, a.cg_commands, a.wall_commands = 2, 2_000, 20_000
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate", "redis-benchmark", "taskset", "cc"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench_host: {tool} not found")
    pipelines = [16, 1]
    with tempfile.TemporaryDirectory(prefix="rmq-bench-host-") as t:
        tmp = Path(t)
        cfgs = configs(tmp, a.base)
        log("bench_host: callgrind …")
        cg = callgrind_pass(cfgs, a.cg_commands, pipelines)
        log("bench_host: wall …")
        wall = wall_pass(cfgs, a.rounds, {16: a.wall_commands, 1: a.wall_commands // 4}, pipelines)
    md, missed = report(cg, wall, cfgs, pipelines, a)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(md + "\n")
    print(md)
    return 1 if (a.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
