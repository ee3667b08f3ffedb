"""Shared helpers for the RMQ integration tests (imported by the test modules)."""

import time

import pytest
import redis

from server_support import poll

TWO53 = 2 ** 53
MIN_AT = 946684800000
# tolerance (ms) when comparing a time-based score with the server clock read around a call
TOL = 2


def now_ms(r):
    """The server clock in ms (TIME)."""
    s, us = r.time()
    return s * 1000 + us // 1000


def cmd(r, *args):
    return r.execute_command(*args)


def push(r, q, kind, value, *msgs):
    return r.execute_command("RMQ.PUSH", q, kind, value, *msgs)


def pop(r, q, *opts):
    """RMQ.POP; returns None or a list of (message, deliveries) tuples (shape-checked)."""
    rep = r.execute_command("RMQ.POP", q, *opts)
    if rep is None:
        return None
    assert isinstance(rep, list), f"POP reply must be nil or an array, got {rep!r}"
    out = []
    for e in rep:
        assert isinstance(e, list) and len(e) == 2, f"POP entry must be [message, deliveries]: {e!r}"
        assert isinstance(e[0], bytes) and isinstance(e[1], int), f"bad POP entry types: {e!r}"
        out.append((e[0], e[1]))
    return out


def ack(r, q, *msgs):
    return r.execute_command("RMQ.ACK", q, *msgs)


def nack(r, q, msg, *opts):
    return r.execute_command("RMQ.NACK", q, msg, *opts)


def sweep(r, q, *opts):
    return r.execute_command("RMQ.SWEEP", q, *opts)


def as_bytes(x):
    if isinstance(x, bytes):
        return x
    return str(x).encode()


def prep(q):
    return b"prepare{" + as_bytes(q) + b"}"


def dead(q):
    return b"dead{" + as_bytes(q) + b"}"


def zs(r, key):
    """Members and scores of a sorted set as a dict (empty dict if the key is absent)."""
    return {m: s for m, s in r.zrange(key, 0, -1, withscores=True)}


def zlist(r, key):
    return r.zrange(key, 0, -1, withscores=True)


def state(r, q):
    """(store, prepare, dead) of queue q as dicts member -> score."""
    return zs(r, q), zs(r, prep(q)), zs(r, dead(q))


def snapshot(r):
    """Every key with its type and full contents (no DUMP)."""
    out = {}
    for k in sorted(r.keys("*")):
        t = r.type(k)
        if t == b"zset":
            v = r.zrange(k, 0, -1, withscores=True)
        elif t == b"hash":
            v = sorted(r.hgetall(k).items())
        elif t == b"string":
            v = r.get(k)
        elif t == b"list":
            v = r.lrange(k, 0, -1)
        elif t == b"set":
            v = sorted(r.smembers(k))
        else:
            v = None
        out[k] = (t, v)
    return out


def expect_error(r, *args, contains=()):
    """Run a command that must fail; check substrings; return the error text.

    Option names in upper case (RANGE, AT, ...) are checked case-sensitively, other
    substrings case-insensitively.
    """
    with pytest.raises(redis.ResponseError) as ei:
        r.execute_command(*args)
    msg = str(ei.value)
    if isinstance(contains, str):
        contains = (contains,)
    for sub in contains:
        if sub.isupper():
            assert sub in msg, f"error for {args!r} should mention {sub!r}: {msg!r}"
        else:
            assert sub.lower() in msg.lower(), f"error for {args!r} should mention {sub!r}: {msg!r}"
    return msg


def expect_error_unchanged(r, *args, contains=()):
    """Like expect_error, and assert the command changed no key at all."""
    before = snapshot(r)
    msg = expect_error(r, *args, contains=contains)
    after = snapshot(r)
    assert after == before, f"failing command {args!r} changed the data set"
    return msg


def assert_time_score(score, t0, t1, offset, what="score"):
    lo, hi = t0 + offset - TOL, t1 + offset + TOL
    assert lo <= score <= hi, f"{what} {score} not in [{lo}, {hi}] (now + {offset})"


# pred() until true or timed out; its last value.
wait_until = poll


def wait_due(r, ms_after_now):
    """Sleep on the server clock until ms_after_now ms have passed."""
    target = now_ms(r) + ms_after_now
    while now_ms(r) <= target:
        time.sleep(0.002)


# Pops with a short lease, busy-waits inside the script (so that no server timer can run
# in between) until the lease has run out, then sweeps.  This makes RMQ.SWEEP's reply
# deterministic even though the module also sweeps by itself on a timer.
# NOTE: relies on the module reading the real clock (RedisModule_Milliseconds on 7.0).
POP_EXPIRE_SWEEP = """
local q = KEYS[1]
local pop = {'RMQ.POP', q, 'LEASE', ARGV[2]}
if ARGV[1] ~= '' then
  table.insert(pop, 'COUNT')
  table.insert(pop, ARGV[1])
end
if ARGV[5] == 'IDS' then
  table.insert(pop, 'IDS')
end
local popped = redis.call(unpack(pop))
-- Wait ARGV[3] ms. Valkey freezes TIME inside a script but has os.clock (process CPU
-- time, never ahead of wall time); Redis 7.0 has no os library but a live TIME.
local has_clock, clock = pcall(function() return os.clock end)
local function now_ms()
  if has_clock and clock then return clock() * 1000 end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local start = now_ms()
while now_ms() - start < tonumber(ARGV[3]) do end
local swept
if ARGV[4] == '' then
  swept = redis.call('RMQ.SWEEP', q)
else
  swept = redis.call('RMQ.SWEEP', q, 'LIMIT', ARGV[4])
end
return {popped, swept, redis.call('ZCARD', 'prepare{' .. q .. '}')}
"""


