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
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import harness  # noqa: E402
from harness.callgrind import Callgrind, inclusive, total  # noqa: E402

REPO = harness.REPO


class BareMeter:
    """A plain redis-server (no module) on a free port, under callgrind when `callgrind`,
    that tells what pipelined commands cost: call() instructions, or INFO commandstats usec
    (CONFIG RESETSTAT first). For the floor scripts."""

    def __init__(self, callgrind):
        self.server = harness.Server(module=None, tag="rmq-floor")
        self.callgrind = Callgrind(self.server) if callgrind else None
        self.server.start()
        self.c = self.server.client(protocol=None)
        self.unit = "instructions (call())" if callgrind else "usec (commandstats)"

    def measure(self, name, commands):
        """What `commands` (pipelined) cost, and their replies."""
        def run():
            p = self.c.pipeline(transaction=False)
            for cmd in commands:
                p.execute_command(*cmd)
            return p.execute()

        if self.callgrind:
            replies, got = self.callgrind.around(run, ["call"])
            return got["call"], replies
        self.c.config_resetstat()
        replies = run()
        return sum(s["usec"] for k, s in self.c.info("commandstats").items() if k != "cmdstat_config"), replies

    def fmt(self, v):
        return f"{v:,.0f}" if self.callgrind else f"{v:.3f}"

    def stop(self):
        self.server.stop()


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
    server = harness.Server(tag="rmq-profile")
    # A private copy: a rebuild meanwhile changes nothing.
    server.module = Path(server.dir) / "librmq.so"
    shutil.copy(a.module, server.module)
    meter = Callgrind(server)
    server.start()
    port = server.port
    try:
        c = server.client(protocol=None)
        per_call = {}

        def measure(name, run, timeout=False):
            """Counts what run() makes the server do; run returns how many calls (or
            messages) to divide by. Returns the command-only and whole-server figures."""
            meter.zero()
            n = run()
            f = meter.dump(name)
            v = sum(inclusive(f, ["call", "moduleBlockedClientTimedOut"] if timeout else ["call"]))
            whole = total(f)
            if a.annotate:
                os.makedirs(a.annotate, exist_ok=True)
                shutil.move(f, Path(a.annotate) / f"cg_{name}.out")
            else:
                os.unlink(f)
            return v / n, whole / n

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
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
