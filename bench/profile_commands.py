"""Where a command's instructions go: runs redis-server with a module under valgrind
--tool=callgrind, sends N unbatched RMQ.PUSH (PRIORITY 5; with GROUPED=1 in 1,000 groups),
N RMQ.POP, N RMQ.ACK (100 per round trip), then the bare peers: N ZADD and N ZPOPMAX, and the
rest of `make bench`'s bare lifecycle (ZADD prepare, ZREM prepare of the popped members) with
the in-flight record RMQ keeps and the bare peer does not (HSET meta, HDEL meta); and
dumps one profile per phase (callgrind_control -z before, -d after). With BATCH=b, each
command carries b messages (PUSH and ACK with b messages, POP COUNT b, ZADD with b members,
ZPOPMAX b): N/b commands per phase, so divide by N for the cost per message. Read a phase with
`callgrind_annotate --inclusive=yes <dir>/cg_<phase>.out` and divide by N
(docs/perf/profile_v3.md has the figures). At the end it prints `call()` (Redis's
command execution, what INFO commandstats times) per message for each phase, and the
lifecycle ratios to the bare peer with and without the record.

    python3 bench/profile_commands.py target/release/librmq.so /tmp/cg 3000

The server runs on a free port and is stopped by its pid.
"""

import os
import shutil
import sys
from pathlib import Path

import harness
from harness.callgrind import Callgrind, inclusive


def main():
    module, out = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
    grouped = os.environ.get("GROUPED") == "1"
    batch = int(os.environ.get("BATCH", "1"))
    os.makedirs(out, exist_ok=True)
    server = harness.Server(module=os.path.abspath(module), tag="rmq-profile")
    meter = Callgrind(server)
    server.start()
    per = {}
    try:
        r = server.client(protocol=None)

        def phase(name, cmds):
            meter.zero()
            for i in range(0, len(cmds), 100):
                p = r.pipeline(transaction=False)
                for c in cmds[i:i + 100]:
                    p.execute_command(*c)
                p.execute()
            kept = shutil.move(meter.dump(name), Path(out) / f"cg_{name}.out")
            per[name] = inclusive(kept, ["call"])[0] / n
            print(f"{name:6} call() {per[name]:10,.0f} a message")

        # The bare peer's sets and hash begin in their big encodings, as RMQ's keys do (the
        # module converts its own early); else a hash's first 512 fields (listpack) dominate.
        r.zadd("zp", {f"pad-{i}": 0 for i in range(200)})
        r.hset("h", mapping={f"pad-{i}": "x" for i in range(600)})
        msgs = [f"message-{i:012d}" for i in range(n)]
        group = (lambda i: ["GROUP", f"g{i % 1000}"]) if grouped else (lambda i: [])
        if batch == 1:
            phase("push", [["RMQ.PUSH", "q", "PRIORITY", 5, *group(i), m] for i, m in enumerate(msgs)])
            phase("pop", [["RMQ.POP", "q"]] * n)
            phase("ack", [["RMQ.ACK", "q", m] for m in msgs])
            phase("zadd", [["ZADD", "z", 5, m] for m in msgs])
            phase("zpop", [["ZPOPMAX", "z"]] * n)
            phase("zprep", [["ZADD", "zp", 1, m] for m in msgs])
            phase("hset", [["HSET", "h", m, "\x01\x05"] for m in msgs])
            phase("zrem", [["ZREM", "zp", m] for m in msgs])
            phase("hdel", [["HDEL", "h", m] for m in msgs])
        else:
            # A batch shares one group (a push takes one GROUP).
            chunks = [msgs[i:i + batch] for i in range(0, n, batch)]
            phase("push", [["RMQ.PUSH", "q", "PRIORITY", 5, *group(k), *c] for k, c in enumerate(chunks)])
            phase("pop", [["RMQ.POP", "q", "COUNT", batch]] * len(chunks))
            phase("ack", [["RMQ.ACK", "q", *c] for c in chunks])
            phase("zadd", [["ZADD", "z", *(x for m in c for x in (5, m))] for c in chunks])
            phase("zpop", [["ZPOPMAX", "z", batch]] * len(chunks))
            phase("zprep", [["ZADD", "zp", *(x for m in c for x in (1, m))] for c in chunks])
            phase("hset", [["HSET", "h", *(x for m in c for x in (m, "\x01\x05"))] for c in chunks])
            phase("zrem", [["ZREM", "zp", *c] for c in chunks])
            phase("hdel", [["HDEL", "h", *c] for c in chunks])
    finally:
        server.stop()
    rmq = per["push"] + per["pop"] + per["ack"]
    bare = per["zadd"] + per["zpop"] + per["zprep"] + per["zrem"]
    record = per["hset"] + per["hdel"]
    print(f"lifecycle: RMQ {rmq:,.0f}; bare {bare:,.0f} (ratio {rmq / bare:.2f}); "
          f"bare + the in-flight record {bare + record:,.0f} (ratio {rmq / (bare + record):.2f})")


if __name__ == "__main__":
    main()
