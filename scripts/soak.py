#!/usr/bin/env python3
"""Soak run of the model-based live fuzzer (tests/fuzz_support.py) for hours.

Runs seed after seed -- mostly the standalone fuzzer (every command, restarts, promotions),
every fourth seed on a 3-primary cluster with slot moves -- until --seconds have passed
(SOAK_SECONDS, default 3600), each seed for --steps steps (a fresh server or cluster per
seed, stopped by pid). A failing seed is reported with its replay command line and the run
goes on. At the end it prints, and writes at the top of bench/results/soak.md (earlier
runs stay below):

    operations checked: N, seeds: K, failures: F

Exit status 1 if any seed failed. Environment: as the tests (RMQ_MODULE, RMQ_SERVER_BIN).
"""

import argparse
import os
import random
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
RESULTS = REPO / "bench" / "results"

from fuzz_support import (ClusterTarget, Fuzzer, FuzzFailure, MODULE_ARGS,  # noqa: E402
                          Standalone, new_server)
from server_bin import server_binary, server_name  # noqa: E402

STANDALONE_FAULTS = {"reload": 2, "restart": 2, "kill9": 2, "rdb": 1, "promote": 2}


def run_standalone(seed, steps):
    t = Standalone(new_server(tag="rmq-soak"))
    try:
        f = Fuzzer(t, seed, faults=STANDALONE_FAULTS, fault_rate=0.012, label="standalone")
        f.run(steps=steps)
        return f
    finally:
        t.server.stop()
        t.stop_extra()


def run_cluster(seed, steps):
    from cluster_support import Cluster
    cluster = Cluster(masters=3, replicas=0, module_args=MODULE_ARGS, tag="rmq-soak-cluster")
    cluster.start()
    try:
        f = Fuzzer(ClusterTarget(cluster), seed, faults={"slot": 1}, fault_rate=0.04,
                   label="slot_moves")
        f.run(steps=steps)
        return f
    finally:
        cluster.stop()


def _commit():
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def main():
    # a SIGTERM ends the run through the `finally`s that stop its servers (by pid)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 3600)))
    ap.add_argument("--steps", type=int, default=int(os.environ.get("SOAK_STEPS", 3000)))
    ap.add_argument("--first-seed", type=int, default=None)
    ap.add_argument("--out", default=str(RESULTS / "soak.md"))
    a = ap.parse_args()
    first = a.first_seed if a.first_seed is not None else random.SystemRandom().randrange(1, 2 ** 30)
    t0 = time.monotonic()
    ops = seeds = steps = 0
    failures = []
    faults = {}
    seed = first
    while time.monotonic() - t0 < a.seconds:
        cluster = seeds % 4 == 3
        kind = "cluster slot moves" if cluster else "standalone"
        try:
            f = (run_cluster if cluster else run_standalone)(seed, a.steps)
            ops += f.ops_checked
            steps += f.steps
            for k, v in f.faults_done.items():
                faults[k] = faults.get(k, 0) + v
        except FuzzFailure as e:
            failures.append((seed, kind, str(e)))
            print(f"FAILED seed {seed} ({kind}):\n{e}\n", flush=True)
        except Exception:
            failures.append((seed, kind, traceback.format_exc()))
            print(f"ERROR seed {seed} ({kind}):\n{traceback.format_exc()}", flush=True)
        seeds += 1
        if seeds % 10 == 0:
            print(f"[{time.monotonic() - t0:7.0f} s] seeds {seeds}, operations checked {ops}, "
                  f"failures {len(failures)}", flush=True)
        seed += 1
    elapsed = time.monotonic() - t0
    summary = f"operations checked: {ops}, seeds: {seeds}, failures: {len(failures)}"
    print(summary)
    title = "# Model-based live fuzzing: soak run (`make soak`)"
    lines = [
        title,
        "",
        f"## {elapsed / 60:.1f} minutes at {_commit()}",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- server: {server_name()} ({server_binary()}); module {os.environ.get('RMQ_MODULE', 'target/release/librmq.so')}",
        f"- fuzzer at commit {_commit()}",
        f"- duration: {elapsed / 60:.1f} min (SOAK_SECONDS={a.seconds:.0f}), {a.steps} steps per seed",
        f"- seeds {first} .. {seed - 1} (every fourth on a 3-primary cluster with slot moves)",
        f"- steps: {steps}; faults injected: {dict(sorted(faults.items()))}",
        "- model: the v3 contract, strictly (no deviation)",
        "",
        f"**{summary}**",
        "",
    ]
    for s, kind, text in failures[:20]:
        lines += [f"### seed {s} ({kind})", "", "```", text[:4000], "```", ""]
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # The newest run first; earlier runs' sections stay below it.
    earlier = out.read_text().removeprefix(title).lstrip("\n") if out.exists() else ""
    out.write_text("\n".join(lines) + ("\n" + earlier if earlier else ""))
    print(f"wrote {a.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
