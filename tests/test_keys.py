"""Model and Keys: key names and types, hash tags, no leftover keys, key specs of the
commands, RMQ.INFO / RMQ.PENDING shapes, and the INFO rmq counters (docs/COMMANDS.md: Model, Keys,
Observability)."""

import time

import pytest

from helpers import (MIN_AT, ack, assert_time_score, dead, info_rmq, nack, now_ms, pop,
                     pop_expire_sweep, prep, push, raw_client, rmq_info, state, sweep, wait_due,
                     zs)


def _crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def keyslot(key):
    s = key.find(b"{")
    if s != -1:
        e = key.find(b"}", s + 1)
        if e != -1 and e != s + 1:
            key = key[s + 1:e]
    return _crc16(key) % 16384


def test_keyslot_helper():
    assert keyslot(b"123456789") == 12739
    assert keyslot(b"prepare{q}") == keyslot(b"q")


def _assert_queue_keys(r, queues):
    """Every key belongs to one of `queues`: Q itself, prepare{Q}, dead{Q} (sorted sets)
    or another key carrying the hash tag {Q}."""
    for k in r.keys("*"):
        owner = None
        for q in queues:
            qb = q.encode() if isinstance(q, str) else q
            if k == qb or b"{" + qb + b"}" in k:
                owner = qb
                break
        assert owner is not None, f"key {k!r} does not belong to any queue of {queues}"
        assert keyslot(k) == keyslot(owner), f"key {k!r} is not in the hash slot of {owner!r}"
        if k in (owner, prep(owner), dead(owner)):
            assert r.type(k) == b"zset", k


def test_keys_of_a_queue_in_all_states(r):
    push(r, "q", "PRIORITY", 1, "w", "f", "d")
    push(r, "q", "PRIORITY", 2, "f", "d")
    pop(r, "q", "COUNT", 2)
    nack(r, "q", "d", "DEAD")
    keys = set(r.keys("*"))
    assert {b"q", b"prepare{q}", b"dead{q}"} <= keys
    _assert_queue_keys(r, ["q"])
    store, prepare, dd = state(r, "q")
    assert store == {b"w": 1.0}
    assert list(prepare) == [b"f"]
    assert list(dd) == [b"d"]


def test_keys_of_several_queues_stay_apart(r):
    names = ["alpha", "beta_3", "a:b:c", "x"]
    for n in names:
        push(r, n, "RANGE", 1, "m1", "m2")
    wait_due(r, 2)
    for n in names:
        pop(r, n)
        nack(r, n, pop(r, n)[0][0], "DEAD")
    _assert_queue_keys(r, names)
    for n in names:
        assert r.zcard(prep(n)) == 1 and r.zcard(dead(n)) == 1


def test_store_scores_per_kind(r):
    push(r, "p", "PRIORITY", -7, "m")
    t0 = now_ms(r)
    push(r, "rg", "RANGE", 1234, "m")
    t1 = now_ms(r)
    push(r, "f", "AT", MIN_AT + 42, "m")
    assert zs(r, "p") == {b"m": -7.0}
    assert_time_score(zs(r, "rg")[b"m"], t0, t1, 1234)
    assert zs(r, "f") == {b"m": float(MIN_AT + 42)}


# ---------------------------------------------------------------------------------------
# an empty queue leaves no keys
# ---------------------------------------------------------------------------------------

def test_no_keys_after_push_pop_ack(r):
    push(r, "q", "RANGE", 1, "a", "b")
    wait_due(r, 2)
    pop(r, "q", "COUNT", 2)
    ack(r, "q", "a", "b")
    assert r.dbsize() == 0


@pytest.mark.parametrize("score", ["due", "priority"])
def test_no_keys_after_zadd_pop_ack(r, score):
    """A message written into `Q` by ZADD belongs to the queue: popped and acked, it leaves
    no key behind (no `meta{Q}` with a delivery record or a kind nobody else holds)."""
    r.zadd("q", {"z": now_ms(r) if score == "due" else 5})
    assert pop(r, "q") == [(b"z", 1)]
    assert ack(r, "q", "z") == 1
    assert r.keys("*") == []


