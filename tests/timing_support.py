"""Support for the timer and blocking tests (tests/test_timers.py, tests/test_blocking.py).

Additions to the harness in conftest.py / helpers.py / server_support.py:

  poll(pred, timeout)            helpers.wait_until, also returning the seconds waited
  gone_at(r, keys)               server ms if none of `keys` exists (one MULTI), else None
  Blocked, BlockedPop            a blocking command (RMQ.POP ...) on its own connection, in a thread
  RawBlocked                     the same over a bare socket, to be dropped while blocked
  wait_blocked(r, n)             wait until INFO rmq blocked_clients == n
  restart_same_dir(srv, down)    Server.restart: stop by pid (SIGTERM) and start again on the
                                 same --dir and port after `down` seconds
  keys_of(r, q)                  every key of queue q with its full content

Every wait here is bounded; servers are only ever stopped by pid (server_support.Server).
"""

import socket
import statistics
import threading
import time

from redis.backoff import NoBackoff
from redis.retry import Retry

from helpers import dead, info_rmq, now_ms, prep, wait_until
from server_support import resp

BLOCK_SOCKET_TIMEOUT = 30


def poll(pred, timeout, interval=0.002):
    """Calls pred until it returns something truthy or `timeout` seconds pass.

    Returns (value, seconds waited); value is pred's last result (falsy on timeout)."""
    start = time.monotonic()
    v = wait_until(pred, timeout, interval)
    return v, time.monotonic() - start


def gone_at(r, keys):
    """The server clock (ms) if none of `keys` exists, read in one MULTI, else None: when a
    poll sees them gone, the time it reports is the server's, not a stalled client's."""
    p = r.pipeline(transaction=True)
    p.time()
    for k in keys:
        p.exists(k)
    (s, us), *present = p.execute()
    return None if any(present) else s * 1000 + us // 1000


def meta(q):
    return b"meta{" + (q if isinstance(q, bytes) else str(q).encode()) + b"}"


def keys_of(r, q):
    """Store, prepare, dead (members with scores) and meta (fields) of queue q."""
    return {
        "store": r.zrange(q, 0, -1, withscores=True),
        "prepare": r.zrange(prep(q), 0, -1, withscores=True),
        "dead": r.zrange(dead(q), 0, -1, withscores=True),
        "meta": sorted(r.hgetall(meta(q)).items()),
    }


def median(xs):
    return statistics.median(xs)


def blocked(r):
    return info_rmq(r).get("blocked_clients")


def wait_blocked(r, n, timeout=3.0):
    """Waits until INFO rmq reports exactly n blocked clients; asserts it happened."""
    v, _ = poll(lambda: blocked(r) == n, timeout)
    assert v, f"rmq_blocked_clients should reach {n}, is {blocked(r)}"


class Blocked(threading.Thread):
    """Runs one blocking command (RMQ.POP, RMQ.TPOP ...) on a dedicated connection in a
    thread.

    After join: .result (the reply; with tuples=True its entries turned into tuples),
    .error (exception or None), .t_start / .t_end (time.monotonic() around the call)."""

    def __init__(self, server, *command, name=None, db=0, tuples=True):
        super().__init__(daemon=True, name=name or f"blocked-{command[0]}")
        # no automatic retry: a dropped connection must not silently re-issue the pop
        self.conn = server.client(socket_timeout=BLOCK_SOCKET_TIMEOUT, db=db,
                                  retry=Retry(NoBackoff(), 0))
        self.conn.ping()  # connected before the clock starts
        self.command = command
        self.tuples = tuples
        self.result = None
        self.error = None
        self.t_start = None
        self.t_end = None

    def run(self):
        self.t_start = time.monotonic()
        try:
            rep = self.conn.execute_command(*self.command)
            if self.tuples and isinstance(rep, list):
                rep = [tuple(e) if isinstance(e, list) else e for e in rep]
            self.result = rep
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            self.t_end = time.monotonic()

    @property
    def elapsed(self):
        return self.t_end - self.t_start

    def finish(self, timeout=5.0):
        """Joins; asserts the call returned (and without error); returns the reply."""
        self.join(timeout)
        assert not self.is_alive(), f"blocked {self.command} did not return"
        self.conn.close()
        if self.error is not None:
            raise self.error
        return self.result


