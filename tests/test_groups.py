"""Groups (docs/COMMANDS.md: Model, PUSH ... GROUP, POP, NACK, REPLAY, PENDING, INFO rmq group_waits):
at most one delivery of a group in flight, the group's other messages held back until it
ends, consumed in the queue's order; the latest push sets a content's group."""

import threading
import time

import pytest

from helpers import (ack, expect_error_unchanged, info_rmq, nack, now_ms, pop, prep, push,
                     rmq_info, snapshot, start_replica, state, wait_replica_matches, wait_until,
                     zs)
from timing_support import start_blocked, watch_rollback


def gpush(r, q, mode, value, group, *msgs):
    return r.execute_command("RMQ.PUSH", q, mode, value, "GROUP", group, *msgs)


def pending(r, q):
    return r.execute_command("RMQ.PENDING", q)


def test_one_delivery_of_a_group_in_flight_the_rest_held_back(r):
    gpush(r, "q", "DELAY", 0, "order-1", "o1:paid")
    gpush(r, "q", "DELAY", 1, "order-1", "o1:shipped")
    gpush(r, "q", "DELAY", 2, "order-2", "o2:paid")
    push(r, "q", "DELAY", 3, "loose")
    time.sleep(0.01)
    before = info_rmq(r)["group_waits"]
    got = pop(r, "q", "COUNT", 10)
    assert got == [(b"o1:paid", 1), (b"o2:paid", 1), (b"loose", 1)], "one message per group per pop"
    assert info_rmq(r)["group_waits"] == before + 1, "o1:shipped was passed over"
    assert pop(r, "q", "COUNT", 10) is None, "o1:shipped is held back while o1:paid is in flight"
    i = rmq_info(r, "q")
    assert (i["waiting"], i["ready"], i["inflight"]) == (1, 1, 3), "held back only by its group: ready"
    pend = {e[0]: e for e in pending(r, "q")}
    assert pend[b"o1:paid"][3] == b"order-1" and pend[b"o2:paid"][3] == b"order-2"
    assert pend[b"loose"][3] is None
    assert ack(r, "q", "o2:paid", "loose") == 2
    assert pop(r, "q") is None, "another group's end frees nothing"
    assert ack(r, "q", "o1:paid") == 1
    assert pop(r, "q") == [(b"o1:shipped", 1)]
    assert ack(r, "q", "o1:shipped") == 1
    assert r.dbsize() == 0, "an empty queue leaves no keys"


@pytest.mark.parametrize("end", ["ack", "nack", "nack-dead", "sweep", "timer"])
def test_every_way_a_delivery_ends_frees_the_group(r, end):
    gpush(r, "q", "PRIORITY", 9, "g", "first")
    gpush(r, "q", "PRIORITY", 1, "g", "second")
    lease = 300 if end in ("sweep", "timer") else 60000
    assert pop(r, "q", "LEASE", lease) == [(b"first", 1)]
    assert pop(r, "q") is None
    if end == "ack":
        assert ack(r, "q", "first") == 1
    elif end == "nack":
        assert nack(r, "q", "first", "DELAY", 60000) == b"requeued"
    elif end == "nack-dead":
        assert nack(r, "q", "first", "DEAD") == b"dead"
    elif end == "sweep":
        wait_until(lambda: zs(r, prep("q")).get(b"first", 0) < now_ms(r), timeout=5)
        r.execute_command("RMQ.SWEEP", "q")
    else:
        _, inflight = watch_rollback(r, "q", b"first")
    got = pop(r, "q", "COUNT", 10)
    if end in ("sweep", "timer"):
        # rolled back with its priority: it comes first again
        assert got == [(b"first", 2)]
    elif end == "nack":
        # v5: it heads its group again, and the group waits out its retry delay
        assert got is None
        return
    else:
        assert got == [(b"second", 1)]


def test_blocked_consumer_woken_when_its_group_frees(server, r):
    gpush(r, "q", "DELAY", 0, "g", "a", "b")
    assert pop(r, "q", "LEASE", 60000) == [(b"a", 1)]
    t = start_blocked(server, r, "q", "BLOCK", 10000)
    time.sleep(0.1)
    assert t.is_alive(), "b is held back: the consumer keeps waiting"
    assert ack(r, "q", "a") == 1
    assert t.finish() == [(b"b", 1)]


