"""RMQ.QUEUES [MATCH pattern] [COUNT n] [CURSOR c] (docs/COMMANDS.md: RMQ.QUEUES): the queues this server
holds (any queue with a `{Q}`-tagged key; a sorted set alone is none: test_queue_membership.py),
SCAN-like; every queue present for the whole iteration returned
at least once, COUNT bounding each reply; MATCH a Redis glob; ACL-filtered; the registry kept
through emptying, DEL, EXPIRE, RENAME, MOVE, FLUSH, SWAPDB, DEBUG RELOAD, a restart and a
promotion; node-local under Cluster."""

import pytest
import redis

from cluster_support import Cluster
from helpers import ack, expect_error, pop, push, start_replica, wait_replica_matches, wait_until

# Creates n sorted sets dead{q:<i>} (a queue's tagged key written by another command makes a
# queue).
ZADD_MANY = """
for i = 1, tonumber(ARGV[1]) do redis.call('ZADD', 'dead{' .. ARGV[2] .. i .. '}', 1, 'm') end
return 1
"""


def page(r, *args):
    cursor, names = r.execute_command("RMQ.QUEUES", *args)
    return cursor, names


def all_queues(r, *args, count=None, on_page=None):
    """Iterates to the end; returns every name (with repeats) in order."""
    cursor, seen = b"0", []
    opts = list(args) + (["COUNT", count] if count else [])
    for _ in range(100_000):
        cursor, names = page(r, *opts, "CURSOR", cursor)
        seen += names
        if on_page:
            on_page(names)
        if cursor == b"0":
            return seen
    raise AssertionError("RMQ.QUEUES never returned cursor 0")


def listed(r, *args):
    return sorted(all_queues(r, *args))


def test_any_queue_with_a_key_is_listed(r):
    push(r, "waiting", "DELAY", 60000, "a")
    push(r, "inflight", "PRIORITY", 1, "a")
    pop(r, "inflight")
    push(r, "dead", "PRIORITY", 1, "a")
    pop(r, "dead")
    r.execute_command("RMQ.NACK", "dead", "a", "DEAD")
    r.execute_command("RMQ.POLICY", "policy", "SET", "retries", 1)
    r.zadd("zadded", {"m": 1})
    r.hset("sched{scheduled}", "s", "x")
    r.set("string", "x")
    r.hset("hash", "f", "v")
    r.zadd("a{b}c", {"m": 1})
    assert listed(r) == [b"dead", b"inflight", b"policy", b"scheduled", b"waiting"]
    assert page(r, "COUNT", 10000) == (b"0", [b"dead", b"inflight", b"policy", b"scheduled",
                                                b"waiting"])
    assert page(r) == page(r, "CURSOR", 0)


def test_queues_vanish_when_their_last_key_goes(r):
    push(r, "q", "PRIORITY", 1, "a")
    assert listed(r) == [b"q"]
    pop(r, "q")
    assert listed(r) == [b"q"], "in flight"
    ack(r, "q", "a")
    assert listed(r) == [], "emptied by the module"
    push(r, "q", "PRIORITY", 1, "a")
    r.delete("q", "meta{q}")
    assert listed(r) == []
    r.execute_command("RMQ.POLICY", "p", "SET", "rate", 3)
    assert listed(r) == [b"p"]
    assert r.execute_command("RMQ.POLICY", "p", "RESET") == 1
    assert listed(r) == []
    r.zadd("z", {"m": 1})
    r.zrem("z", "m")
    assert listed(r) == []
    r.zadd("e", {"m": 1})
    r.pexpire("e", 50)
    assert wait_until(lambda: listed(r) == [], timeout=5), "expired"
    push(r, "old", "PRIORITY", 1, "a", "b")
    pop(r, "old")
    for k in (b"old", b"prepare{old}", b"meta{old}"):
        r.rename(k, k.replace(b"old", b"new"))
    assert listed(r) == [b"new"]
    r.move("new", 3)
    assert listed(r) == [b"new"], "its other keys stay"
    r.delete("prepare{new}", "meta{new}")
    assert listed(r) == []
    r.zadd("dead{old}", {"m": 1})
    r.move("dead{old}", 3)
    r.select(3)
    assert listed(r) == [b"old"], "moved to db 3 (`new` alone there is no queue)"
    r.select(0)
    r.set("s", "x")
    r.zadd("s2", {"m": 1})
    r.set("s2", "overwritten")
    assert listed(r) == [], "an entry that outlived its key is dropped when met"


