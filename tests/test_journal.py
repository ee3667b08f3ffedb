"""The journal (the v5 contract): `RMQ.POLICY Q SET journal n` keeps the last n events of Q in the
Stream `journal{Q}`, one entry per event and message (event, message[, sha1], deliveries,
by[, id][, due | priority]); RMQ.TRACE Q message [COUNT n] reads one message's events,
newest first.

One server for the file, on the test clock (`test-clock 1`: due times and expiries are
exact), with `retries 1`; replication and the matrix's `by` on servers of their own.
"""

import hashlib

import pytest
import redis

from conftest import CLIENT_TIMEOUT
from server_support import Server, wait_for, wait_replica_synced

T0 = 1_700_000_000_000
EVENT_FIELDS = ("event", "message", "sha1", "deliveries", "by", "id", "due", "priority")


@pytest.fixture(scope="module")
def srv():
    s = Server(module_args=["retries", 1, "test-clock", 1], tag="rmq-journal",
               client_timeout=CLIENT_TIMEOUT).start()
    yield s
    s.stop()


@pytest.fixture
def r(srv):
    c = srv.client()
    c.flushall()
    c.execute_command("RMQ.TESTCLOCK", "SET", T0)
    yield c
    c.close()


def cid(c):
    return str(c.client_id())


def entries(r, q):
    """journal{q} as [(id, {field: value})], oldest first (XRANGE)."""
    return [(i.decode(), {k.decode(): v.decode(errors="replace") for k, v in f.items()})
            for i, f in r.xrange(f"journal{{{q}}}")]


def fields(e):
    return e[1]


def trace(r, q, m, *extra):
    out = []
    for i, flat in r.execute_command("RMQ.TRACE", q, m, *extra):
        it = iter(flat)
        out.append((i.decode(), {k.decode(): v.decode(errors="replace") for k, v in zip(it, it)}))
    return out


def journal_on(r, q, n=1000):
    assert r.execute_command("RMQ.POLICY", q, "SET", "journal", n) == b"OK"