def test_latest_push_sets_the_group(r):
    gpush(r, "q", "PRIORITY", 5, "g", "a", "b")
    first = pop(r, "q")[0][0]
    other = b"b" if first == b"a" else b"a"
    assert pop(r, "q") is None
    # Pushed again without GROUP: it leaves the group and is deliverable at once.
    assert push(r, "q", "PRIORITY", 5, other) == 0
    assert pop(r, "q") == [(other, 1)]
    # Into another group that is busy: held back by that one.
    gpush(r, "q", "PRIORITY", 1, "h", "h1", "h2")
    assert pop(r, "q") in ([(b"h1", 1)], [(b"h2", 1)])
    gpush(r, "q", "PRIORITY", 1, "g2", "x")
    gpush(r, "q", "PRIORITY", 1, "h", "x")
    assert pop(r, "q", "COUNT", 5) is None, "x follows its latest group h, busy"


def test_a_content_in_flight_and_in_its_group(r):
    gpush(r, "q", "RANGE", 1, "g", "a")
    time.sleep(0.01)
    assert pop(r, "q", "LEASE", 60000) == [(b"a", 1)]
    assert gpush(r, "q", "RANGE", 1, "g", "a") == 1, "a new waiting copy"
    time.sleep(0.01)
    assert pop(r, "q") is None
    assert nack(r, "q", "a") == b"requeued"
    assert pop(r, "q") == [(b"a", 2)], "merged: the waiting copy inherits the count"


def test_group_parsing(r):
    # GROUP is the option only when at least two arguments follow it.
    assert push(r, "q", "DELAY", 0, "GROUP") == 1
    assert push(r, "q", "DELAY", 0, "GROUP", "x") == 1, "GROUP (merged) and x are messages"
    assert zs(r, "q").keys() == {b"GROUP", b"x"}
    assert r.execute_command("RMQ.PUSH", "q", "DELAY", 0, "group", "g", "m") == 1
    assert pop(r, "q", "COUNT", 10) is not None
    assert {e[0]: e[3] for e in pending(r, "q")}[b"m"] == b"g"
    binary = b"g\x00\xff{x}"
    r.execute_command("RMQ.PUSH", "b", "DELAY", 0, "GROUP", binary, "m1", "m2")
    assert pop(r, "b", "COUNT", 5) == [(b"m1", 1)]
    assert pending(r, "b")[0][3] == binary


@pytest.mark.parametrize("group", [b"", b"g" * 1025])
def test_bad_group_is_an_error_and_changes_nothing(r, group):
    push(r, "q", "DELAY", 0, "keep")
    expect_error_unchanged(r, "RMQ.PUSH", "q", "DELAY", 0, "GROUP", group, "m", contains="GROUP")


def test_longest_group_accepted(r):
    assert gpush(r, "q", "DELAY", 0, b"g" * 1024, "m") == 1


def test_replay_keeps_the_group(r):
    gpush(r, "q", "DELAY", 0, "g", "a", "b")
    assert pop(r, "q") == [(b"a", 1)]
    assert nack(r, "q", "a", "DEAD") == b"dead"
    assert pop(r, "q") == [(b"b", 1)]
    assert r.execute_command("RMQ.REPLAY", "q") == 1
    assert pop(r, "q") is None, "a replayed with its group g, busy with b"
    assert ack(r, "q", "b") == 1
    assert pop(r, "q") == [(b"a", 1)]


def test_held_back_messages_are_counted_and_cancelled(r):
    gpush(r, "q", "AT", 946684800000, "g", "a", "b", "c")
    assert pop(r, "q", "COUNT", 3) == [(b"a", 1)]
    i = rmq_info(r, "q")
    assert (i["waiting"], i["ready"], i["next_due"]) == (2, 2, 946684800000)
    assert r.execute_command("RMQ.CANCEL", "q", "b") == 1
    assert rmq_info(r, "q")["waiting"] == 1
    assert ack(r, "q", "a") == 1
    assert pop(r, "q") == [(b"c", 1)]