def test_flush_swapdb_select(r):
    push(r, "a", "PRIORITY", 1, "m")
    r.execute_command("SELECT", 1)
    push(r, "b", "PRIORITY", 1, "m")
    assert listed(r) == [b"b"]
    r.execute_command("SWAPDB", 0, 1)
    assert listed(r) == [b"a"]
    r.flushdb()
    assert listed(r) == []
    r.execute_command("SELECT", 0)
    assert listed(r) == [b"b"]
    r.flushall()
    assert listed(r) == []


def test_match_is_a_redis_glob_binary_safe(r):
    names = [b"orders_1", b"orders_2", b"orders_10", b"order", b"hello", b"hallo", b"hxllo",
             b"a*b", b"a\x00\xffz", b"[x]"]
    for n in names:
        push(r, n, "PRIORITY", 1, "m")
    assert listed(r, "MATCH", "orders_*") == [b"orders_1", b"orders_10", b"orders_2"]
    assert listed(r, "MATCH", "orders_?") == [b"orders_1", b"orders_2"]
    assert listed(r, "MATCH", "h[ae]llo") == [b"hallo", b"hello"]
    assert listed(r, "MATCH", "h[^e]llo") == [b"hallo", b"hxllo"]
    assert listed(r, "MATCH", "h[a-f]llo") == [b"hallo", b"hello"]
    assert listed(r, "MATCH", "a\\*b") == [b"a*b"]
    assert listed(r, "MATCH", "\\[x\\]") == [b"[x]"]
    assert listed(r, "MATCH", b"a\x00*") == [b"a\x00\xffz"]
    assert listed(r, "MATCH", "*") == sorted(names)
    assert listed(r, "MATCH", "nothing*") == []
    # COUNT bounds the names visited, matching or not: a page may be short, even empty
    cursor, got = page(r, "MATCH", "h*", "COUNT", 1)
    assert cursor != b"0" and got == [b"hallo"]


def test_every_queue_of_100k_seen_with_count_respected(r):
    n = 100_000
    r.eval(ZADD_MANY, 0, n, "q:")
    for i in range(10):
        push(r, f"rmq:{i}", "DELAY", 0, "m")
    expect = {f"q:{i}".encode() for i in range(1, n + 1)} | {f"rmq:{i}".encode() for i in range(10)}
    sizes = []
    churn = iter(range(10**6))

    def changing(names):
        sizes.append(len(names))
        # queues come and go meanwhile: those present throughout are still all seen
        i = next(churn)
        push(r, f"new:{i}", "DELAY", 0, "m")
        r.delete(f"dead{{q:{i + 1}}}") if i < 50 else None

    seen = all_queues(r, count=1000, on_page=changing)
    assert max(sizes) <= 1000
    assert len(sizes) <= n // 1000 + 60
    assert expect - {f"q:{i}".encode() for i in range(1, 51)} <= set(seen)
    assert len(seen) == len(set(seen)), "a stable order: no name twice"
    assert len(all_queues(r, "MATCH", "rmq:*", count=10000)) == 10
    stats = r.info("commandstats")["cmdstat_rmq.queues"]
    assert stats["calls"] >= len(sizes)


def test_errors(r):
    push(r, "q", "PRIORITY", 1, "m")
    for args, word in [(["COUNT", 0], "COUNT"), (["COUNT", 10001], "COUNT"), (["COUNT", "x"], "COUNT"),
                       (["COUNT"], "syntax"), (["CURSOR", "xyz"], "CURSOR"), (["CURSOR", "-1"], "CURSOR"),
                       (["CURSOR", "abc"], "CURSOR"), (["LIMIT", 5], "syntax"), (["MATCH"], "syntax")]:
        expect_error(r, "RMQ.QUEUES", *args, contains=word)
    assert page(r, "COUNT", 10000) == (b"0", [b"q"])


