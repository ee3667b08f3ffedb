#!/usr/bin/env python3
"""RMQ.PUSH server usec per call at two queue sizes, for two builds of the module side by
side: `make bench`'s scale phase (driver `fill`, then `scale`: 200 × {100 single pushes,
100 pops, 100 acks}, INFO commandstats) on a fresh pinned server per build and repetition,
the builds alternating. For telling a regression from the machine's spread when the scale
target (PUSH at 1,000,000 waiting ≤ 2× at 1,000) moves between runs.

  python3 bench/investigate/ab_scale.py --a OLD.so --b target/release/librmq.so [--reps 3]
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/
import bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="one build of the module")
    ap.add_argument("--b", required=True, help="the other")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sizes", default="1000,1000000")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    res = {}
    # bench's own server (made at import) is not used: its directory goes now.
    bench.SERVER.cleanup()
    for _ in range(a.reps):
        for name, mod in (("a", a.a), ("b", a.b)):
            srv = bench.Server()
            srv.take_module(mod)
            srv.start()
            bench.SERVER = srv
            try:
                for size in sizes:
                    srv.client().flushall()
                    bench.driver_once("fill", 600, peer="rmq", queue="q", messages=size)
                    j = bench.driver_once("scale", 240, peer="rmq", queue="q", cycles=200, depth=100, start=0)
                    res.setdefault((name, size), []).append(j["push"]["usec"] / j["messages"])
            finally:
                srv.cleanup()
    for name, mod in (("a", a.a), ("b", a.b)):
        for size in sizes:
            v = res[(name, size)]
            print(f"{name} ({mod}) N={size:,}: PUSH usec {', '.join(f'{x:.2f}' for x in v)}; "
                  f"median {statistics.median(v):.2f}")
        r = [y / x for x, y in zip(res[(name, sizes[0])], res[(name, sizes[-1])])]
        print(f"{name}: N={sizes[-1]:,} / N={sizes[0]:,} per repetition: {', '.join(f'{x:.2f}' for x in r)}")


if __name__ == "__main__":
    main()