def test_two_workers_never_share_a_group(server, r):
    """The README's example: two events of each order, two workers; no order is ever
    handled by both at once, and each order's events come in order."""
    orders = [f"order-{i}" for i in range(20)]
    for o in orders:
        gpush(r, "events", "DELAY", 0, o, f"{o}:paid")
    for o in orders:
        gpush(r, "events", "DELAY", 1, o, f"{o}:shipped")
    time.sleep(0.01)
    active, seen, lock, errors = set(), [], threading.Lock(), []

    def worker():
        c = server.client()
        while True:
            got = c.execute_command("RMQ.POP", "events", "COUNT", 2, "LEASE", 30000, "BLOCK", 500)
            if got is None:
                return
            for m, _ in got:
                order = m.split(b":")[0]
                with lock:
                    if order in active:
                        errors.append(order)
                    active.add(order)
                    seen.append(m)
                time.sleep(0.002)
                with lock:
                    active.discard(order)
                c.execute_command("RMQ.ACK", "events", m)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, f"orders handled by two workers at once: {errors}"
    assert len(seen) == 40
    for o in orders:
        assert seen.index(f"{o}:paid".encode()) < seen.index(f"{o}:shipped".encode())


def test_groups_replicate_and_survive_restart(start_server):
    p = start_server(extra_conf=["--appendonly", "yes", "--appendfsync", "always"])
    c = p.client()
    rc = start_replica(start_server, p).client()
    gpush(c, "q", "PRIORITY", 5, "g", "a")
    gpush(c, "q", "PRIORITY", 4, "g", "b")
    gpush(c, "q", "PRIORITY", 1, "h", "c")
    assert pop(c, "q", "COUNT", 3, "LEASE", 60000) == [(b"a", 1), (b"c", 1)]
    assert pop(c, "q") is None
    assert wait_replica_matches(c, rc), "replica holds the primary's keys and scores"
    before = snapshot(c)
    p.restart()
    c = p.client()
    assert snapshot(c) == before, "an AOF reload holds exactly the same keys"
    assert pop(c, "q") is None, "b still held back after the restart"
    assert ack(c, "q", "a") == 1
    assert pop(c, "q") == [(b"b", 1)]
    assert {e[0]: e[3] for e in pending(c, "q")} == {b"b": b"g", b"c": b"h"}


def test_promoted_replica_keeps_busy_groups(start_server):
    p = start_server()
    c = p.client()
    rep = start_replica(start_server, p)
    rc = rep.client()
    gpush(c, "q", "DELAY", 0, "g", "a", "b")
    assert pop(c, "q", "LEASE", 60000) == [(b"a", 1)]
    assert wait_replica_matches(c, rc)
    rc.execute_command("REPLICAOF", "NO", "ONE")
    assert pop(rc, "q") is None, "the new primary knows g is busy"
    assert ack(rc, "q", "a") == 1
    assert pop(rc, "q") == [(b"b", 1)]
    store, prepare, _ = state(rc, "q")
    assert store == {} and list(prepare) == [b"b"]


# The module remembers, per queue and database, that a queue has no held-back keys, and so
# skips looking for them; every way such keys can appear must make it look again.

def _parked_state(r, q):
    """`a` of group g in flight, `b` parked behind it (its own held-back key)."""
    gpush(r, q, "AT", 946684800000, "g", "a", "b")
    assert pop(r, q, "COUNT", 2, "LEASE", 60000) == [(b"a", 1)]
    assert r.exists(f"park{{{q}}}") == 1


def _known_empty(r, q):
    """Queue q used without groups and drained: the module has seen it hold no parked keys."""
    push(r, q, "PRIORITY", 1, "x")
    assert pop(r, q) == [(b"x", 1)] and ack(r, q, "x") == 1
    assert rmq_info(r, q)["waiting"] == 0 and r.keys("*") == []


def _assert_parked_found(r, q):
    i = rmq_info(r, q)
    assert (i["waiting"], i["inflight"]) == (1, 1), i
    assert pop(r, q) is None, "b held back"
    assert ack(r, q, "a") == 1
    assert pop(r, q) == [(b"b", 1)]