def pop_expire_sweep(r, q, count="", lease=1, wait_ms=5, limit="", ids=False):
    """Atomically: POP [COUNT count] LEASE lease [IDS]; wait wait_ms; SWEEP [LIMIT limit].

    Returns (popped entries as list of tuples or None, sweep reply, ZCARD prepare{q} after).
    """
    popped, swept, left = r.eval(POP_EXPIRE_SWEEP, 1, q, str(count), str(lease), str(wait_ms),
                                 str(limit), "IDS" if ids else "")
    if popped:
        popped = [tuple(e) for e in popped]
    else:
        popped = None
    return popped, swept, left


def info_rmq(r):
    """INFO rmq as a dict; field names are returned without a leading `rmq_` prefix
    (Redis prefixes module INFO fields with the module name)."""
    raw = r.execute_command("INFO", "rmq")
    if isinstance(raw, dict):  # redis-py parsed it
        items = raw.items()
    else:
        if isinstance(raw, bytes):
            raw = raw.decode()
        items = []
        for line in raw.splitlines():
            if not line or line.startswith("#") or ":" not in line:
                continue
            k, v = line.split(":", 1)
            items.append((k, v))
    out = {}
    for k, v in items:
        if isinstance(k, bytes):
            k = k.decode()
        if isinstance(v, bytes):
            v = v.decode()
        if isinstance(v, str):
            try:
                v = int(v)
            except ValueError:
                try:
                    v = float(v)
                except ValueError:
                    pass
        out[k] = v
        if k.startswith("rmq_"):
            out.setdefault(k[4:], v)
    return out


def rmq_info(r, q):
    """RMQ.INFO Q as a dict with str keys."""
    rep = r.execute_command("RMQ.INFO", q)
    if isinstance(rep, dict):
        items = list(rep.items())
    else:
        assert isinstance(rep, list) and len(rep) % 2 == 0, f"RMQ.INFO reply: {rep!r}"
        items = list(zip(rep[0::2], rep[1::2]))
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in items}


def _s(x):
    return x.decode() if isinstance(x, bytes) else x


def config_get_all(r, pattern):
    """CONFIG GET pattern as a dict of str -> str."""
    return {_s(k): _s(v) for k, v in r.config_get(pattern).items()}


def config_get(r, name):
    rep = config_get_all(r, name)
    assert name in rep, f"CONFIG GET {name} returned {rep!r}"
    return rep[name]


def raw_client(server):
    """A client with no response callbacks (replies exactly as sent by the server)."""
    c = server.client()
    c.response_callbacks = type(c.response_callbacks)({})
    return c


def start_replica(start_server, primary, module_args=()):
    """Start a replica of `primary` (a server_support.Server) and wait for its link to be up."""
    # Redis 7 otherwise waits 5 s (repl-diskless-sync-delay) before the first full sync
    primary.client().config_set("repl-diskless-sync-delay", 0)
    rep = start_server(module_args=module_args,
                       extra_conf=["--replicaof", "127.0.0.1", str(primary.port)])
    rc = rep.client()
    ok = wait_until(lambda: rc.info("replication").get("master_link_status") == "up",
                    timeout=10, interval=0.02)
    assert ok, "replica did not connect to its primary"
    # After a diskless full sync, Redis 7.0 streams commands to a replica only once the
    # replica has sent its first ACK (up to a second later): wait until a write flows.
    pc = primary.client()
    pc.set("__replica_probe__", "1")
    ok = wait_until(lambda: rc.get("__replica_probe__") == b"1", timeout=10, interval=0.01)
    pc.delete("__replica_probe__")
    ok = ok and wait_until(lambda: rc.exists("__replica_probe__") == 0, timeout=10, interval=0.01)
    assert ok, "the replication stream does not reach the replica"
    # ... and once the replica has acknowledged it, so that a later WAIT returns at once.
    assert pc.execute_command("WAIT", 1, 10000) >= 1, "replica never acknowledged the primary"
    return rep


def wait_replica_matches(primary_client, replica_client, timeout=3.0):
    """Poll until the replica's whole data set equals the primary's; returns True if so.
    (WAIT can take up to a second on 7.0 before the replica's ACK arrives.)"""
    return wait_until(lambda: snapshot(replica_client) == snapshot(primary_client),
                      timeout=timeout, interval=0.005)


def watched_exec(server, keys, action):
    """WATCH `keys` (one key or a list) on one connection, run action() on another, then
    MULTI/PING/EXEC: True if the transaction ran (the keys were left untouched)."""
    keys = [keys] if isinstance(keys, (str, bytes)) else list(keys)
    w = server.client()
    try:
        with w.pipeline(transaction=True) as p:
            p.watch(*keys)
            action()
            p.multi()
            p.ping()
            try:
                p.execute()
                return True
            except redis.WatchError:
                return False
    finally:
        w.close()
