#!/usr/bin/env python3
"""Where RMQ.TPOP's instructions go, against RMQ.POP on the same messages (issue 21).

Starts one redis-server under `valgrind --tool=callgrind` with the given module (default:
this work tree's target/release/librmq.so) on a free 127.0.0.1 port, and counts the
instructions per call of redis-server's call() (the command alone, what INFO commandstats
times) for each phase, between `callgrind_control -z` and `-d`:

  tpop1024     RMQ.TPOP o 1024: a topic of 1024 slots, one busy (the other 1023 were
               pushed to, drained and acked before), 1000 calls
  pop1         RMQ.POP p on a queue holding the same messages, 1000 calls
  pop100       RMQ.POP q COUNT 100 (64,000 messages in one queue), 150 calls
  tpop100q1    RMQ.TPOP t 64 COUNT 100 (1,000 messages in each of 64 queues), 150 calls
  tpop100q100  the same with QUANTUM 100
  block16384   RMQ.TPOP big 16384 BLOCK 1 on an empty topic (each call blocks, then times
  block1       out), and the same with 1 slot, 50 calls: the call plus its timeout (Redis's
               moduleBlockedClientTimedOut: the module's reply and release). Not the whole
               server: how often its idle event loop turns meanwhile is a matter of time.
  drainpop     bench_v2 section 5 under callgrind (--drain messages, default 20,000, as
  draintq100   bench_v2's callgrind pass; the bench driver, `make bench-driver`, fills and
  draintq1     drains): 16 consumers each loop {ACK what it popped, one RMQ.ACK per queue;
               RMQ.POP q COUNT 100, or RMQ.TPOP t 64 COUNT 100 [QUANTUM 100]}; per message
               acked, the commands (call()) and the whole server (the dump's summary).

Each single-command phase runs its command once before counting (ACL verdict, name
caches). With --annotate DIR, the dumps are kept there for `callgrind_annotate
--inclusive=yes`. The server is stopped by its pid at the end. Prints the ratios of the
issue's targets.
"""

