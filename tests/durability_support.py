"""A seeded random workload of every RMQ command, and full key dumps to compare servers.

Used by test_replication.py and test_persistence.py.  The workload keeps one kind per queue
(so no command is expected to fail) and draws contents from a small pool per queue, so that
merges, copies that are waiting and in flight at once, redeliveries, deaths and replays all
happen.  Leases are short (tens to hundreds of ms: the server timer rolls them back during
the run) or long (LONG_LEASE and more: they stay in flight during the checks).
"""

import random
import threading
import time

from helpers import prep, snapshot

LONG_LEASE = 90_000
# after settle(), no lease runs out for at least this long
SETTLED_MS = 30_000

QUEUES = {
    "wl:range": "range",
    "wl:prio": "priority",
    "wl:at": "at",
    "wl:delay": "delay",
}


def now_ms():
    return int(time.time() * 1000)


class Workload:
    """Random commands against one server (the primary), from a seeded RNG."""

    def __init__(self, r, seed, queues=None, long_only=False, pool=24):
        self.r = r
        self.rng = random.Random(seed)
        self.queues = dict(queues or QUEUES)
        self.long_only = long_only
        self.pool = {q: self._pool(q, pool) for q in self.queues}
        self.inflight = {q: [] for q in self.queues}   # believed in flight (may be stale)
        self.counts = {}
        self.replies = {}

    def _pool(self, q, n):
        out = []
        for i in range(n):
            if i % 6 == 5:
                out.append(b"bin\x00\xff\x01" + q.encode() + b"-%d" % i)   # binary content
            else:
                out.append(b"%s-m%d" % (q.encode(), i))
        return out

    # -- helpers -----------------------------------------------------------------------
    def _lease(self):
        if self.long_only or self.rng.random() < 0.35:
            return LONG_LEASE + self.rng.randrange(0, 30_000)
        return self.rng.randrange(20, 400)

    def _msgs(self, q, lo=1, hi=4):
        return self.rng.sample(self.pool[q], self.rng.randint(lo, hi))

    def _pick_inflight(self, q):
        lst = self.inflight[q]
        if lst and self.rng.random() < 0.85:
            return lst.pop(self.rng.randrange(len(lst)))
        return self.rng.choice(self.pool[q])  # maybe not in flight: nil / 0 paths

    def _cmd(self, name, *args):
        self.counts[name] = self.counts.get(name, 0) + 1
        rep = self.r.execute_command(name, *args)
        small = rep is None or isinstance(rep, bytes) or (isinstance(rep, int) and rep < 1000)
        key = (name, repr(rep) if small else type(rep).__name__)
        self.replies[key] = self.replies.get(key, 0) + 1
        return rep

    # -- operations ----------------------------------------------------------------------
    def op_push(self, q):
        kind = self.queues[q]
        msgs = self._msgs(q, 1, 5)
        if kind == "range":
            opt = ("RANGE", self.rng.randrange(1, 300))
        elif kind == "priority":
            p = self.rng.choice([self.rng.randrange(-50, 50), 2 ** 53, -(2 ** 53)])
            opt = ("PRIORITY", p)
        elif kind == "at":
            opt = ("AT", now_ms() + self.rng.randrange(-5000, 400))
        else:
            opt = ("DELAY", self.rng.randrange(0, 300))
        self._cmd("RMQ.PUSH", q, *opt, *msgs)

    def op_pop(self, q):
        args = ["COUNT", self.rng.randint(1, 6), "LEASE", self._lease()]
        if self.rng.random() < 0.1:
            args += ["BLOCK", self.rng.randrange(1, 30)]
        rep = self._cmd("RMQ.POP", q, *args)
        for m, _n in rep or []:
            self.inflight[q].append(m)
        del self.inflight[q][:-200]

    def op_ack(self, q):
        n = self.rng.randint(1, 3)
        self._cmd("RMQ.ACK", q, *[self._pick_inflight(q) for _ in range(n)])

    def op_nack(self, q):
        m = self._pick_inflight(q)
        x = self.rng.random()
        if x < 0.2:
            self._cmd("RMQ.NACK", q, m, "DEAD")
        elif x < 0.5 and self.queues[q] != "priority":
            self._cmd("RMQ.NACK", q, m, "DELAY", self.rng.randrange(0, 300))
        else:
            self._cmd("RMQ.NACK", q, m)

    def op_sweep(self, q):
        if self.rng.random() < 0.5:
            self._cmd("RMQ.SWEEP", q)
        else:
            self._cmd("RMQ.SWEEP", q, "LIMIT", self.rng.randint(1, 3))

    def op_extend(self, q):
        m = self._pick_inflight(q)
        self.inflight[q].append(m)
        self._cmd("RMQ.EXTEND", q, m, self._lease())

    def op_cancel(self, q):
        self._cmd("RMQ.CANCEL", q, *self._msgs(q, 1, 3))

    def op_replay(self, q):
        if self.rng.random() < 0.5:
            self._cmd("RMQ.REPLAY", q)
        else:
            self._cmd("RMQ.REPLAY", q, "COUNT", self.rng.randint(1, 3))

    def op_read(self, q):
        self._cmd(self.rng.choice(["RMQ.INFO", "RMQ.PENDING"]), q)

    OPS = [(op_push, 30), (op_pop, 25), (op_ack, 12), (op_nack, 10), (op_sweep, 4),
           (op_extend, 5), (op_cancel, 4), (op_replay, 4), (op_read, 3)]

    def step(self):
        q = self.rng.choice(sorted(self.queues))
        fns, weights = zip(*self.OPS)
        fn = self.rng.choices(fns, weights)[0]
        fn(self, q)

    def run(self, seconds=None, steps=None):
        t_end = time.monotonic() + (seconds or 1e9)
        n = 0
        while time.monotonic() < t_end and (steps is None or n < steps):
            self.step()
            n += 1
        return n