def test_policy_field_bounds_and_errors(r):
    q = "jp"
    pol = dict(zip(*[iter(r.execute_command("RMQ.POLICY", q, "GET"))] * 2))
    assert pol[b"journal"] == 0
    journal_on(r, q, 1_000_000)
    assert dict(zip(*[iter(r.execute_command("RMQ.POLICY", q, "GET"))] * 2))[b"journal"] == 1_000_000
    for bad in ("-1", "1000001", "x", "1.5"):
        with pytest.raises(redis.ResponseError, match=r"^invalid journal: must be an integer from 0 to 1000000"):
            r.execute_command("RMQ.POLICY", q, "SET", "journal", bad)
    # a bad pair changes nothing, the good pair before it included
    with pytest.raises(redis.ResponseError, match="invalid journal"):
        r.execute_command("RMQ.POLICY", q, "SET", "retries", 5, "journal", 7, "journal", -3)
    pol = dict(zip(*[iter(r.execute_command("RMQ.POLICY", q, "GET"))] * 2))
    assert (pol[b"journal"], pol[b"retries"]) == (1_000_000, 1)
    # a journal key holding another type: WRONGTYPE, nothing changed
    r.set("journal{jw}", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.execute_command("RMQ.POLICY", "jw", "SET", "journal", 5)
    assert r.exists("meta{jw}") == 0
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.execute_command("RMQ.TRACE", "jw", "m")


def test_push_pop_ack_entries_and_trace(r, srv):
    q = "jl"
    journal_on(r, q)
    worker = srv.client()
    worker.client_setname("worker-1")
    r.execute_command("RMQ.PUSH", q, "DELAY", 50, "a")
    r.execute_command("RMQ.PUSH", q, "DELAY", 10, "a")  # fixed: latest wins
    r.execute_command("RMQ.TESTCLOCK", "ADVANCE", 10)
    [[m, d, did]] = worker.execute_command("RMQ.POP", q, "IDS")
    assert (m, d) == (b"a", 1)
    assert worker.execute_command("RMQ.ACK", q, "a") == 1
    by = cid(r)
    want = [
        {"event": "pushed", "message": "a", "deliveries": "0", "by": by, "due": str(T0 + 50)},
        {"event": "merged", "message": "a", "deliveries": "0", "by": by, "due": str(T0 + 10)},
        {"event": "popped", "message": "a", "deliveries": "1", "by": "worker-1", "id": str(did)},
        {"event": "acked", "message": "a", "deliveries": "1", "by": "worker-1", "id": str(did)},
    ]
    got = entries(r, q)
    assert [fields(e) for e in got] == want
    # field order as documented
    assert [list(fields(e)) for e in got] == [[k for k in EVENT_FIELDS if k in w] for w in want]
    # TRACE: newest first, the entries' ids and fields
    assert trace(r, q, "a") == list(reversed(got))
    assert trace(r, q, "a", "COUNT", 2) == list(reversed(got))[:2]
    assert trace(r, q, "other") == []
    assert r.execute_command("RMQ.TRACE", "nojournal", "a") == []
    # entry ids are times: increasing
    ids = [tuple(map(int, e[0].split("-"))) for e in got]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # the journal stays when the queue empties, and keeps it listed
    assert r.exists(q, f"prepare{{{q}}}") == 0
    assert r.xlen(f"journal{{{q}}}") == 4
    assert q.encode() in r.execute_command("RMQ.QUEUES")[1]


def test_batch_push_merge_and_priority(r):
    q = "jb"
    journal_on(r, q)
    assert r.execute_command("RMQ.PUSH", q, "PRIORITY", 5, "x", "y", "x") == 2
    r.execute_command("RMQ.PUSH", q, "PRIORITY", -2, "y")
    by = cid(r)
    assert [fields(e) for e in entries(r, q)] == [
        {"event": "pushed", "message": "x", "deliveries": "0", "by": by, "priority": "5"},
        {"event": "pushed", "message": "y", "deliveries": "0", "by": by, "priority": "5"},
        {"event": "merged", "message": "x", "deliveries": "0", "by": by, "priority": "5"},
        {"event": "merged", "message": "y", "deliveries": "0", "by": by, "priority": "-2"},
    ]


def test_nack_dead_replay_cancel(r):
    q = "jn"
    journal_on(r, q)
    r.execute_command("RMQ.PUSH", q, "RANGE", 5, "m")
    r.execute_command("RMQ.TESTCLOCK", "ADVANCE", 5)
    r.execute_command("RMQ.POP", q)
    assert r.execute_command("RMQ.NACK", q, "m", "DELAY", 100) == b"requeued"
    r.execute_command("RMQ.TESTCLOCK", "ADVANCE", 100)
    assert r.execute_command("RMQ.POP", q) == [[b"m", 2]]
    assert r.execute_command("RMQ.NACK", q, "m") == b"dead"  # retries 1: the second failure
    assert r.execute_command("RMQ.NACK", q, "m") is None  # not in flight: no entry
    assert r.execute_command("RMQ.REPLAY", q) == 1
    assert r.execute_command("RMQ.CANCEL", q, "m", "nope") == 1
    by, now = cid(r), T0 + 105
    assert [fields(e) for e in entries(r, q)][2:] == [
        {"event": "nacked", "message": "m", "deliveries": "1", "by": by, "due": str(T0 + 105)},
        {"event": "popped", "message": "m", "deliveries": "2", "by": by},
        # one `dead` entry, not also `nacked`
        {"event": "dead", "message": "m", "deliveries": "2", "by": by},
        {"event": "replayed", "message": "m", "deliveries": "0", "by": by, "due": str(now)},
        {"event": "cancelled", "message": "m", "deliveries": "0", "by": by},
    ]


def test_expiries_are_the_timers(r):
    q = "je"
    journal_on(r, q)
    r.execute_command("RMQ.PUSH", q, "DELAY", 0, "m")
    [[_, _, did]] = r.execute_command("RMQ.POP", q, "LEASE", 100, "IDS")
    r.execute_command("RMQ.TESTCLOCK", "ADVANCE", 150)  # the timer rolls it back
    wait_for(lambda: r.xlen(f"journal{{{q}}}") == 3, 10, what="the expiry's entry")
    assert fields(entries(r, q)[-1]) == {"event": "expired", "message": "m", "deliveries": "1",
                                         "by": "timer", "id": str(did), "due": str(T0 + 150)}
    # a second expiry, run by a client's RMQ.SWEEP: past its retries, dead, still the clock's
    r.execute_command("RMQ.POP", q, "LEASE", 100)
    r.execute_command("RMQ.TESTCLOCK", "SET", T0 + 300)
    r.execute_command("RMQ.SWEEP", q)
    wait_for(lambda: r.xlen(f"journal{{{q}}}") == 5, 10, what="the dead entry")
    assert fields(entries(r, q)[-1]) == {"event": "dead", "message": "m", "deliveries": "2", "by": "timer"}


def test_schedule_firings_are_the_timers(r):
    q = "js"
    journal_on(r, q)
    r.execute_command("RMQ.SCHEDULE", q, "SET", "tick", "EVERY", 1000, "DELAY", 0, "beat")
    r.execute_command("RMQ.TESTCLOCK", "ADVANCE", 1000)
    wait_for(lambda: r.exists(f"journal{{{q}}}"), 10, what="the firing's entry")
    assert [fields(e) for e in entries(r, q)] == [
        {"event": "pushed", "message": "beat", "deliveries": "0", "by": "timer", "due": str(T0 + 1000)}]


def test_long_messages_cut_with_sha1(r):
    q = "jt"
    journal_on(r, q)
    long = b"x" * 255 + b"yz" + bytes(range(256))
    twin = long[:-1] + b"!"  # the same first 256 bytes
    exact = b"e" * 256
    r.execute_command("RMQ.PUSH", q, "DELAY", 0, long, exact)
    raw = r.xrange(f"journal{{{q}}}")
    assert raw[0][1][b"message"] == long[:256]
    assert raw[0][1][b"sha1"] == hashlib.sha1(long).hexdigest().encode()
    assert list(raw[0][1]) == [b"event", b"message", b"sha1", b"deliveries", b"by", b"due"]
    assert raw[1][1][b"message"] == exact and b"sha1" not in raw[1][1]
    assert len(r.execute_command("RMQ.TRACE", q, long)) == 1
    assert r.execute_command("RMQ.TRACE", q, twin) == []
    assert r.execute_command("RMQ.TRACE", q, long[:256]) == []
    assert len(r.execute_command("RMQ.TRACE", q, exact)) == 1


def test_trimming_and_off(r):
    q = "jtrim"
    journal_on(r, q, 10)
    node = int(r.config_get("stream-node-max-entries")["stream-node-max-entries"])
    for i in range(0, 600, 100):
        r.execute_command("RMQ.PUSH", q, "DELAY", 0, *[f"m{j}" for j in range(i, i + 100)])
    n = r.xlen(f"journal{{{q}}}")
    assert 10 <= n <= 10 + node, n
    # the newest entries are those kept
    assert fields(entries(r, q)[-1])["message"] == "m599"
    # journal 0 deletes it, and with it off nothing is written
    journal_on(r, q, 0)
    assert r.exists(f"journal{{{q}}}") == 0
    r.execute_command("RMQ.PUSH", q, "DELAY", 0, "more")
    r.execute_command("RMQ.POP", q, "COUNT", 10)
    assert r.exists(f"journal{{{q}}}") == 0
    # RESET deletes it too
    journal_on(r, q, 5)
    r.execute_command("RMQ.ACK", q, "m0", "m1")
    assert r.xlen(f"journal{{{q}}}") == 2
    assert r.execute_command("RMQ.POLICY", q, "RESET") == 1
    assert r.exists(f"journal{{{q}}}") == 0


def test_an_erroring_command_writes_nothing(r):
    q = "jerr"
    journal_on(r, q)
    r.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "a")
    before = entries(r, q)
    with pytest.raises(redis.ResponseError):
        r.execute_command("RMQ.PUSH", q, "DELAY", 0, "b")  # another kind
    with pytest.raises(redis.ResponseError):
        r.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "c", "")  # an empty message
    r.execute_command("RMQ.POLICY", q, "SET", "max-queue-length", 1)
    with pytest.raises(redis.ResponseError):
        r.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "d")  # full
    with pytest.raises(redis.ResponseError):
        r.execute_command("RMQ.POP", q, "COUNT", 0)
    with pytest.raises(redis.ResponseError):
        r.execute_command("RMQ.NACK", q, "a", "DELAY", -1)
    assert entries(r, q) == before