import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bare_server(tmp, args, wrap=()):
    """redis-server in `tmp` on a free port, with more arguments `args`, run by the command
    `wrap` (e.g. valgrind) if given; its process and port once it answers."""
    port = free_port()
    proc = subprocess.Popen([*wrap, "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            redis.Redis(port=port).ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.1)
    return proc, port


def callgrind_server(tmp, args):
    """redis-server under `valgrind --tool=callgrind` in `tmp` on a free port, with more
    arguments `args`; its process, its dump file's base name and port once it answers."""
    out = tmp / "cg.out"
    proc, port = bare_server(tmp, args, ["valgrind", "--tool=callgrind", "--dump-instr=no",
                                         f"--callgrind-out-file={out}"])
    return proc, out, port


def dump(proc, out, name):
    """Has callgrind write what it counted since it was last zeroed (`callgrind_control
    -z`) as `name`; the dump's path."""
    before = set(glob.glob(f"{out}.*"))
    subprocess.run(["callgrind_control", "-d", name, str(proc.pid)], check=True, capture_output=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        new = sorted(set(glob.glob(f"{out}.*")) - before)
        if new and "summary:" in Path(new[-1]).read_text(errors="replace"):
            return new[-1]
        time.sleep(0.2)
    raise RuntimeError("callgrind: no dump within 60 s")


def inclusive(f, fns):
    """Inclusive instructions of redis-server's functions `fns` in dump `f`."""
    ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f],
                         capture_output=True, text=True, check=True).stdout
    return [next((int(line.split()[0].replace(",", "")) for line in ann.splitlines() if f"???:{fn} [" in line), 0)
            for fn in fns]


class BareMeter:
    """A plain redis-server (no module) on a free port in `tmp`, under callgrind when
    `callgrind`, that tells what pipelined commands cost: call() instructions, or INFO
    commandstats usec (CONFIG RESETSTAT first). For the floor scripts."""

    def __init__(self, tmp, callgrind):
        self.callgrind = callgrind
        if callgrind:
            self.proc, self.out, port = callgrind_server(tmp, [])
        else:
            self.proc, port = bare_server(tmp, [])
        self.c = redis.Redis(port=port)
        self.unit = "instructions (call())" if callgrind else "usec (commandstats)"

    def measure(self, name, commands):
        """What `commands` (pipelined) cost, and their replies."""
        if self.callgrind:
            subprocess.run(["callgrind_control", "-z", str(self.proc.pid)], check=True, capture_output=True)
        else:
            self.c.config_resetstat()
        p = self.c.pipeline(transaction=False)
        for cmd in commands:
            p.execute_command(*cmd)
        replies = p.execute()
        if self.callgrind:
            f = dump(self.proc, self.out, name)
            v = inclusive(f, ["call"])[0]
            Path(f).unlink()
        else:
            v = sum(s["usec"] for k, s in self.c.info("commandstats").items() if k != "cmdstat_config")
        return v, replies

    def fmt(self, v):
        return f"{v:,.0f}" if self.callgrind else f"{v:.3f}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", default=str(REPO / "target" / "release" / "librmq.so"))
    ap.add_argument("--annotate", help="keep the callgrind dumps in this directory")
    ap.add_argument("--drain", type=int, default=20_000,
                    help="messages of the drain phases (bench_v2 section 5's, under callgrind); 0: none")
    ap.add_argument("--driver", default=str(REPO / "target" / "bench-driver" / "release" / "rmq-bench-driver"),
                    help="the bench driver (make bench-driver), for the drain phases")
    a = ap.parse_args()
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate", "redis-server"):
        if shutil.which(tool) is None:
            raise SystemExit(f"profile_tpop: {tool} not found")
    tmp = Path(tempfile.mkdtemp(prefix="rmq-profile-"))
    mod = tmp / "librmq.so"
    shutil.copy(a.module, mod)
    proc, out, port = callgrind_server(tmp, ["--loadmodule", str(mod)])
    try:
        c = redis.Redis(port=port)
        per_call = {}

        def measure(name, run, timeout=False):
            """Counts what run() makes the server do; run returns how many calls (or
            messages) to divide by. Returns the command-only and whole-server figures."""
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
            n = run()
            f = dump(proc, out, name)
            v = sum(inclusive(f, ["call", "moduleBlockedClientTimedOut"] if timeout else ["call"]))
            total = next(int(line.split()[1]) for line in Path(f).read_text(errors="replace").splitlines()
                         if line.startswith("summary:"))
            if a.annotate:
                os.makedirs(a.annotate, exist_ok=True)
                shutil.move(f, Path(a.annotate) / f"cg_{name}.out")
            else:
                os.unlink(f)
            return v / n, total / n

        def phase(name, cmd, n, timeout=False):
            c.execute_command(*cmd)

            def run():
                for _ in range(n):
                    c.execute_command(*cmd)
                return n

            per_call[name] = measure(name, run, timeout)[0]
            print(f"{name:12} {per_call[name]:>12,.0f} instructions per call", flush=True)

        def drain(name, who):
            """bench_v2 section 5 with --messages a.drain: fill (not counted), then 16
            consumers each loop {ACK what it popped; pop COUNT 100}; per message acked."""
            def driver(mode, **opts):
                args = [str(a.driver), mode, "--url", f"redis://127.0.0.1:{port}/", "--timeout", "600"]
                for k, v in {**who, **opts}.items():
                    args += ["--" + k.replace("_", "-"), str(v)]
                return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout.splitlines()[-1])

            c.flushall()
            driver("gfill", groups=a.drain // 10, per_group=10, grouped=0, order="adjacent")
            cmd, total = measure(name, lambda: driver("drain", messages=a.drain, consumers=16, count=100)["acked"])
            per_call[name], per_call[name + ":server"] = cmd, total
            print(f"{name:12} {cmd:>12,.0f} instructions per message, command ({total:,.0f} server)", flush=True)

        for s in range(1024):
            c.execute_command("RMQ.PUSH", f"o_{s}", "PRIORITY", 1, "x")
            c.execute_command("RMQ.POP", f"o_{s}")
            c.execute_command("RMQ.ACK", f"o_{s}", "x")
        for q in ("o_5", "p"):
            c.execute_command("RMQ.PUSH", q, "PRIORITY", 1, *[f"y{i}" for i in range(1200)])
        phase("tpop1024", ("RMQ.TPOP", "o", 1024, "LEASE", 3600000), 1000)
        phase("pop1", ("RMQ.POP", "p", "LEASE", 3600000), 1000)
        c.flushall()
        for s in range(64):
            c.execute_command("RMQ.PUSH", f"t_{s}", "PRIORITY", 1, *[f"m{s}:{i}" for i in range(1000)])
        for b in range(0, 64000, 1000):
            c.execute_command("RMQ.PUSH", "q", "PRIORITY", 1, *[f"p:{i}" for i in range(b, b + 1000)])
        phase("pop100", ("RMQ.POP", "q", "COUNT", 100, "LEASE", 3600000), 150)
        phase("tpop100q1", ("RMQ.TPOP", "t", 64, "COUNT", 100, "LEASE", 3600000), 150)
        phase("tpop100q100", ("RMQ.TPOP", "t", 64, "COUNT", 100, "QUANTUM", 100, "LEASE", 3600000), 150)
        c.flushall()
        phase("block16384", ("RMQ.TPOP", "big", 16384, "BLOCK", 1), 50, timeout=True)
        phase("block1", ("RMQ.TPOP", "big", 1, "BLOCK", 1), 50, timeout=True)
        if a.drain:
            drain("drainpop", dict(peer="rmq", queue="q"))
            drain("draintq100", dict(peer="tpop", queue="t", slots=64, quantum=100))
            drain("draintq1", dict(peer="tpop", queue="t", slots=64))
        p = per_call
        print(f"TPOP 1024 slots one busy / POP: {p['tpop1024'] / p['pop1']:.3f} (target <= 1.1)")
        print(f"POP COUNT 100 / TPOP COUNT 100 over 64, QUANTUM 1: {p['pop100'] / p['tpop100q1']:.3f} (target >= 0.6)")
        print(f"POP COUNT 100 / TPOP COUNT 100 over 64, QUANTUM 100: {p['pop100'] / p['tpop100q100']:.3f} "
              "(target >= 0.9)")
        print(f"blocked TPOP, call and timeout, 16384 slots / 1: {p['block16384'] / p['block1']:.3f} "
              "(does not grow with slots)")
        for q, target in (("100", 0.9), ("1", 0.6)):
            if a.drain:
                print(f"drain, per message, POP COUNT 100 / TPOP COUNT 100 QUANTUM {q} over 64: command "
                      f"{p['drainpop'] / p['draintq' + q]:.3f}, server "
                      f"{p['drainpop:server'] / p['draintq' + q + ':server']:.3f} (target >= {target})")
    finally:
        try:
            redis.Redis(port=port).shutdown(nosave=True)
        except redis.exceptions.RedisError:
            pass
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
