#!/usr/bin/env python3
"""RMQ.DROP and RMQ.PURGE of a 200,000-message queue: the time spent in the command.

Starts its OWN redis-server on a free port (bench/harness: the module loaded, stopped by its
pid at the end). Each round fills queue `big` with 200,000 messages of one group (one head
in `big`, 199,999 held back in `park{big}`, each with a record in `meta{big}` and a member
of `parkidx{big}`), then runs the command after CONFIG RESETSTAT and reads its usec from
INFO commandstats. For comparison, the same keys deleted by a plain DEL (synchronous
freeing, what the module's lazy UNLINK spares the command). Prints the median of --rounds
rounds.

Usage: python3 bench/bench_drop.py [--rounds 3] [--messages 200000]
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Server  # noqa: E402

KEYS = ["big", "park{big}", "parkidx{big}", "meta{big}"]


def fill(r, n):
    pipe = r.pipeline(transaction=False)
    for b in range(0, n, 1000):
        pipe.execute_command("RMQ.PUSH", "big", "DELAY", 0, "GROUP", "g", *(f"m{i}" for i in range(b, min(n, b + 1000))))
    assert sum(pipe.execute()) == n


def usec_of(r, args, stat):
    r.config_resetstat()
    r.execute_command(*args)
    return r.info("commandstats")[f"cmdstat_{stat}"]["usec"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=200_000)
    a = ap.parse_args()
    srv = Server(tag="rmq-bench-drop").start()
    try:
        r = srv.client()
        figures = {"RMQ.DROP": [], "RMQ.PURGE": [], "DEL (sync)": []}
        for _ in range(a.rounds):
            for name, args, stat in (("RMQ.DROP", ["RMQ.DROP", "big"], "rmq.drop"),
                                     ("RMQ.PURGE", ["RMQ.PURGE", "big"], "rmq.purge"),
                                     ("DEL (sync)", ["DEL", *KEYS], "del")):
                r.flushall()
                fill(r, a.messages)
                figures[name].append(usec_of(r, args, stat))
                assert not r.exists(*KEYS)
        print(f"{a.messages:,} grouped messages, median of {a.rounds} rounds (INFO commandstats usec):")
        for name, xs in figures.items():
            print(f"  {name:<11} {statistics.median(xs):>10,.0f} us   (rounds: {', '.join(str(x) for x in xs)})")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