class BlockedPop(Blocked):
    """RMQ.POP <q> <args...> (see `Blocked`)."""

    def __init__(self, server, q, *args, name=None, db=0):
        super().__init__(server, "RMQ.POP", q, *args, name=name or f"blocked-pop-{q}", db=db)
        self.q = q


def start_blocked(server, r, q, *args, expect=None, db=0):
    """Starts a BlockedPop (on database `db`) and waits until the module counts it as
    blocked. `expect` is the blocked_clients value to wait for (default: current + 1)."""
    if expect is None:
        expect = blocked(r) + 1
    t = BlockedPop(server, q, *args, db=db)
    t.start()
    wait_blocked(r, expect)
    return t


class RawBlocked:
    """A bare TCP connection that sends one command and is then left (or dropped)."""

    def __init__(self, server, *args):
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        self.sock.sendall(resp(*args))

    def read_some(self, timeout=0.2):
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(65536)
        except socket.timeout:
            return None

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def restart_same_dir(server, downtime=0.0):
    """Stops the server by pid (SIGTERM: a graceful shutdown, which fsyncs the AOF and,
    with `--save ""`, writes no RDB), waits `downtime` seconds, and starts it again with
    the same --dir, port and arguments. Returns the server (now answering PING)."""
    return server.restart(downtime=downtime)


def wait_replicated(pc, n=1, timeout_ms=1000):
    """WAIT n timeout on the primary; asserts the replica acknowledged."""
    got = pc.execute_command("WAIT", n, timeout_ms)
    assert got >= n, f"WAIT {n} {timeout_ms} returned {got}"


def server_ms(r):
    return now_ms(r)


def observe(r, q, member):
    """One atomic observation (MULTI/EXEC): server ms, and member's score in Q, prepare{Q}
    and dead{Q} (None where absent)."""
    p = r.pipeline(transaction=True)
    p.time()
    p.zscore(q, member)
    p.zscore(prep(q), member)
    p.zscore(dead(q), member)
    (s, us), store, inflight, dd = p.execute()
    return s * 1000 + us // 1000, store, inflight, dd


def watch_rollback(r, q, member, timeout=3.0, interval=0.002):
    """Polls (atomically, with server time) until `member` is no longer in prepare{q}.

    Returns (first observation without it, every observation still in flight), where an
    observation is (server ms, store score, prepare score, dead score). Asserts it left
    prepare within `timeout` seconds. Reads only: no RMQ command is sent."""
    inflight = []
    deadline = time.monotonic() + timeout
    while True:
        ob = observe(r, q, member)
        if ob[2] is None:
            return ob, inflight
        inflight.append(ob)
        assert time.monotonic() < deadline, (
            f"{member!r} still in prepare{{{q}}} after {timeout}s: last observation {ob}")
        time.sleep(interval)


def sleep_until_server_ms(r, t_ms, max_s=5.0):
    """Sleeps until the server clock reaches t_ms (bounded)."""
    deadline = time.monotonic() + max_s
    while now_ms(r) < t_ms:
        assert time.monotonic() < deadline, "server clock did not reach the target time"
        time.sleep(0.002)


def crash_summary(server, backtrace_lines=6):
    """The assertion / signal lines of a crashed server's log and the top of its backtrace."""
    lines = server.log_text().splitlines()
    out = [l for l in lines if "ASSERTION" in l or "==>" in l or "crashed by signal" in l]
    if "Backtrace:" in lines:
        i = lines.index("Backtrace:")
        out += lines[i:i + 1 + backtrace_lines]
    return "\n".join(out) or "(no crash report in the log)"