def _move_keys(r, pattern, how):
    """Moves the keys matching `pattern` from queue src to queue q by RESTORE, COPY or
    RENAME (the first two drop the source)."""
    for k in r.keys(pattern):
        to = k.replace(b"src", b"q")
        if how == "restore":
            r.restore(to, 0, r.dump(k))
            r.delete(k)
        elif how == "copy":
            r.copy(k, to)
            r.delete(k)
        else:
            r.rename(k, to)


@pytest.mark.parametrize("how", ["restore", "copy", "rename"])
def test_held_back_keys_that_arrive_are_found(r, how):
    _known_empty(r, "q")
    _parked_state(r, "src")
    _move_keys(r, "*", how)
    _assert_parked_found(r, "q")


def test_held_back_keys_found_after_swapdb(server, r):
    r1 = server.client(db=1)
    _known_empty(r, "q")
    _parked_state(r1, "q")
    r.swapdb(0, 1)
    _assert_parked_found(r, "q")


def test_held_back_keys_found_after_debug_reload(start_server):
    c = start_server(extra_conf=["--enable-debug-command", "yes"]).client()
    _parked_state(c, "q")
    c.save()
    assert ack(c, "q", "a") == 1 and pop(c, "q") == [(b"b", 1)] and ack(c, "q", "b") == 1
    assert rmq_info(c, "q")["waiting"] == 0 and c.keys("*") == []
    c.execute_command("DEBUG", "RELOAD", "NOSAVE")
    _assert_parked_found(c, "q")


def test_held_back_keys_found_on_a_replica(start_server):
    p = start_server()
    c = p.client()
    rc = start_replica(start_server, p).client()
    _known_empty(c, "q")
    assert wait_replica_matches(c, rc)
    assert rmq_info(rc, "q")["waiting"] == 0
    _parked_state(c, "q")
    assert wait_replica_matches(c, rc)
    i = rmq_info(rc, "q")
    assert (i["waiting"], i["inflight"]) == (1, 1), i


def _pop_usec(r, q, *opts):
    """One RMQ.POP and the server time it took (INFO commandstats, after a reset)."""
    r.config_resetstat()
    got = pop(r, q, *opts)
    return got, r.info("commandstats")["cmdstat_rmq.pop"]["usec"]


def _fill_group(r, q, group, n, prefix, batch=5000):
    for i in range(0, n, batch):
        gpush(r, q, "DELAY", 0, group, *(f"{prefix}{j}" for j in range(i, min(n, i + batch))))


def test_pop_past_a_group_just_turned_busy_does_not_grow_with_its_backlog(r):
    """The issue's shape (#21): a group's backlog while it is idle, one POP makes it busy,
    then a message of another group: POP COUNT 10 answers it at once. the v3 contract holds a
    group's later messages back from their push on, so the POP moves nothing; its server
    time is that of the same POP over a small backlog (before the fix it parked the whole
    backlog, 0.58 s for 200k)."""
    for q, n in (("small", 200), ("big", 200_000)):
        _fill_group(r, q, "G", n, "m")
        assert r.zcard(q) == 1 and r.zcard(f"park{{{q}}}") == n - 1, "held back from the push on"
        assert pop(r, q) == [(b"m0", 1)]
        gpush(r, q, "DELAY", 0, "other", "o1")
    got_small, small = _pop_usec(r, "small", "COUNT", 10)
    parked = r.zcard("park{big}")
    got_big, big = _pop_usec(r, "big", "COUNT", 10)
    assert got_small == got_big == [(b"o1", 1)]
    assert r.zcard("park{big}") == parked and r.zcard("big") == 0, "the POP moved no held-back message"
    assert big < 20 * small + 2000, f"POP past 200k held back took {big} us, {small} us past 200"
    i = rmq_info(r, "big")
    assert (i["waiting"], i["ready"], i["inflight"]) == (199_999, 199_999, 2)


