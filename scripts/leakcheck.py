#!/usr/bin/env python3
"""Leak check of the RMQ module under valgrind (make leakcheck).

Runs a redis-server under `valgrind --leak-check=full` with the module loaded, drives every
command through a churn (groups, holds, policies, rate limits, TPOP, blocked clients that
time out or are dropped, errors, a lease expiry), shuts the server down, and reports the
leak records whose allocation stack passes through the module (librmq.so). Exit status 1
if any is "definitely" or "indirectly" lost.

valgrind only sees allocations made through the C library's malloc: the server must be
built with `make MALLOC=libc` (Debian's redis-server uses jemalloc, which valgrind cannot
follow, so with it the check proves nothing and the script refuses to run). Point
REDIS_SERVER at such a build. The unit tests, which use the system allocator, are run
under valgrind too (`--unit`).

The server runs on a free port in its own temporary directory and is stopped by SHUTDOWN
(and by its pid if that fails); every wait is bounded.
"""

import argparse
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
import harness  # noqa: E402


def malloc_of(server):
    out = subprocess.run([server, "--version"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"malloc=(\S+)", out)
    return m.group(1) if m else "unknown"


def churn(r, server_port, seconds):
    """Every command, many times; returns how many commands were sent."""
    sent = 0
    deadline = time.monotonic() + seconds
    r.execute_command("RMQ.POLICY", "t_1", "SET", "rate", 50, "backoff-ms", 5, "retries", 2)
    n = 0
    while time.monotonic() < deadline:
        n += 1
        for slot in range(4):
            q = f"t_{slot}"
            r.execute_command("RMQ.PUSH", q, "DELAY", 0, "GROUP", f"g{n % 5}", *[f"m{n}-{i}" for i in range(20)])
            r.execute_command("RMQ.PUSH", f"p{slot}", "PRIORITY", n % 7, *[f"x{i}" for i in range(10)])
            sent += 2
        got = r.execute_command("RMQ.TPOP", "t", 4, "COUNT", 50, "LEASE", 60000) or []
        for q, m, d in got:
            if d == 1 and m.endswith(b"3"):
                r.execute_command("RMQ.NACK", q, m)
            else:
                r.execute_command("RMQ.ACK", q, m)
            sent += 1
        for slot in range(4):
            p = f"p{slot}"
            for m, d in r.execute_command("RMQ.POP", p, "COUNT", 10, "LEASE", 50) or []:
                if d == 1:
                    r.execute_command("RMQ.NACK", p, m, "DELAY", 10)
                elif d == 2:
                    r.execute_command("RMQ.NACK", p, m, "DEAD")
                sent += 1
            r.execute_command("RMQ.REPLAY", p, "COUNT", 3)
            r.execute_command("RMQ.INFO", p)
            r.execute_command("RMQ.PENDING", p)
            r.execute_command("RMQ.CANCEL", p, "x1", "nope")
            sent += 4
        # The queue registry and the pause: list every queue a page at a time, pause one.
        cursor = b"0"
        while True:
            cursor, _names = r.execute_command("RMQ.QUEUES", "MATCH", "*_*", "COUNT", 3, "CURSOR", cursor)
            sent += 1
            if cursor == b"0":
                break
        r.execute_command("RMQ.POLICY", "p3", "SET", "paused", n % 2)
        sent += 1
        for bad in (("RMQ.PUSH", "", "DELAY", 0, "m"), ("RMQ.POP", "t_0", "COUNT", 0), ("RMQ.TPOP", "t", 3),
                    ("RMQ.POLICY", "t_0", "SET", "rate", -1), ("RMQ.PUSH", "p0", "RANGE", 1, "m"),
                    ("RMQ.QUEUES", "CURSOR", "zz")):
            try:
                r.execute_command(*bad)
            except redis.ResponseError:
                pass
            sent += 1
        # Blocked clients: one times out, one is served, one is dropped while blocked.
        threading.Thread(target=lambda: redis.Redis(port=server_port).execute_command("RMQ.POP", "empty", "BLOCK", 20), daemon=True).start()
        c = socket.create_connection(("127.0.0.1", server_port))
        c.sendall(b"*5\r\n$8\r\nRMQ.TPOP\r\n$5\r\nnever\r\n$1\r\n8\r\n$5\r\nBLOCK\r\n$1\r\n0\r\n")
        time.sleep(0.01)
        c.close()
        r.execute_command("RMQ.SWEEP", "p0")
        sent += 3
    # Drain everything so the queues' keys are gone, then leave some state for shutdown.
    r.execute_command("RMQ.POLICY", "t_1", "RESET")
    for _ in range(1000):
        got = r.execute_command("RMQ.TPOP", "t", 4, "COUNT", 1000, "LEASE", 60000)
        if not got:
            break
        for q, m, _d in got:
            r.execute_command("RMQ.ACK", q, m)
    r.execute_command("RMQ.PUSH", "left", "DELAY", 0, "GROUP", "g", "a", "b")
    r.execute_command("RMQ.POP", "left")
    return sent


def server_check(seconds):
    server_bin = harness.server_binary()
    malloc = malloc_of(server_bin)
    if malloc != "libc":
        sys.exit(f"leakcheck: {server_bin} uses malloc={malloc}; valgrind sees only libc malloc: "
                 "build Redis with `make MALLOC=libc` and set REDIS_SERVER")
    # valgrind reports the leaks when the server exits: stop() shuts it down (SIGTERM) and
    # waits for that; the directory (module copy, valgrind.log) stays until it is read.
    server = harness.Server(tag="rmq-leak", start_timeout=120)
    log = os.path.join(server.dir, "valgrind.log")
    server.wrapper = ["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect",
                      "--num-callers=30", f"--log-file={log}"]
    server.module = os.path.join(server.dir, "librmq.so")
    shutil.copy2(harness.module_path(), server.module)
    try:
        server.start()
        sent = churn(server.client(socket_timeout=60, protocol=None), server.port, seconds)
    finally:
        server.stop(remove_dir=False)
    text = Path(log).read_text(errors="replace")
    records = re.split(r"\n==\d+== \n", text)
    leaks = [rec for rec in records if ("definitely lost" in rec or "indirectly lost" in rec) and "librmq" in rec]
    # Memory errors (invalid reads or writes, uninitialised values, bad frees) anywhere.
    errors = [rec for rec in records if re.search(r"Invalid (read|write|free)|uninitialised|Mismatched free", rec)]
    summary = "\n".join(ln for ln in text.splitlines() if "lost:" in ln or "ERROR SUMMARY" in ln)
    print(f"server: {server_bin} (malloc=libc) under valgrind; {sent} commands of churn in {seconds} s")
    print(summary)
    print(f"leak records through the module: {len(leaks)}; memory errors: {len(errors)}")
    for rec in (leaks + errors)[:5]:
        print(rec)
    server.keep = bool(leaks or errors)
    server.stop()
    if server.keep:
        print(f"valgrind log kept: {log}")
    return not leaks and not errors


def unit_check():
    subprocess.run(["cargo", "test", "--release", "--no-run"], cwd=REPO, check=True, capture_output=True)
    binaries = [b for b in glob.glob(str(REPO / "target/release/deps/rmq-*")) if os.access(b, os.X_OK) and not b.endswith(".d")]
    binary = max(binaries, key=os.path.getmtime)
    p = subprocess.run(["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=9",
                        binary, "--test-threads=1"], capture_output=True, text=True, timeout=1800)
    print("\n".join(ln for ln in p.stderr.splitlines() if "lost:" in ln or "ERROR SUMMARY" in ln))
    print(f"unit tests under valgrind: exit {p.returncode}")
    return p.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=60, help="churn time under valgrind")
    ap.add_argument("--unit", action="store_true", help="also run the unit tests under valgrind")
    a = ap.parse_args()
    ok = server_check(a.seconds)
    if a.unit:
        ok = unit_check() and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