@pytest.mark.parametrize("death", ["nack", "expiry"])
def test_a_zadded_priority_message_keeps_its_priority_through_death(r, death):
    """A message ZADDed into a priority queue (no `meta{Q}`: the kind is inferred) that dies
    once popped keeps its priority: RMQ.REPLAY puts it back at it, and RMQ.REDRIVE CLAIM
    answers it."""
    for q in ("q", "r"):
        r.zadd(q, {"z": 5})
        if death == "nack":
            assert pop(r, q) == [(b"z", 1)]
            assert nack(r, q, "z", "DEAD") == b"dead"
        else:
            assert r.execute_command("RMQ.POLICY", q, "SET", "retries", 0) == b"OK"
            assert pop_expire_sweep(r, q) == ([(b"z", 1)], 1, 0)
        assert list(zs(r, dead(q))) == [b"z"]
    assert r.execute_command("RMQ.REPLAY", "q") == 1
    assert r.zscore("q", "z") == 5
    assert r.execute_command("RMQ.REDRIVE", "r", "CLAIM") == [[b"z", None, 5]]


@pytest.mark.parametrize("way", ["zadd", "restore", "rename", "copy", "move"])
def test_a_dead_key_made_by_another_command_is_the_queues(r, way):
    """`dead{Q}` is not opened while known absent: a queue that had none sees one made by
    any other command at once (its dead messages count and replay)."""
    push(r, "q", "PRIORITY", 1, "m")
    pop(r, "q")
    assert rmq_info(r, "q")["dead"] == 0
    t = now_ms(r)
    if way == "zadd":
        r.zadd(dead("q"), {"x": t})
    elif way == "move":
        r.execute_command("SELECT", 1)
        r.zadd(dead("q"), {"x": t})
        assert r.move(dead("q"), 0)
        r.execute_command("SELECT", 0)
    else:
        r.zadd("tmp{q}", {"x": t})
        if way == "restore":
            r.restore(dead("q"), 0, r.dump("tmp{q}"))
            r.delete("tmp{q}")
        elif way == "rename":
            r.rename("tmp{q}", dead("q"))
        else:
            r.copy("tmp{q}", dead("q"))
            r.delete("tmp{q}")
    assert rmq_info(r, "q")["dead"] == 1, way
    assert r.execute_command("RMQ.REPLAY", "q") == 1
    assert not r.exists(dead("q"))
    assert r.zscore("q", "x") == 0.0, "replayed with the priority it had (none kept: 0)"