def test_a_push_that_beats_the_groups_head_swaps_them(r):
    """the v3 contract: the group's first waiting message is in `Q`, the later ones behind it."""
    gpush(r, "q", "PRIORITY", 5, "g", "a", "b")
    gpush(r, "q", "PRIORITY", 9, "g", "c")
    assert zs(r, "q") == {b"c": 9.0} and zs(r, "park{q}") == {b"a": 5.0, b"b": 5.0}
    push(r, "q", "PRIORITY", 7, "loose")
    assert pop(r, "q", "COUNT", 10) == [(b"c", 1), (b"loose", 1)], "one of the group per pop"
    assert ack(r, "q", "c") == 1
    assert r.zcard("q") == 1 and r.zcard("park{q}") == 1
    assert pop(r, "q", "COUNT", 10) in ([(b"a", 1)], [(b"b", 1)])


def _v2_backlog(r, q, group, n):
    """A busy group's backlog in `Q` as the v2 contract's module left it (all in `Q` while the
    group was idle, then one delivery taken): written by hand, as a load would bring it."""
    r.zadd(q, {f"v{i}": 1000 + i for i in range(n)})
    fields = {f"wv{i}": f"0::{group}" for i in range(n)}
    fields["kind"] = "fixed"
    r.hset(f"meta{{{q}}}", mapping=fields)
    assert pop(r, q) == [(b"v0", 1)]


def test_a_v2_backlog_of_a_busy_group_in_q_is_set_aside_in_bounded_steps(server, r):
    """Messages of a busy group already in `Q` (v2 data): each POP parks at most a few
    hundred (PARK_PER_POP) and returns what it found so far; a blocked POP is served as
    soon as the rest is set aside, by the timer's steps, while PING stays quick."""
    n = 50_000
    _v2_backlog(r, "q", "G", n)
    gpush(r, "q", "DELAY", 0, "other", "o1")
    got, _ = _pop_usec(r, "q", "COUNT", 10)
    assert got is None
    assert 0 < r.zcard("park{q}") <= 256, "one POP parks a bounded number"
    t = start_blocked(server, r, "q", "COUNT", 10, "BLOCK", 20000)
    worst = 0.0
    while t.is_alive():
        t0 = time.monotonic()
        r.ping()
        worst = max(worst, time.monotonic() - t0)
        time.sleep(0.002)
    assert t.finish() == [(b"o1", 1)]
    assert r.zcard("q") == 0 and r.zcard("park{q}") == n - 1
    assert worst < 0.5, f"PING waited {worst:.3f} s while the backlog was set aside"
    assert ack(r, "q", "v0") == 1
    assert pop(r, "q") == [(b"v1", 1)], "the group goes on in order"


def _group_score(g):
    """parkidx{Q}'s score of a group: 53 bits of its FNV-1a hash (src/core/codec.rs)."""
    h = 0xcbf29ce484222325
    for b in g:
        h = ((h ^ b) * 0x100000001b3) & (2**64 - 1)
    return h & (2**53 - 1)


def _priority_index_member(score, m):
    """parkidx{Q}'s member of a message of a priority queue: its order key, then itself."""
    key = (~((score & (2**64 - 1)) ^ (1 << 63))) & (2**64 - 1)
    return key.to_bytes(8, "big") + m


def test_an_earlier_versions_group_head_record_is_tolerated(r):
    """Data of the layout before heads were indexed (a load, a replica of an older
    version): group g's head `a` waits in `Q` with an `h` record in meta{q}, `b` and `c`
    parked (and indexed) behind it. The group is still consumed one at a time in the
    queue's order, a push that beats them all goes first, and the old record goes with the
    queue."""
    r.zadd("q", {"a": 5})
    r.zadd("park{q}", {"b": 4, "c": 3})
    r.zadd("parkidx{q}", {_priority_index_member(4, b"b"): _group_score(b"g"),
                          _priority_index_member(3, b"c"): _group_score(b"g")})
    r.hset("meta{q}", mapping={"kind": "priority", "wa": "0::g", "wb": "0::g", "wc": "0::g", "hg": "a"})
    gpush(r, "q", "PRIORITY", 6, "g", "d")
    order = []
    for _ in range(4):
        got = pop(r, "q", "COUNT", 10)
        assert len(got) == 1, f"one of the group at a time: {got}"
        order.append(got[0][0])
        assert ack(r, "q", got[0][0]) == 1
    assert order == [b"d", b"a", b"b", b"c"]
    assert r.keys("*q*") == []


