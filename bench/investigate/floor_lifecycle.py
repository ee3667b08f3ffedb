#!/usr/bin/env python3
"""The floor of `make bench`'s lifecycle ratio (issue 21): what a message's life costs the
server with bare commands when they also keep the in-flight record RMQ must keep.

`make bench` compares RMQ's push + pop + ack with the bare sorted-set moves (ZADD q;
ZPOPMAX q + ZADD prepare; ZREM prepare). RMQ also writes an in-flight record per delivery
(`meta{Q}`: the delivery count and the priority to restore on a rollback, which a replica
must hold too) and deletes it at the ack. This script measures three peers side by side on
one redis-server pinned to core 0 (`taskset -c 0`, the module loaded, a free 127.0.0.1
port, stopped by its pid), the same way as bench.py's CPU section (INFO commandstats usec,
CONFIG RESETSTAT before each peer's lifecycle; N messages of 20 bytes; 100 messages a
command, or 1 with --batch 1; pipelined by 100 commands):

  rmq     RMQ.PUSH q PRIORITY 5 m…; RMQ.POP q COUNT b; RMQ.ACK q m…
  bare    ZADD; ZPOPMAX b + ZADD prepare; ZREM prepare           (bench.py's bare peer)
  record  the same + HSET meta f<m> <3 bytes> after the pop, HDEL meta f<m> with the ZREM

and prints each peer's server usec per message (median of --rounds rounds, the peers'
order turning each round) and the medians of the per-round ratios RMQ/bare, RMQ/record.

    python3 bench/investigate/floor_lifecycle.py [--messages 50000] [--batch 100] [--rounds 5]

The module is bench.py's (RMQ_MODULE, default target/release/librmq.so).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/
import bench  # noqa: E402


def pipelined(r, cmds):
    out = []
    for i in range(0, len(cmds), 100):
        p = r.pipeline(transaction=False)
        for c in cmds[i:i + 100]:
            p.execute_command(*c)
        out += p.execute()
    return out


def lifecycle(r, peer, msgs, b, tag):
    """One peer's push, pop and ack of `msgs`; server usec per message (commandstats)."""
    q, prepare, meta = f"{tag}", f"prepare{{{tag}}}", f"meta{{{tag}}}"
    chunks = [msgs[i:i + b] for i in range(0, len(msgs), b)]
    r.config_resetstat()
    if peer == "rmq":
        pipelined(r, [["RMQ.PUSH", q, "PRIORITY", 5, *c] for c in chunks])
        pipelined(r, [["RMQ.POP", q, "COUNT", b]] * len(chunks))
        pipelined(r, [["RMQ.ACK", q, *c] for c in chunks])
    else:
        pipelined(r, [["ZADD", q, *(x for m in c for x in (5, m))] for c in chunks])
        popped = pipelined(r, [["ZPOPMAX", q, b]] * len(chunks))
        deadline = int(time.time() * 1000) + 30_000
        post = []
        for reply in popped:
            ms = [m for m, _score in reply]
            post.append(["ZADD", prepare, *(x for m in ms for x in (deadline, m))])
            if peer == "record":
                post.append(["HSET", meta, *(x for m in ms for x in (b"f" + m, b"\x01\x05\x00"))])
        pipelined(r, post)
        acks = [["ZREM", prepare, *c] for c in chunks]
        if peer == "record":
            acks = [x for c, z in zip(chunks, acks)
                    for x in (z, ["HDEL", meta, *(b"f" + m.encode() for m in c)])]
        pipelined(r, acks)
    stats = r.info("commandstats")
    left = r.exists(q, prepare, meta)
    if left:
        raise SystemExit(f"{peer}: {left} keys left after the lifecycle")
    return sum(v["usec"] for v in stats.values()) / len(msgs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    server = bench.Server()
    try:
        server.take_module()
        server.start()
        r = server.client()
        msgs = [f"message-{i:012d}" for i in range(a.messages)]
        peers = ["rmq", "bare", "record"]
        got = {p: [] for p in peers}
        for k in range(a.rounds):
            for p in peers[k % 3:] + peers[:k % 3]:
                got[p].append(lifecycle(r, p, msgs, a.batch, f"q{k}{p}"))
            print(f"round {k + 1}: " + ", ".join(f"{p} {got[p][-1]:.2f}" for p in peers), flush=True)
        med = {p: statistics.median(v) for p, v in got.items()}
        ratio = {p: statistics.median(x / y for x, y in zip(got["rmq"], got[p])) for p in ("bare", "record")}
        print(f"server usec per message, batch {a.batch}, {a.messages} messages, median of {a.rounds}: "
              + ", ".join(f"{p} {med[p]:.2f}" for p in peers))
        print(f"RMQ / bare {ratio['bare']:.2f}x; RMQ / bare + in-flight record {ratio['record']:.2f}x")
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