def test_replica_holds_the_same_entries_and_traces():
    started = []
    try:
        conf = ("--repl-diskless-sync-delay", 0)
        p = Server(conf=conf, tag="rmq-journal-repl").start()
        started.append(p)
        rep = Server(conf=conf + ("--replicaof", "127.0.0.1", p.port), tag="rmq-journal-repl").start()
        started.append(rep)
        pc, rc = p.client(), rep.client()
        wait_replica_synced(pc, rc)
        q = "jr"
        journal_on(pc, q, 3)
        for i in range(300):
            pc.execute_command("RMQ.PUSH", q, "DELAY", 0, f"m{i}")
        got = pc.execute_command("RMQ.POP", q, "COUNT", 50, "LEASE", 60_000, "IDS")
        pc.execute_command("RMQ.ACK", q, *[g[0] for g in got[:10]])
        pc.execute_command("RMQ.NACK", q, got[10][0])
        pc.execute_command("RMQ.PUSH", q, "DELAY", 0, b"x" * 300)
        assert pc.wait(1, 5000) == 1
        primary = pc.xrange(f"journal{{{q}}}")
        assert len(primary) < 400
        assert rc.xrange(f"journal{{{q}}}") == primary
        assert rc.xinfo_stream(f"journal{{{q}}}")["last-generated-id"] == \
            pc.xinfo_stream(f"journal{{{q}}}")["last-generated-id"]
        # TRACE is read-only: it answers on the replica
        acked, nacked = got[0][0], got[10][0]
        assert rc.execute_command("RMQ.TRACE", q, acked) == pc.execute_command("RMQ.TRACE", q, acked)
        assert [e[1][1] for e in rc.execute_command("RMQ.TRACE", q, acked)][:2] == [b"acked", b"popped"]
        assert [e[1][1] for e in rc.execute_command("RMQ.TRACE", q, nacked)][:2] == [b"nacked", b"popped"]
        # journal 0 is replicated as the key's deletion
        journal_on(pc, q, 0)
        assert pc.wait(1, 5000) == 1
        assert rc.exists(f"journal{{{q}}}") == 0
    finally:
        for s in reversed(started):
            s.stop()