# Which groups are busy lives in memory (the v3 contract), filled from the in-flight records the
# first time a queue's groups are looked at. Every way a queue's keys can change without
# the module must make it read them again: here the module has looked at q and knows g
# free (c of group g waits), then q's keys are replaced by ones where g is busy.

def _known_free(r, q):
    gpush(r, q, "PRIORITY", 1, "g", "c")
    assert rmq_info(r, q)["ready"] == 1


def _assert_busy_found(r, q):
    """q's keys hold `_parked_state`: g is busy, so a new message of g is held back too."""
    gpush(r, q, "AT", 946684800001, "g", "d")
    i = rmq_info(r, q)
    assert (i["waiting"], i["inflight"]) == (2, 1), i
    assert pop(r, q) is None, "g is busy: b and d held back"
    assert ack(r, q, "a") == 1
    assert pop(r, q) == [(b"b", 1)]
    assert ack(r, q, "b") == 1
    assert pop(r, q) == [(b"d", 1)]


def _drop(r, q):
    for k in r.keys(f"*{q}*"):
        r.delete(k)


@pytest.mark.parametrize("how", ["restore", "rename", "copy", "move", "swapdb"])
def test_busy_groups_are_read_again_when_keys_arrive(server, r, how):
    r1 = server.client(db=1)
    _known_free(r, "q")
    if how in ("move", "swapdb"):
        _parked_state(r1, "q")
        if how == "swapdb":
            r.swapdb(0, 1)
        else:
            _drop(r, "q")
            for k in r1.keys("*"):
                assert r1.move(k, 0)
    else:
        _parked_state(r, "src")
        _drop(r, "q")
        _move_keys(r, "*src*", how)
    _assert_busy_found(r, "q")


def test_busy_groups_are_read_again_after_migrate(start_server):
    a, b = start_server(), start_server()
    ca, cb = a.client(), b.client()
    _known_free(ca, "q")
    _drop(ca, "q")
    _parked_state(cb, "q")
    keys = [k.decode() for k in cb.keys("*")]
    assert cb.execute_command("MIGRATE", "127.0.0.1", a.port, "", 0, 5000, "KEYS", *keys) == b"OK"
    _assert_busy_found(ca, "q")


@pytest.mark.parametrize("how", ["del", "flushall", "flushdb"])
def test_busy_groups_are_forgotten_with_the_keys(r, how):
    """The module knows g busy; the keys go by hand: a new message of g is deliverable."""
    _parked_state(r, "q")
    if how == "del":
        _drop(r, "q")
    else:
        r.execute_command(how)
    gpush(r, "q", "PRIORITY", 1, "g", "d")
    assert pop(r, "q") == [(b"d", 1)]


def test_busy_groups_are_read_again_after_a_load(start_server):
    c = start_server(extra_conf=["--enable-debug-command", "yes"]).client()
    _parked_state(c, "q")
    c.save()
    assert ack(c, "q", "a") == 1 and pop(c, "q") == [(b"b", 1)] and ack(c, "q", "b") == 1
    _known_free(c, "q")
    c.execute_command("DEBUG", "RELOAD", "NOSAVE")
    _assert_busy_found(c, "q")


def test_a_promoted_replica_reads_busy_groups_from_the_keys(start_server):
    """The replica applied effects only (its memory followed nothing): promoted, it reads
    which groups are busy from the in-flight records, also for a queue it had looked at
    while it was a primary before."""
    p, rep = start_server(), start_server()
    c, rc = p.client(), rep.client()
    _known_free(rc, "q")
    c.config_set("repl-diskless-sync-delay", 0)
    rc.execute_command("REPLICAOF", "127.0.0.1", p.port)
    _parked_state(c, "q")
    assert wait_replica_matches(c, rc, timeout=15)
    rc.execute_command("REPLICAOF", "NO", "ONE")
    _assert_busy_found(rc, "q")