def test_no_keys_after_nack_and_ack(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q")
    nack(r, "q", "a")
    pop(r, "q")
    ack(r, "q", "a")
    assert r.dbsize() == 0


def test_no_keys_after_cancel(r):
    push(r, "q", "DELAY", 60000, "a", "b")
    assert r.execute_command("RMQ.CANCEL", "q", "a", "b") == 2
    assert r.dbsize() == 0


def test_no_keys_after_dead_replay_pop_ack(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q")
    nack(r, "q", "a", "DEAD")
    assert r.execute_command("RMQ.REPLAY", "q") == 1
    assert pop(r, "q") == [(b"a", 1)]
    ack(r, "q", "a")
    assert r.dbsize() == 0


def test_no_keys_after_sweep_and_ack(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop_expire_sweep(r, "q", lease=1, wait_ms=3)
    assert pop(r, "q") == [(b"a", 2)]
    ack(r, "q", "a")
    assert r.dbsize() == 0


def test_no_keys_after_copy_in_flight_then_both_acked(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q")
    push(r, "q", "PRIORITY", 1, "a")
    ack(r, "q", "a")
    pop(r, "q")
    ack(r, "q", "a")
    assert r.dbsize() == 0


def test_metadata_of_many_in_flight_is_exact_and_a_hashtable(r):
    """Past a few dozen per-message fields meta{Q} is made a hashtable (a listpack hash is
    scanned linearly on every lookup); the transient field that converts it never stays,
    and every field is still exact."""
    msgs = [f"m{i:03d}" for i in range(200)]
    for i in range(0, 200, 50):
        push(r, "q", "PRIORITY", i, *msgs[i:i + 50])
    taken = pop(r, "q", "COUNT", 150)
    assert [d for _, d in taken] == [1] * 150
    meta = r.hgetall("meta{q}")
    assert r.object("encoding", "meta{q}") == b"hashtable"
    expected = {b"kind": b"priority"}
    for m, _ in taken:
        expected[b"f" + m] = b"1:%d" % (int(m[1:]) // 50 * 50)
    assert meta == expected
    assert nack(r, "q", b"m199") == b"requeued"
    assert ack(r, "q", *[m for m, _ in taken if m != b"m199"]) == 149
    assert r.hgetall("meta{q}") == {b"kind": b"priority", b"wm199": b"1"}
    assert pop(r, "q", "COUNT", 51)[0] == (b"m199", 2)
    assert r.zcard("q") == 0
    assert ack(r, "q", *msgs) == 51
    assert r.dbsize() == 0


def test_prepare_of_a_large_pop_is_a_skiplist_and_exact(r):
    """A pop that takes prepare{Q} past a few dozen leases makes it a skiplist at its first
    insert (whether prepare{Q} was absent or a small listpack; the conversion itself is
    invisible here, callgrind sees it); a small pop leaves a listpack; every lease is
    there, and the transient member that converts never stays."""
    msgs = [f"m{i:03d}".encode() for i in range(100)]
    push(r, "q", "PRIORITY", 1, *msgs)
    first = pop(r, "q", "COUNT", 5)
    assert r.object("encoding", "prepare{q}") == b"listpack"
    first += pop(r, "q", "COUNT", 40)
    assert r.object("encoding", "prepare{q}") == b"skiplist"
    assert r.zcard("prepare{q}") == 45
    assert ack(r, "q", *[m for m, _ in first]) == 45
    rest = pop(r, "q", "COUNT", 55)
    assert r.object("encoding", "prepare{q}") == b"skiplist"
    assert sorted(m for m, _ in first + rest) == msgs
    assert r.zcard("prepare{q}") == 55 and r.zcard("q") == 0
    assert ack(r, "q", *msgs) == 55
    assert r.dbsize() == 0


def test_sets_grown_back_one_at_a_time_are_converted_once_per_creation(r):
    """prepare{Q} and meta{Q} that shrink below the conversion bound and grow back (one
    lease at a time) stay a skiplist and a hashtable; once emptied (deleted) or deleted by
    hand, grown back they are converted again; every lease and record stays exact and the
    transient member or field never stays."""
    msgs = [f"m{i:03d}".encode() for i in range(200)]
    push(r, "q", "PRIORITY", 1, *msgs)

    def grow(n):
        return [pop(r, "q")[0][0] for _ in range(n)]

    def check(inflight):
        assert r.object("encoding", "prepare{q}") == b"skiplist"
        assert r.object("encoding", "meta{q}") == b"hashtable"
        assert sorted(r.zrange("prepare{q}", 0, -1)) == sorted(inflight)
        assert sorted(r.hkeys("meta{q}")) == sorted([b"kind"] + [b"f" + m for m in inflight])

    for _ in range(2):
        taken = grow(40)
        check(taken)
        assert ack(r, "q", *taken[:30]) == 30
        taken = taken[30:] + grow(20)
        check(taken)
        assert ack(r, "q", *taken) == 30
        assert not r.exists("prepare{q}")
    taken = grow(10)
    assert r.object("encoding", "prepare{q}") == b"listpack"
    r.delete("prepare{q}")
    taken = grow(40)
    assert r.object("encoding", "prepare{q}") == b"skiplist"
    assert sorted(r.zrange("prepare{q}", 0, -1)) == sorted(taken)


def test_read_only_and_noop_commands_create_no_keys(r):
    assert pop(r, "q") is None
    assert ack(r, "q", "a") == 0
    assert nack(r, "q", "a") is None
    assert sweep(r, "q") == 0
    assert r.execute_command("RMQ.CANCEL", "q", "a") == 0
    assert r.execute_command("RMQ.REPLAY", "q") == 0
    assert r.execute_command("RMQ.EXTEND", "q", "a", 100) is None
    r.execute_command("RMQ.INFO", "q")
    r.execute_command("RMQ.PENDING", "q")
    r.execute_command("RMQ.ROUTE", "q", 8, "a")
    assert r.dbsize() == 0


# ---------------------------------------------------------------------------------------
# key specs: the queue is the only declared key (first 1, last 1, step 1)
# ---------------------------------------------------------------------------------------

QUEUE_CMDS = {
    "RMQ.PUSH": ["PRIORITY", "1", "m"],
    "RMQ.POP": ["COUNT", "2"],
    "RMQ.ACK": ["m", "n"],
    "RMQ.NACK": ["m", "DEAD"],
    "RMQ.SWEEP": ["LIMIT", "5"],
    "RMQ.EXTEND": ["m", "1000"],
    "RMQ.CANCEL": ["m", "n"],
    "RMQ.REPLAY": ["COUNT", "1"],
    "RMQ.INFO": [],
    "RMQ.PENDING": [],
}


@pytest.mark.parametrize("cmd", list(QUEUE_CMDS))
def test_command_info_key_spec(server, cmd):
    c = raw_client(server)
    info = c.execute_command("COMMAND", "INFO", cmd.lower())
    assert info and info[0], f"{cmd} is not registered"
    entry = info[0]
    assert entry[3:6] == [1, 1, 1], f"{cmd} (first,last,step) = {entry[3:6]}"


@pytest.mark.parametrize("cmd", list(QUEUE_CMDS))
def test_command_getkeys_routes_to_queue(server, cmd):
    c = raw_client(server)
    keys = c.execute_command("COMMAND", "GETKEYS", cmd, "myq", *QUEUE_CMDS[cmd])
    assert keys == [b"myq"]


# ---------------------------------------------------------------------------------------
# RMQ.INFO / RMQ.PENDING
# ---------------------------------------------------------------------------------------

def test_rmq_info_empty_queue(r):
    info = rmq_info(r, "q")
    assert info["kind"] is None
    for f in ("waiting", "ready", "inflight", "dead"):
        assert info[f] == 0, f
    assert info["next_due"] is None and info["next_expiry"] is None


def test_rmq_info_fields(r):
    t = now_ms(r)
    push(r, "f", "AT", t - 1000, "due1", "due2")
    push(r, "f", "AT", t + 60000, "later")
    push(r, "f", "AT", MIN_AT, "x")
    pop(r, "f", "LEASE", 50000)  # x
    info = rmq_info(r, "f")
    assert info["kind"] == b"fixed"
    assert info["waiting"] == 3
    assert info["ready"] == 2
    assert info["inflight"] == 1
    assert info["dead"] == 0
    assert info["next_due"] == t - 1000
    assert info["next_expiry"] == int(zs(r, prep("f"))[b"x"])
    push(r, "p", "PRIORITY", 1, "a", "b")
    info = rmq_info(r, "p")
    assert info["kind"] == b"priority" and info["ready"] == 2 and info["next_due"] is None
    push(r, "rg", "RANGE", 60000, "a")
    assert rmq_info(r, "rg")["kind"] == b"range"


def test_rmq_pending(r):
    push(r, "q", "PRIORITY", 1, "a", "b")
    pop(r, "q", "LEASE", 20000)
    pop(r, "q", "LEASE", 10000)
    rep = r.execute_command("RMQ.PENDING", "q")
    assert len(rep) == 2
    deadlines = zs(r, prep("q"))
    first, second = rep
    assert first[2] <= second[2]  # soonest deadline first
    for m, n, dl, group in rep:
        assert n == 1 and dl == int(deadlines[m]) and group is None


# ---------------------------------------------------------------------------------------
# INFO rmq counters
# ---------------------------------------------------------------------------------------

COUNTERS = ["pushed", "merged", "popped", "acked", "nacked", "expired", "dead", "replayed",
            "cancelled", "group_waits", "rate_limited"]
GAUGES = ["blocked_clients", "sweep_runs", "sweep_max_us"]


def test_info_rmq_has_fields(r):
    info = info_rmq(r)
    for f in COUNTERS + GAUGES:
        assert f in info, f"INFO rmq lacks {f}: {sorted(info)}"
        assert isinstance(info[f], int), (f, info[f])


def test_info_rmq_counters_scenario(r):
    before = info_rmq(r)
    assert push(r, "q", "PRIORITY", 3, "a") == 1
    assert push(r, "q", "PRIORITY", 2, "b") == 1
    assert push(r, "q", "PRIORITY", 1, "c") == 1
    assert push(r, "q", "PRIORITY", 3, "a") == 0                       # merged 1
    assert pop(r, "q", "COUNT", 2) == [(b"a", 1), (b"b", 1)]           # popped 2
    assert ack(r, "q", "a", "nope") == 1                               # acked 1
    assert nack(r, "q", "b") == b"requeued"                            # nacked 1
    assert pop(r, "q") == [(b"b", 2)]                                  # popped 3
    assert nack(r, "q", "b", "DEAD") == b"dead"                        # nacked 2, dead 1
    assert nack(r, "q", "zzz") is None                                 # not counted
    assert r.execute_command("RMQ.REPLAY", "q") == 1                   # replayed 1
    assert r.execute_command("RMQ.CANCEL", "q", "b") == 1              # cancelled 1
    popped, swept, _ = pop_expire_sweep(r, "q", lease=1, wait_ms=3)    # popped 4, expired 1
    assert popped == [(b"c", 1)] and swept == 1
    after = info_rmq(r)
    # the contract-AMBIGUOUS: we count NACK ... DEAD as a nack (it fails a delivery) and as a move
    # to dead; a NACK of a message not in flight counts nowhere.
    expected = {"pushed": 3, "merged": 1, "popped": 4, "acked": 1, "nacked": 2, "expired": 1,
                "dead": 1, "replayed": 1, "cancelled": 1}
    got = {k: after[k] - before[k] for k in expected}
    assert got == expected


def test_info_rmq_counters_copies_and_batch(r):
    # the contract-AMBIGUOUS: a duplicate inside one batch merges into the copy the same batch just
    # added, so it counts as `merged`; a push of an in-flight content adds a copy (`pushed`).
    before = info_rmq(r)
    push(r, "q", "PRIORITY", 1, "a", "a", "b")     # pushed 2, merged 1
    pop(r, "q")                                    # popped 1 (a or b)
    push(r, "q", "PRIORITY", 1, "a", "b")          # one is a new copy (in flight), other merges
    after = info_rmq(r)
    assert after["pushed"] - before["pushed"] == 3
    assert after["merged"] - before["merged"] == 2
    assert after["popped"] - before["popped"] == 1


def test_info_rmq_timer_expiry_counted(r):
    before = info_rmq(r)
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q", "LEASE", 20)
    deadline = time.monotonic() + 2
    while r.zcard(prep("q")) and time.monotonic() < deadline:
        time.sleep(0.01)
    after = info_rmq(r)
    assert after["expired"] - before["expired"] == 1
    assert after["sweep_runs"] >= before["sweep_runs"]


# ---------------------------------------------------------------------------------------
# reply shapes under RESP3 (the rest of the suite speaks RESP2)
# ---------------------------------------------------------------------------------------

def test_reply_shapes_resp3(server, r):
    c = server.client(protocol=3)
    assert c.execute_command("RMQ.POP", "q") is None
    assert c.execute_command("RMQ.PUSH", "q", "PRIORITY", 1, "a", "b") == 2
    assert c.execute_command("RMQ.POP", "q", "COUNT", 1) in ([[b"a", 1]], [[b"b", 1]])
    m = zs(r, prep("q")).popitem()[0]
    assert c.execute_command("RMQ.NACK", "q", m) == b"requeued"
    assert c.execute_command("RMQ.NACK", "q", m) is None
    got = c.execute_command("RMQ.POP", "q", "COUNT", 5)
    assert sorted(got) == sorted([[b"a", 1 if m != b"a" else 2], [b"b", 1 if m != b"b" else 2]])
    info = c.execute_command("RMQ.INFO", "q")
    assert isinstance(info, dict), f"RMQ.INFO must be a map in RESP3: {info!r}"
    info = {k.decode() if isinstance(k, bytes) else k: v for k, v in info.items()}
    assert info["kind"] == b"priority" and info["inflight"] == 2 and info["waiting"] == 0
    assert info["next_due"] is None and isinstance(info["next_expiry"], int)
    pend = c.execute_command("RMQ.PENDING", "q")
    assert len(pend) == 2 and all(len(e) == 4 and e[3] is None for e in pend)
    assert c.execute_command("RMQ.ACK", "q", "a", "b") == 2
    assert c.execute_command("RMQ.ROUTE", "t", 8, "hello") == b"t_6"
    assert c.execute_command("RMQ.INFO", "q")[b"kind"] is None


def test_rmq_info_flat_array_in_resp2(r, server):
    # `r` flushes the database first: `q` may be left of another kind by an earlier test.
    from helpers import raw_client
    c = raw_client(server)
    c.execute_command("RMQ.PUSH", "q", "RANGE", 60000, "a")
    rep = c.execute_command("RMQ.INFO", "q")
    assert isinstance(rep, list) and len(rep) % 2 == 0, rep
    d = dict(zip(rep[0::2], rep[1::2]))
    assert d[b"kind"] == b"range" and d[b"waiting"] == 1 and d[b"ready"] == 0
    assert isinstance(d[b"next_due"], int) and d[b"next_expiry"] is None


# ---------------------------------------------------------------------------------------
# replicas hold exactly the primary's keys, members and scores
# ---------------------------------------------------------------------------------------

def test_replica_holds_same_keys_members_scores(start_server):
    from helpers import snapshot, start_replica
    p = start_server(module_args=["retries", "1"])
    c = p.client()
    rc = start_replica(start_server, p).client()
    push(c, "pq", "PRIORITY", 3, "a", "b", "c")
    push(c, "pq", "PRIORITY", 7, "b")
    push(c, "rq", "RANGE", 1, "x", "y")
    push(c, "fq", "DELAY", 5000, "d")
    push(c, "fq", "AT", MIN_AT, "e")
    wait_due(c, 2)
    pop(c, "pq", "COUNT", 2)
    pop(c, "rq", "COUNT", 2, "LEASE", 7000)
    nack(c, "rq", "x", "DELAY", 300)
    nack(c, "pq", "b", "DEAD")
    ack(c, "pq", "a")
    push(c, "pq", "PRIORITY", 1, "a")
    pop(c, "fq")
    pop_expire_sweep(c, "rq", lease=1, wait_ms=3)   # y (retries 1: x expired -> requeued)
    c.execute_command("RMQ.EXTEND", "fq", "e", 10000)
    c.execute_command("RMQ.REPLAY", "pq")
    c.execute_command("RMQ.CANCEL", "fq", "d")
    from helpers import wait_replica_matches
    wait_replica_matches(c, rc)
    assert snapshot(rc) == snapshot(c)
    # the replica's own view of the queue agrees too (the counters are each server's own)
    counters = {"pushed", "merged", "popped", "acked", "nacked", "expired", "died", "replayed",
                "cancelled"}

    def state(r):
        return {k: v for k, v in rmq_info(r, "pq").items() if k not in counters}
    assert state(rc) == state(c)
