"""Where a command's instructions go: runs redis-server with a module under valgrind
--tool=callgrind, sends N unbatched RMQ.PUSH (PRIORITY 5; with GROUPED=1 in 1,000 groups),
N RMQ.POP, N RMQ.ACK (100 per round trip), then N ZADD and N ZPOPMAX as the bare peer, and
dumps one profile per phase (callgrind_control -z before, -d after). With BATCH=b, each
command carries b messages (PUSH and ACK with b messages, POP COUNT b, ZADD with b members,
ZPOPMAX b): N/b commands per phase, so divide by N for the cost per message. Read a phase with
`callgrind_annotate --inclusive=yes <dir>/cg.<pid>.<k>` and divide by N
(scripts/results/profile_v3.md has the figures).

    python3 scripts/profile_commands.py target/release/librmq.so /tmp/cg 3000

The server runs on a free port and is stopped by its pid.
"""

import os
import socket
import subprocess
import sys
import time

import redis


def main():
    module, out = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
    grouped = os.environ.get("GROUPED") == "1"
    batch = int(os.environ.get("BATCH", "1"))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.makedirs(out, exist_ok=True)
    server = subprocess.Popen(["valgrind", "--tool=callgrind", "--dump-instr=no", "--dump-line=no",
                               f"--callgrind-out-file={out}/cg.%p", "redis-server", "--port", str(port),
                               "--save", "", "--appendonly", "no", "--loadmodule", os.path.abspath(module)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port)
        deadline = time.time() + 60   # valgrind starts slowly
        while True:
            try:
                r.ping()
                break
            except redis.ConnectionError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)

        def phase(name, cmds):
            subprocess.run(["callgrind_control", "-z", str(server.pid)], capture_output=True, check=True)
            for i in range(0, len(cmds), 100):
                p = r.pipeline(transaction=False)
                for c in cmds[i:i + 100]:
                    p.execute_command(*c)
                p.execute()
            subprocess.run(["callgrind_control", "-d", name, str(server.pid)], capture_output=True, check=True)

        msgs = [f"message-{i:012d}" for i in range(n)]
        group = (lambda i: ["GROUP", f"g{i % 1000}"]) if grouped else (lambda i: [])
        if batch == 1:
            phase("push", [["RMQ.PUSH", "q", "PRIORITY", 5, *group(i), m] for i, m in enumerate(msgs)])
            phase("pop", [["RMQ.POP", "q"]] * n)
            phase("ack", [["RMQ.ACK", "q", m] for m in msgs])
            phase("zadd", [["ZADD", "z", 5, m] for m in msgs])
            phase("zpop", [["ZPOPMAX", "z"]] * n)
        else:
            # A batch shares one group (a push takes one GROUP).
            chunks = [msgs[i:i + batch] for i in range(0, n, batch)]
            phase("push", [["RMQ.PUSH", "q", "PRIORITY", 5, *group(k), *c] for k, c in enumerate(chunks)])
            phase("pop", [["RMQ.POP", "q", "COUNT", batch]] * len(chunks))
            phase("ack", [["RMQ.ACK", "q", *c] for c in chunks])
            phase("zadd", [["ZADD", "z", *(x for m in c for x in (5, m))] for c in chunks])
            phase("zpop", [["ZPOPMAX", "z", batch]] * len(chunks))
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    main()
