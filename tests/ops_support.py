"""Support for tests/test_ops.py, tests/test_events.py and tests/test_metadata.py.

Kept apart from conftest.py / helpers.py (which belong to the harness):

  populate(r, q)              a queue with a waiting, an in-flight and a dead message
  WRONGTYPE_SETUPS            ways to make one of a queue's keys hold another type
  pairs(x)                    a RESP2 flat field/value array (or a RESP3 map) as a dict
  EventListener               keyspace / keyevent notifications, collected up to a marker
  BlockedPop                  RMQ.POP ... BLOCK ... on its own connection, in a thread
  log_wait(server, text)      wait until the server log contains `text`

Every wait is bounded.  Servers are those of conftest.py (server_support.Server), stopped by pid.
"""

import time

from helpers import dead, nack, pop, prep, push
from timing_support import Blocked


def meta(q):
    return b"meta{" + (q if isinstance(q, bytes) else str(q).encode()) + b"}"


def populate(r, q):
    """A priority queue `q` with `w` waiting (priority 1), `f` in flight (delivered with
    priority 2, long lease) and `d` dead (priority 3)."""
    push(r, q, "PRIORITY", 3, "d")
    push(r, q, "PRIORITY", 2, "f")
    push(r, q, "PRIORITY", 1, "w")
    assert pop(r, q, "COUNT", 2, "LEASE", 600000) == [(b"d", 1), (b"f", 1)]
    assert nack(r, q, "d", "DEAD") == b"dead"


# Ways to make one of queue `q`'s keys hold another type (each must make every command on
# `q` answer WRONGTYPE).
def _str_store(r, q):
    r.set(q, "x")


def _list_prepare(r, q):
    r.rpush(prep(q), "x")


def _hash_dead(r, q):
    r.hset(dead(q), "f", "v")


def _str_meta(r, q):
    r.set(meta(q), "x")


def _zset_meta(r, q):
    r.zadd(meta(q), {"x": 1})


WRONGTYPE_SETUPS = {
    "store-string": _str_store,
    "prepare-list": _list_prepare,
    "dead-hash": _hash_dead,
    "meta-string": _str_meta,
    "meta-zset": _zset_meta,
}


def _s(x):
    return x.decode() if isinstance(x, bytes) else x


def pairs(x):
    """A flat field/value array (RESP2) or a dict (RESP3) as a dict with str keys; nested
    field/value arrays are not converted (see `tree`)."""
    if isinstance(x, dict):
        return {_s(k): v for k, v in x.items()}
    assert isinstance(x, list) and len(x) % 2 == 0, f"not a field/value array: {x!r}"
    return {_s(k): v for k, v in zip(x[0::2], x[1::2])}


def tree(x, keys):
    """Converts nested field/value arrays whose fields are all in `keys` into dicts."""
    if isinstance(x, dict):
        return {_s(k): tree(v, keys) for k, v in x.items()}
    if isinstance(x, list):
        if x and len(x) % 2 == 0 and all(isinstance(k, (bytes, str)) and _s(k) in keys
                                         for k in x[0::2]):
            return {_s(k): tree(v, keys) for k, v in zip(x[0::2], x[1::2])}
        return [tree(v, keys) for v in x]
    return _s(x)


MARKER = b"rmq-test-marker"


class EventListener:
    """Subscribes to every keyspace and keyevent channel (all databases) on its own
    connection.  `take()` publishes a marker and returns every notification received
    before it, as a list of (channel, data) byte pairs, so that each check sees exactly
    what the commands since the previous `take()` published."""

    def __init__(self, server):
        self.client = server.client()
        self.ps = self.client.pubsub(ignore_subscribe_messages=True)
        self.ps.psubscribe("__keyspace@*__:*", "__keyevent@*__:*")
        self.ps.subscribe(MARKER)
        # wait for the three subscription confirmations
        self.ps.ignore_subscribe_messages = False
        confirmed = 0
        deadline = time.monotonic() + 5
        while confirmed < 3 and time.monotonic() < deadline:
            m = self.ps.get_message(timeout=0.5)
            if m and m["type"] in ("subscribe", "psubscribe"):
                confirmed += 1
        assert confirmed == 3, "pubsub subscriptions not confirmed"
        self.ps.ignore_subscribe_messages = True
        self.seq = 0

    def _read(self, until_marker=None, timeout=5.0):
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.ps.get_message(timeout=0.05)
            if m is None:
                if until_marker is None:
                    break
                continue
            if m["channel"] == MARKER:
                if until_marker is not None and m["data"] == until_marker:
                    return out
                continue
            out.append((m["channel"], m["data"]))
        assert until_marker is None, "marker not received: pubsub connection lost?"
        return out

    def take(self):
        self.seq += 1
        tag = str(self.seq).encode()
        self.client.publish(MARKER, tag)
        return self._read(until_marker=tag)

    def wait_for(self, pred, timeout=3.0):
        """Reads notifications until pred(list so far) is true or timeout; returns the list."""
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.ps.get_message(timeout=0.02)
            if m is not None and m["channel"] != MARKER:
                got.append((m["channel"], m["data"]))
            if pred(got):
                break
        return got

    def close(self):
        try:
            self.ps.close()
        finally:
            self.client.close()


def keyspace(notes, db=0):
    """The keyspace notifications of db `db` as (key, event) pairs, in order."""
    prefix = f"__keyspace@{db}__:".encode()
    return [(c[len(prefix):], d) for c, d in notes if c.startswith(prefix)]


def keyevent(notes, db=0):
    """The keyevent notifications of db `db` as (event, key) pairs, in order."""
    prefix = f"__keyevent@{db}__:".encode()
    return [(c[len(prefix):], d) for c, d in notes if c.startswith(prefix)]


class BlockedPop(Blocked):
    """RMQ.POP q <args> on its own connection, in a thread, started at once; `finish()`
    returns the raw reply."""

    def __init__(self, server, q, *args):
        super().__init__(server, "RMQ.POP", q, *args, tuples=False)
        self.start()


def blocked_clients(r):
    raw = r.execute_command("INFO", "rmq")
    if isinstance(raw, bytes):
        raw = raw.decode()
    if isinstance(raw, dict):
        return int(raw.get("rmq_blocked_clients", 0))
    for line in raw.splitlines():
        if line.startswith("rmq_blocked_clients:"):
            return int(line.split(":", 1)[1])
    return 0


def wait_blocked(r, n, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if blocked_clients(r) == n:
            return True
        time.sleep(0.002)
    return False


def log_wait(server, text, timeout=3.0):
    deadline = time.monotonic() + timeout
    while True:
        log = server.log_text()
        if text in log or time.monotonic() >= deadline:
            return log
        time.sleep(0.02)