def test_cursors_the_server_did_not_hand_out_are_refused(server, r):
    """A cursor opens only unchanged, in the database and for the user it was handed to;
    anything else is `ERR invalid CURSOR` (and changes nothing: no name is dropped)."""
    for q in ("a", "b", "c"):
        push(r, q, "PRIORITY", 1, "m")
    cursor, got = page(r, "COUNT", 1)
    assert got == [b"a"] and cursor != b"0"
    flipped = cursor[:30] + (b"1" if cursor[30:31] == b"0" else b"0") + cursor[31:]
    for bad in [b"a".hex(), b"b".hex(), b"zz".hex(), cursor[:-2], cursor[:-1], cursor[:24], flipped,
                cursor + b"00", b"00" + cursor, cursor + b"x", b"xyz", b"-1", b"", b"1"]:
        expect_error(r, "RMQ.QUEUES", "CURSOR", bad, contains="invalid CURSOR")
    r.execute_command("ACL", "SETUSER", "other", "on", ">pw", "~*", "+@all")
    try:
        expect_error(server.client(username="other", password="pw"), "RMQ.QUEUES", "CURSOR", cursor,
                     contains="invalid CURSOR")
    finally:
        r.execute_command("ACL", "DELUSER", "other")
    other_db = server.client(db=1)
    push(other_db, "a", "PRIORITY", 1, "m")
    expect_error(other_db, "RMQ.QUEUES", "CURSOR", cursor, contains="invalid CURSOR")
    other_db.flushdb()
    # the cursor still works where it was handed out; a name gone meanwhile is no matter
    r.delete("a")
    assert page(r, "CURSOR", cursor) == (b"0", [b"b", b"c"])
    assert page(r, "CURSOR", cursor) == (b"0", [b"b", b"c"]), "a cursor may be used again"


def test_acl_cursor_carries_no_hidden_name(server, r):
    """Issue 31: `ACL SETUSER lim on >p ~app:* +@all`; a cursor once spelled the hidden name
    the listing stopped at, and any hex string was taken as a cursor."""
    for q in ("app:1", "app:2", "secret_payroll", "zz_hidden"):
        push(r, q, "PRIORITY", 1, "m")
    hidden = [b"secret_payroll", b"zz_hidden"]
    r.execute_command("ACL", "SETUSER", "lim", "on", ">p", "resetkeys", "~app:*", "+@all")
    try:
        u = server.client(username="lim", password="p")
        expect_error(u, "RMQ.QUEUES", "COUNT", 1, "CURSOR", b"app:1".hex(), contains="invalid CURSOR")
        cursor, seen, cursors = b"0", [], []
        while True:
            cursor, names = page(u, "COUNT", 1, "CURSOR", cursor)
            seen += names
            cursors.append(cursor)
            if cursor == b"0":
                break
        assert seen == [b"app:1", b"app:2"]
        assert len(cursors) == 2 and cursors[-1] == b"0", "hidden names are not visited"
        for c in cursors[:-1]:
            for name in hidden + [b"app:1", b"app:2"]:
                assert name not in c and name.hex().encode() not in c and name not in bytes.fromhex(c.decode())
    finally:
        r.execute_command("ACL", "DELUSER", "lim")


VISIBLE = [f"app:{i}" for i in range(25)] + ["b", "b1", "app:1x"]
# Interleaved with the visible names, sharing their prefixes, before and after them all.
HIDDEN = ["a", "app:", "app:0s", "app:1s", "app:1y", "app:123", "app:x", "app:9z", "b0", "bz", "zz"] + [
    f"app:s{i}" for i in range(30)]
# The same sequences of calls on both servers: (COUNT, MATCH).
LISTINGS = [(c, m) for c in (1, 2, 3, 7, 100) for m in (None, "app:*", "app:1*", "app:s*", "*1*", "b*", "zz")]


def _listing(u, count, match):
    """The pages of one iteration, each as (names, ended, cursor length)."""
    opts = ["COUNT", count] + (["MATCH", match] if match else [])
    cursor, pages = b"0", []
    for _ in range(1000):
        cursor, names = page(u, *opts, "CURSOR", cursor)
        pages.append((names, cursor == b"0", len(cursor)))
        if cursor == b"0":
            return pages
    raise AssertionError("RMQ.QUEUES never returned cursor 0")