class BlockingConsumer(threading.Thread):
    """Blocking pops (BLOCK) on a few queues from its own connection; acks or nacks most of
    what it gets, leaves some leases to run out.  Deliveries made when a blocked client is
    served are replicated like any other."""

    def __init__(self, client, queues, seed):
        super().__init__(daemon=True)
        self.r = client
        self.queues = list(queues)
        self.rng = random.Random(seed)
        self.stop_flag = threading.Event()
        self.error = None
        self.got = 0

    def run(self):
        try:
            while not self.stop_flag.is_set():
                q = self.rng.choice(self.queues)
                rep = self.r.execute_command("RMQ.POP", q, "COUNT", 2, "LEASE",
                                             self.rng.randrange(50, 300), "BLOCK", 50)
                for m, _n in rep or []:
                    self.got += 1
                    x = self.rng.random()
                    if x < 0.6:
                        self.r.execute_command("RMQ.ACK", q, m)
                    elif x < 0.8:
                        self.r.execute_command("RMQ.NACK", q, m)
        except Exception as e:  # reported by the test
            self.error = e

    def stop(self):
        self.stop_flag.set()
        self.join(timeout=5)
        assert not self.is_alive(), "blocking consumer did not stop"
        if self.error is not None:
            raise self.error


def queue_names(r):
    """The queues present on a server (from the names of their keys)."""
    out = set()
    for k in r.keys("*"):
        for pre in (b"prepare{", b"dead{", b"meta{"):
            if k.startswith(pre) and k.endswith(b"}"):
                out.add(k[len(pre):-1])
                break
        else:
            out.add(k)
    return out


def soon_expiring(r, within_ms):
    """Leases (queue, message, deadline) that run out within `within_ms` from now, on any queue."""
    limit = now_ms() + within_ms
    out = []
    for q in queue_names(r):
        for m, s in r.zrangebyscore(prep(q), "-inf", limit, withscores=True):
            out.append((q, m, int(s)))
    return out


def settle(r, timeout=5.0):
    """Wait until the server timer has rolled back every lease that would run out within
    SETTLED_MS, so nothing changes by itself for a while. Returns the time it took."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while True:
        left = soon_expiring(r, SETTLED_MS)
        if not left:
            return time.monotonic() - t0
        if time.monotonic() > deadline:
            raise AssertionError(f"leases not rolled back by the server timer within {timeout}s: "
                                 f"{left[:5]} (now {now_ms()})")
        time.sleep(0.02)


def dump(r):
    """Every key of the server with its type and exact contents (helpers.snapshot)."""
    return snapshot(r)


def diff(a, b, name_a="a", name_b="b", limit=8):
    """Human-readable differences between two dumps ('' when equal)."""
    if a == b:
        return ""
    lines = []
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    if only_a:
        lines.append(f"keys only on {name_a}: {only_a[:limit]}")
    if only_b:
        lines.append(f"keys only on {name_b}: {only_b[:limit]}")
    for k in sorted(set(a) & set(b)):
        if a[k] != b[k]:
            ta, va = a[k]
            tb, vb = b[k]
            if ta != tb:
                lines.append(f"{k!r}: type {ta} on {name_a}, {tb} on {name_b}")
                continue
            da, db = dict(va), dict(vb)
            d = [(m, da.get(m), db.get(m)) for m in sorted(set(da) | set(db)) if da.get(m) != db.get(m)]
            lines.append(f"{k!r} differs (member, {name_a}, {name_b}): {d[:limit]}")
        if len(lines) > 3 * limit:
            break
    return "\n".join(lines)


def assert_same(a, b, name_a="a", name_b="b"):
    d = diff(a, b, name_a, name_b)
    assert not d, f"key dumps differ:\n{d}"


def nonempty_states(d):
    """Counts of (waiting, in flight, dead) members over all queues of a dump."""
    w = f = x = 0
    for k, (t, v) in d.items():
        if t != b"zset":
            continue
        if k.startswith(b"prepare{"):
            f += len(v)
        elif k.startswith(b"dead{"):
            x += len(v)
        else:
            w += len(v)
    return w, f, x