def test_acl_hidden_queues_change_no_reply(server, r, start_server):
    """A user learns nothing of the queues its ACL hides (names, a shared prefix, how many):
    every page, the end of iteration and the cursor's length are what a server without them
    answers, call by call."""
    other = start_server()
    bare = other.client()
    for q in VISIBLE:
        for c in (r, bare):
            push(c, q, "PRIORITY", 1, "m")
    for q in HIDDEN:
        push(r, q, "PRIORITY", 1, "m")
    rules = ["on", ">pw", "resetkeys", "~app:[0-9]", "~app:[0-9][0-9]", "~app:1x", "~b", "~b1", "+@all"]
    for c in (r, bare):
        c.execute_command("ACL", "SETUSER", "blind", *rules)
    try:
        u, v = server.client(username="blind", password="pw"), other.client(username="blind", password="pw")
        for count, match in LISTINGS:
            got, want = _listing(u, count, match), _listing(v, count, match)
            assert got == want, (count, match)
        assert sorted(n for names, _, _ in _listing(u, 3, None) for n in names) == sorted(q.encode() for q in VISIBLE)
        assert _listing(u, 5, "app:s*") == [([], True, 1)], "only hidden names match: one empty page"
    finally:
        r.execute_command("ACL", "DELUSER", "blind")


def test_acl_leaves_out_queues_the_caller_may_not_read(server, r):
    for q in ("pub_a", "pub_b", "secret"):
        push(r, q, "PRIORITY", 1, "m")
    r.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "resetkeys", "~pub_*", "+@all")
    r.execute_command("ACL", "SETUSER", "writer", "on", ">pw", "resetkeys", "%W~*", "+@all")
    try:
        u = server.client(username="reader", password="pw")
        assert listed(u) == [b"pub_a", b"pub_b"]
        w = server.client(username="writer", password="pw")
        assert listed(w) == [], "write-only keys are not readable"
        r.execute_command("ACL", "SETUSER", "reader", "~secret")
        assert listed(u) == [b"pub_a", b"pub_b", b"secret"], "rules changed: seen at once"
        r.execute_command("ACL", "SETUSER", "reader", "-rmq.queues")
        with pytest.raises(redis.exceptions.NoPermissionError):
            u.execute_command("RMQ.QUEUES")
    finally:
        r.execute_command("ACL", "DELUSER", "reader", "writer")


def test_debug_reload_and_restart(start_server):
    s = start_server(extra_conf=["--enable-debug-command", "yes", "--appendonly", "yes"])
    c = s.client()
    push(c, "a", "PRIORITY", 1, "m")
    push(c, "b", "DELAY", 0, "m")
    pop(c, "b")
    c.zadd("dead{z}", {"m": 1})
    c.execute_command("RMQ.POLICY", "p", "SET", "paused", 1)
    want = [b"a", b"b", b"p", b"z"]
    c.execute_command("DEBUG", "RELOAD")
    assert listed(c) == want
    cursor, _ = page(c, "COUNT", 1)
    s.restart()
    c = s.client()
    assert listed(c) == want
    # a new process seals with a new key
    expect_error(c, "RMQ.QUEUES", "CURSOR", cursor, contains="invalid CURSOR")
    ack(c, "b", "m")
    assert listed(c) == [b"a", b"p", b"z"]


def test_replica_lists_and_keeps_listing_after_promotion(start_server):
    p = start_server()
    c = p.client()
    push(c, "before", "PRIORITY", 1, "m")
    rep = start_replica(start_server, p)
    rc = rep.client()
    push(c, "after", "PRIORITY", 1, "m")
    push(c, "gone", "PRIORITY", 1, "m")
    pop(c, "gone")
    ack(c, "gone", "m")
    assert wait_replica_matches(c, rc)
    assert listed(rc) == [b"after", b"before"], "full sync, then replicated writes"
    cursor, _ = page(c, "COUNT", 1)
    # each server seals with its own key
    expect_error(rc, "RMQ.QUEUES", "CURSOR", cursor, contains="invalid CURSOR")
    rc.execute_command("REPLICAOF", "NO", "ONE")
    assert listed(rc) == [b"after", b"before"]
    pop(rc, "after")
    ack(rc, "after", "m")
    push(rc, "new", "PRIORITY", 1, "m")
    assert listed(rc) == [b"before", b"new"]


def test_cluster_nodes_list_only_their_own():
    cl = Cluster(masters=3, replicas=0, tag="rmq-queues").start()
    try:
        rc = cl.client()
        names = [f"q{i}" for i in range(200)]
        for q in names:
            rc.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "m")
        every = []
        for node, _info, _ in cl.primaries():
            mine = [q.decode() for q in listed(node.conn())]
            assert mine and all(cl.owner(q) is node for q in mine)
            every += mine
        assert sorted(every) == sorted(names), "each queue once, on its own node"
    finally:
        cl.stop()
