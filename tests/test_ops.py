"""RMQ.EXTEND, RMQ.CANCEL, RMQ.REPLAY, RMQ.INFO and RMQ.PENDING (docs/COMMANDS.md: Commands), sentence
by sentence: replies (RESP2 and RESP3), key contents and scores, errors (wrong arity, bad
values, braces in the queue name, WRONGTYPE) and that a command that errors changes
nothing."""

import time

import pytest

from helpers import (MIN_AT, TWO53, ack, assert_time_score, dead, expect_error,
                     expect_error_unchanged, nack, now_ms, pop, prep, push, rmq_info, snapshot,
                     state, wait_due, wait_until, zs)
from ops_support import WRONGTYPE_SETUPS, BlockedPop, meta, pairs, populate, wait_blocked
from timing_support import gone_at

TWO52 = 2 ** 52


@pytest.fixture
def retries(server, r):
    """Sets rmq.retries for one test and restores it afterwards."""
    c = server.client()
    old = c.config_get("rmq.retries")["rmq.retries"]

    def set_(n):
        c.config_set("rmq.retries", n)

    yield set_
    c.config_set("rmq.retries", old)
    c.close()


def extend(r, q, m, ms):
    return r.execute_command("RMQ.EXTEND", q, m, ms)


def cancel(r, q, *msgs):
    return r.execute_command("RMQ.CANCEL", q, *msgs)


def replay(r, q, *opts):
    return r.execute_command("RMQ.REPLAY", q, *opts)


def pending(r, q, *opts):
    return r.execute_command("RMQ.PENDING", q, *opts)


# =======================================================================================
# RMQ.EXTEND Q message ms
# =======================================================================================

def test_extend_sets_deadline_to_now_plus_ms(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q", "LEASE", 1000)
    t0 = now_ms(r)
    dl = extend(r, "q", "a", 60000)
    t1 = now_ms(r)
    assert isinstance(dl, int)
    assert_time_score(dl, t0, t1, 60000, "EXTEND reply")
    assert zs(r, prep("q")) == {b"a": float(dl)}
    assert rmq_info(r, "q")["next_expiry"] == dl
    assert pending(r, "q") == [[b"a", 1, dl, None]]


def test_extend_can_shorten_and_is_not_a_delivery(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q", "LEASE", 600000)
    t0 = now_ms(r)
    dl = extend(r, "q", "a", 5000)
    t1 = now_ms(r)
    assert_time_score(dl, t0, t1, 5000)
    assert zs(r, prep("q")) == {b"a": float(dl)}
    # extending neither counts as a delivery nor as a failure
    assert pending(r, "q") == [[b"a", 1, dl, None]]
    assert ack(r, "q", "a") == 1
    assert r.dbsize() == 0


def test_extend_bounds(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q", "LEASE", 1000)
    t0 = now_ms(r)
    dl = extend(r, "q", "a", TWO52)
    assert_time_score(dl, t0, now_ms(r), TWO52)
    assert dl < TWO53
    assert zs(r, prep("q"))[b"a"] == float(dl)
    # last: a 1 ms lease runs out at once (the timer may roll it back right after)
    t0 = now_ms(r)
    assert_time_score(extend(r, "q", "a", 1), t0, now_ms(r), 1)


def test_extend_not_in_flight_is_nil_and_changes_nothing(r):
    assert extend(r, "nothing", "a", 1000) is None
    assert r.dbsize() == 0, "EXTEND on an unknown queue must create no key"
    populate(r, "q")
    before = snapshot(r)
    assert extend(r, "q", "w", 1000) is None      # waiting only
    assert extend(r, "q", "d", 1000) is None      # dead
    assert extend(r, "q", "zz", 1000) is None     # unknown content
    assert snapshot(r) == before


def test_extend_touches_only_the_in_flight_copy(r):
    push(r, "q", "DELAY", 0, "a")
    pop(r, "q", "LEASE", 1000)
    push(r, "q", "DELAY", 30000, "a")             # a waiting copy of the same content
    store = zs(r, "q")
    dl = extend(r, "q", "a", 90000)
    assert zs(r, "q") == store
    assert zs(r, prep("q")) == {b"a": float(dl)}


def test_extend_lengthened_lease_is_not_rolled_back_by_the_timer(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q", "LEASE", 1000)
    dl = extend(r, "q", "a", 60000)
    time.sleep(1.3)                               # well past the original deadline
    assert zs(r, prep("q")) == {b"a": float(dl)}
    assert zs(r, "q") == {}


def test_extend_shortened_lease_is_rolled_back_by_the_timer(r):
    push(r, "q", "PRIORITY", 4, "a")
    pop(r, "q", "LEASE", 600000)
    dl = extend(r, "q", "a", 50)
    t = wait_until(lambda: gone_at(r, [prep("q")]), timeout=3.0)
    assert t, "the server timer did not roll back the shortened lease"
    assert t - dl < 1000, f"the shortened lease was rolled back {t - dl} ms after its deadline"
    assert zs(r, "q") == {b"a": 4.0}
    assert pop(r, "q") == [(b"a", 2)]


# =======================================================================================
# RMQ.CANCEL Q message [message ...]
# =======================================================================================

@pytest.mark.parametrize("kind,value", [("PRIORITY", 1), ("RANGE", 60000), ("DELAY", 60000),
                                        ("AT", MIN_AT)])
def test_cancel_removes_waiting_copies(r, kind, value):
    push(r, "q", kind, value, "a", "b", "c")
    assert cancel(r, "q", "a", "c") == 2
    assert list(zs(r, "q")) == [b"b"]
    assert cancel(r, "q", "b") == 1
    assert r.dbsize() == 0, "an empty queue leaves no keys"


def test_cancel_counts_each_removed_once(r):
    push(r, "q", "PRIORITY", 1, "a", "b")
    assert cancel(r, "q", "a", "a", "zz", "a") == 1
    assert cancel(r, "q", "a") == 0
    assert cancel(r, "nothing", "a") == 0
    assert set(r.keys("*")) == {b"q", meta("q")}


def test_cancel_leaves_in_flight_and_dead_alone(r):
    populate(r, "q")
    before_prep, before_dead = zs(r, prep("q")), zs(r, dead("q"))
    assert cancel(r, "q", "f", "d") == 0
    assert zs(r, prep("q")) == before_prep and zs(r, dead("q")) == before_dead
    assert cancel(r, "q", "w", "f", "d") == 1
    assert zs(r, "q") == {}
    assert zs(r, prep("q")) == before_prep and zs(r, dead("q")) == before_dead
    # the kind is kept: prepare and dead are not empty
    expect_error_unchanged(r, "RMQ.PUSH", "q", "RANGE", 10, "x", contains="kind")
    assert ack(r, "q", "f") == 1
    assert r.execute_command("RMQ.REPLAY", "q") == 1
    assert pop(r, "q") == [(b"d", 1)]


def test_cancel_waiting_copy_while_in_flight(r):
    push(r, "q", "DELAY", 0, "a")
    pop(r, "q", "LEASE", 60000)
    push(r, "q", "DELAY", 0, "a")                 # second copy, waiting
    assert cancel(r, "q", "a") == 1
    store, prepare, dd = state(r, "q")
    assert store == {} and list(prepare) == [b"a"] and dd == {}
    assert ack(r, "q", "a") == 1
    assert r.dbsize() == 0


def test_cancel_forgets_the_delivery_count(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q")
    assert nack(r, "q", "a") == b"requeued"       # waiting again, 1 delivery made
    assert cancel(r, "q", "a") == 1
    assert r.dbsize() == 0
    push(r, "q", "PRIORITY", 1, "a")
    assert pop(r, "q") == [(b"a", 1)], "a cancelled message pushed again starts afresh"


def test_cancel_binary_message(r):
    m = b"\x00\xff\r\n{x}"
    push(r, "q", "PRIORITY", 1, m, "b")
    assert cancel(r, "q", m) == 1
    assert list(zs(r, "q")) == [b"b"]


# =======================================================================================
# RMQ.REPLAY Q [COUNT n]
# =======================================================================================

def _kill(r, q, *msgs):
    """NACK ... DEAD each in-flight message, a few ms apart (distinct death times)."""
    for m in msgs:
        assert nack(r, q, m, "DEAD") == b"dead"
        time.sleep(0.003)


def test_replay_empty_is_zero(r):
    assert replay(r, "q") == 0
    assert replay(r, "q", "COUNT", 5) == 0
    assert r.dbsize() == 0
    push(r, "p", "PRIORITY", 1, "a")
    before = snapshot(r)
    assert replay(r, "p") == 0
    assert snapshot(r) == before


def test_replay_oldest_death_first_with_count(r):
    push(r, "q", "PRIORITY", 1, "a", "b", "c")
    pop(r, "q", "COUNT", 3)
    _kill(r, "q", "c", "a", "b")
    deaths = r.zrange(dead("q"), 0, -1, withscores=True)
    assert [m for m, _ in deaths] == [b"c", b"a", b"b"]
    assert deaths[0][1] < deaths[1][1] < deaths[2][1]
    assert replay(r, "q", "COUNT", 1) == 1
    assert list(zs(r, "q")) == [b"c"]
    assert list(zs(r, dead("q"))) == [b"a", b"b"]
    assert replay(r, "q", "count", 5) == 2       # more than there are: all of them
    assert sorted(zs(r, "q")) == [b"a", b"b", b"c"]
    assert r.exists(dead("q")) == 0


def test_replay_default_all(r):
    push(r, "q", "PRIORITY", 1, *[f"m{i}" for i in range(30)])
    got = pop(r, "q", "COUNT", 30)
    for m, _ in got:
        nack(r, "q", m, "DEAD")
    assert replay(r, "q") == 30
    store, prepare, dd = state(r, "q")
    assert len(store) == 30 and prepare == {} and dd == {}


def test_replay_priority_keeps_last_priority_and_resets_count(r):
    push(r, "q", "PRIORITY", 6, "a")
    push(r, "q", "PRIORITY", -3, "b")
    pop(r, "q", "COUNT", 2)
    nack(r, "q", "a")
    nack(r, "q", "b")
    assert pop(r, "q", "COUNT", 2) == [(b"a", 2), (b"b", 2)]
    _kill(r, "q", "a", "b")
    assert replay(r, "q") == 2
    store, prepare, dd = state(r, "q")
    assert store == {b"a": 6.0, b"b": -3.0} and prepare == {} and dd == {}
    assert pop(r, "q", "COUNT", 2) == [(b"a", 1), (b"b", 1)]


@pytest.mark.parametrize("kind,value", [("RANGE", 1), ("DELAY", 0), ("AT", MIN_AT)])
def test_replay_timed_is_due_now(r, kind, value):
    push(r, "q", kind, value, "a")
    wait_due(r, 2)
    pop(r, "q")
    nack(r, "q", "a", "DEAD")
    time.sleep(0.005)
    t0 = now_ms(r)
    assert replay(r, "q") == 1
    t1 = now_ms(r)
    assert_time_score(zs(r, "q")[b"a"], t0, t1, 0, "due time after REPLAY")
    assert rmq_info(r, "q")["ready"] == 1
    assert pop(r, "q") == [(b"a", 1)]


def test_replay_after_retries_used_up_gives_full_retries_again(r, retries):
    retries(1)
    push(r, "q", "PRIORITY", 2, "a")
    pop(r, "q")
    assert nack(r, "q", "a") == b"requeued"
    assert pop(r, "q") == [(b"a", 2)]
    assert nack(r, "q", "a") == b"dead"           # 1 retry after the first delivery
    assert replay(r, "q") == 1
    assert zs(r, "q") == {b"a": 2.0}
    assert pop(r, "q") == [(b"a", 1)]
    assert nack(r, "q", "a") == b"requeued"
    assert pop(r, "q") == [(b"a", 2)]
    assert nack(r, "q", "a") == b"dead"


def test_replay_merges_range_keeps_waiting_due_time(r):
    push(r, "q", "RANGE", 1, "a")
    wait_due(r, 2)
    pop(r, "q")
    nack(r, "q", "a", "DEAD")
    push(r, "q", "RANGE", 60000, "a")              # new waiting copy, due in 60 s
    due = zs(r, "q")[b"a"]
    assert replay(r, "q") == 1
    store, prepare, dd = state(r, "q")
    assert store == {b"a": due} and prepare == {} and dd == {}
    assert pop(r, "q") is None


def test_replay_merges_fixed_keeps_waiting_due_time(r):
    """the contract REPLAY: a content already waiting merges into the waiting copy, which keeps its
    score (it is the newer): a replayed order time-out must not fire early."""
    push(r, "q", "DELAY", 0, "a")
    pop(r, "q")
    nack(r, "q", "a", "DEAD")
    push(r, "q", "DELAY", 60000, "a")
    due = zs(r, "q")[b"a"]
    assert replay(r, "q") == 1
    store, _, dd = state(r, "q")
    assert dd == {} and store == {b"a": due}
    assert pop(r, "q") is None


def test_replay_merges_priority_keeps_waiting_priority(r):
    push(r, "q", "PRIORITY", 3, "a")
    pop(r, "q")
    push(r, "q", "PRIORITY", 9, "a")              # waiting copy while the other is in flight
    assert nack(r, "q", "a", "DEAD") == b"dead"   # died with priority 3
    assert zs(r, "q") == {b"a": 9.0}
    assert replay(r, "q") == 1
    assert zs(r, "q") == {b"a": 9.0}, "a stale priority does not overwrite the fresh one"
    assert zs(r, dead("q")) == {}


def test_replay_merge_resets_inherited_delivery_count(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q")
    nack(r, "q", "a", "DEAD")                    # a dead
    push(r, "q", "PRIORITY", 1, "a")              # fresh waiting copy
    assert pop(r, "q") == [(b"a", 1)]
    push(r, "q", "PRIORITY", 1, "a")              # waiting copy while in flight
    assert nack(r, "q", "a") == b"requeued"       # merges: the waiting copy inherits 1
    assert replay(r, "q") == 1                    # dead copy merges into the waiting one
    store, prepare, dd = state(r, "q")
    assert store == {b"a": 1.0} and prepare == {} and dd == {}
    assert pop(r, "q") == [(b"a", 1)], "REPLAY resets the delivery count to fresh"


def test_replay_while_same_content_in_flight(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q")
    nack(r, "q", "a", "DEAD")
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q", "LEASE", 60000)                    # a in flight, a dead
    assert replay(r, "q") == 1
    store, prepare, dd = state(r, "q")
    assert store == {b"a": 1.0} and list(prepare) == [b"a"] and dd == {}
    assert pop(r, "q") is None, "the waiting copy is not delivered while a is in flight"
    assert ack(r, "q", "a") == 1
    assert pop(r, "q") == [(b"a", 1)]


def test_replay_keeps_kind_until_empty(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q")
    nack(r, "q", "a", "DEAD")
    assert zs(r, "q") == {} and zs(r, prep("q")) == {}
    expect_error_unchanged(r, "RMQ.PUSH", "q", "DELAY", 0, "x", contains="kind")
    assert rmq_info(r, "q")["kind"] == b"priority"
    assert replay(r, "q") == 1
    pop(r, "q")
    ack(r, "q", "a")
    assert r.dbsize() == 0
    assert push(r, "q", "DELAY", 0, "x") == 1


def test_replay_wakes_blocked_consumer(server, r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q")
    nack(r, "q", "a", "DEAD")
    b = BlockedPop(server, "q", "BLOCK", 5000)
    assert wait_blocked(r, 1), "consumer did not block"
    assert replay(r, "q") == 1
    assert b.finish() == [[b"a", 1]]


# =======================================================================================
# RMQ.INFO Q
# =======================================================================================

INFO_FIELDS = ("kind", "waiting", "ready", "inflight", "dead", "next_due", "next_expiry")


def test_info_unknown_queue(r):
    info = rmq_info(r, "nothing")
    assert set(INFO_FIELDS) <= set(info)
    assert info["kind"] is None and info["next_due"] is None and info["next_expiry"] is None
    assert [info[f] for f in ("waiting", "ready", "inflight", "dead")] == [0, 0, 0, 0]
    assert r.dbsize() == 0, "INFO creates no key"


def test_info_resp2_flat_array(r):
    populate(r, "q")
    rep = r.execute_command("RMQ.INFO", "q")
    assert isinstance(rep, list) and len(rep) % 2 == 0
    names = rep[0::2]
    assert all(isinstance(n, bytes) for n in names)
    assert set(INFO_FIELDS) <= {n.decode() for n in names}
    d = pairs(rep)
    assert d["kind"] == b"priority"
    assert (d["waiting"], d["ready"], d["inflight"], d["dead"]) == (1, 1, 1, 1)
    assert d["next_due"] is None
    assert d["next_expiry"] == int(zs(r, prep("q"))[b"f"])


def test_info_resp3_map(server, r):
    populate(r, "q")
    c3 = server.client(protocol=3)
    rep = c3.execute_command("RMQ.INFO", "q")
    assert isinstance(rep, dict), f"RESP3 reply should be a map: {rep!r}"
    d = pairs(rep)
    assert set(INFO_FIELDS) <= set(d)
    assert d["kind"] == b"priority" and d["waiting"] == 1 and d["next_due"] is None
    assert pairs(c3.execute_command("RMQ.INFO", "nothing"))["kind"] is None


def test_info_fixed_ready_and_next_due(r):
    t = now_ms(r)
    push(r, "q", "AT", t + 60000, "later")
    push(r, "q", "AT", t - 5000, "overdue1")
    push(r, "q", "AT", t - 1000, "overdue2")
    info = rmq_info(r, "q")
    assert info["kind"] == b"fixed"
    assert info["waiting"] == 3 and info["ready"] == 2
    assert info["next_due"] == t - 5000, "earliest due time, even if overdue"
    assert info["inflight"] == 0 and info["next_expiry"] is None
    pop(r, "q", "COUNT", 2, "LEASE", 30000)
    info = rmq_info(r, "q")
    assert info["waiting"] == 1 and info["ready"] == 0 and info["inflight"] == 2
    assert info["next_due"] == t + 60000
    prepare = zs(r, prep("q"))
    assert info["next_expiry"] == int(min(prepare.values()))


def test_info_range_next_due_is_first_push_plus_range(r):
    t0 = now_ms(r)
    push(r, "q", "RANGE", 60000, "a")
    t1 = now_ms(r)
    push(r, "q", "RANGE", 1000, "a")              # merged: keeps the due time
    info = rmq_info(r, "q")
    assert info["kind"] == b"range"
    assert info["waiting"] == 1 and info["ready"] == 0
    assert_time_score(info["next_due"], t0, t1, 60000, "next_due")
    assert info["next_due"] == int(zs(r, "q")[b"a"])


def test_info_priority_ready_is_all_waiting(r):
    push(r, "q", "PRIORITY", 5, "a", "b", "c")
    push(r, "q", "PRIORITY", -5, "d")
    pop(r, "q", "LEASE", 60000)
    info = rmq_info(r, "q")
    assert info["kind"] == b"priority"
    assert info["waiting"] == 3 and info["ready"] == 3 and info["inflight"] == 1
    assert info["next_due"] is None


def test_info_counts_waiting_copy_of_in_flight_content(r):
    push(r, "q", "DELAY", 0, "a")
    pop(r, "q", "LEASE", 60000)
    push(r, "q", "DELAY", 0, "a")
    info = rmq_info(r, "q")
    # the contract: ready = waiting and due now; the copy is both (though POP skips it for now)
    assert info["waiting"] == 1 and info["ready"] == 1 and info["inflight"] == 1


def test_info_dead_only_and_after_extend(r):
    push(r, "q", "DELAY", 0, "a", "b")
    pop(r, "q", "COUNT", 2, "LEASE", 30000)
    nack(r, "q", "a", "DEAD")
    dl = r.execute_command("RMQ.EXTEND", "q", "b", 90000)
    info = rmq_info(r, "q")
    assert (info["waiting"], info["ready"], info["inflight"], info["dead"]) == (0, 0, 1, 1)
    assert info["next_expiry"] == dl and info["next_due"] is None
    ack(r, "q", "b")
    info = rmq_info(r, "q")
    assert info["kind"] == b"fixed", "kind kept while dead holds a message"
    assert (info["inflight"], info["dead"], info["next_expiry"]) == (0, 1, None)
    r.execute_command("RMQ.REPLAY", "q")
    pop(r, "q")
    ack(r, "q", "a")
    assert rmq_info(r, "q")["kind"] is None
    assert r.dbsize() == 0


def test_info_is_read_only(r):
    populate(r, "q")
    before = snapshot(r)
    for _ in range(3):
        rmq_info(r, "q")
    assert snapshot(r) == before


# =======================================================================================
# RMQ.PENDING Q [COUNT n]
# =======================================================================================

def test_pending_empty(r):
    assert pending(r, "nothing") == []
    push(r, "q", "PRIORITY", 1, "a")
    assert pending(r, "q") == []
    assert pending(r, "q", "COUNT", 5) == []
    assert r.keys("*") and r.exists(prep("q")) == 0


def test_pending_entries_soonest_deadline_first(r):
    push(r, "q", "PRIORITY", 3, "a")
    push(r, "q", "PRIORITY", 2, "b")
    push(r, "q", "PRIORITY", 1, "c")
    pop(r, "q", "LEASE", 30000)                   # a
    pop(r, "q", "LEASE", 10000)                   # b
    pop(r, "q", "LEASE", 20000)                   # c
    rep = pending(r, "q")
    prepare = zs(r, prep("q"))
    assert [e[0] for e in rep] == [b"b", b"c", b"a"]
    for m, n, dl, group in rep:
        assert n == 1 and isinstance(dl, int) and dl == int(prepare[m]) and group is None
    assert pending(r, "q", "COUNT", 2) == rep[:2]
    assert pending(r, "q", "count", 1) == rep[:1]


def test_pending_delivery_counts_and_only_in_flight(r):
    populate(r, "q")                              # w waiting, f in flight, d dead
    push(r, "q", "PRIORITY", 9, "x")
    pop(r, "q")                                    # x
    nack(r, "q", "x")
    assert pop(r, "q", "LEASE", 5000) == [(b"x", 2)]
    rep = pending(r, "q")
    assert sorted((e[0], e[1]) for e in rep) == [(b"f", 1), (b"x", 2)]
    assert rep[0][0] == b"x", "x has the sooner deadline"


def test_pending_follows_extend(r):
    push(r, "q", "PRIORITY", 1, "a", "b")
    pop(r, "q", "COUNT", 2, "LEASE", 30000)
    first = pending(r, "q")[0][0]
    dl = r.execute_command("RMQ.EXTEND", "q", first, 60000)
    rep = pending(r, "q")
    assert rep[1] == [first, 1, dl, None]


def test_pending_default_count_is_100(r):
    msgs = [f"m{i:03d}" for i in range(120)]
    push(r, "q", "PRIORITY", 1, *msgs)
    assert len(pop(r, "q", "COUNT", 120, "LEASE", 600000)) == 120
    assert len(pending(r, "q")) == 100
    assert len(pending(r, "q", "COUNT", 120)) == 120
    assert len(pending(r, "q", "COUNT", 1000000)) == 120
    assert sorted(e[0] for e in pending(r, "q", "COUNT", 500)) == [m.encode() for m in msgs]


def test_pending_resp3(server, r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q", "LEASE", 60000)
    c3 = server.client(protocol=3)
    rep = c3.execute_command("RMQ.PENDING", "q")
    assert rep == [[b"a", 1, int(zs(r, prep("q"))[b"a"]), None]]
    assert c3.execute_command("RMQ.PENDING", "nothing") == []


# =======================================================================================
# errors: wrong arity, bad values, queue names, WRONGTYPE -- and nothing changes
# =======================================================================================

ERRORS = [
    # EXTEND
    (("RMQ.EXTEND",), "wrong number of arguments"),
    (("RMQ.EXTEND", "q"), "wrong number of arguments"),
    (("RMQ.EXTEND", "q", "f"), "wrong number of arguments"),
    (("RMQ.EXTEND", "q", "f", "10", "x"), "wrong number of arguments"),
    (("RMQ.EXTEND", "q", "f", "0"), "EXTEND"),
    (("RMQ.EXTEND", "q", "f", "-1"), "EXTEND"),
    (("RMQ.EXTEND", "q", "f", "1.5"), "EXTEND"),
    (("RMQ.EXTEND", "q", "f", "abc"), "EXTEND"),
    (("RMQ.EXTEND", "q", "f", ""), "EXTEND"),
    (("RMQ.EXTEND", "q", "f", " 10"), "EXTEND"),
    (("RMQ.EXTEND", "q", "f", str(TWO52 + 1)), "EXTEND"),
    (("RMQ.EXTEND", "q", "f", "99999999999999999999999"), "EXTEND"),
    (("RMQ.EXTEND", "q{x}", "f", "10"), "queue name"),
    # CANCEL
    (("RMQ.CANCEL",), "wrong number of arguments"),
    (("RMQ.CANCEL", "q"), "wrong number of arguments"),
    (("RMQ.CANCEL", "{q}", "w"), "queue name"),
    # REPLAY
    (("RMQ.REPLAY",), "wrong number of arguments"),
    (("RMQ.REPLAY", "q", "COUNT", "0"), "COUNT"),
    (("RMQ.REPLAY", "q", "COUNT", "-1"), "COUNT"),
    (("RMQ.REPLAY", "q", "COUNT", "x"), "COUNT"),
    (("RMQ.REPLAY", "q", "COUNT", "1.0"), "COUNT"),
    (("RMQ.REPLAY", "q", "COUNT"), "syntax"),
    (("RMQ.REPLAY", "q", "LIMIT", "1"), "syntax"),
    (("RMQ.REPLAY", "q", "FOO"), "syntax"),
    (("RMQ.REPLAY", "q", "COUNT", "1", "x"), "wrong number of arguments"),
    (("RMQ.REPLAY", "q}", "COUNT", "1"), "queue name"),
    # INFO
    (("RMQ.INFO",), "wrong number of arguments"),
    (("RMQ.INFO", "q", "x"), "wrong number of arguments"),
    (("RMQ.INFO", "a{b"), "queue name"),
    # PENDING
    (("RMQ.PENDING",), "wrong number of arguments"),
    (("RMQ.PENDING", "q", "COUNT", "0"), "COUNT"),
    (("RMQ.PENDING", "q", "COUNT", "1000001"), "COUNT"),
    (("RMQ.PENDING", "q", "COUNT", "-5"), "COUNT"),
    (("RMQ.PENDING", "q", "COUNT", "ten"), "COUNT"),
    (("RMQ.PENDING", "q", "COUNT"), "syntax"),
    (("RMQ.PENDING", "q", "LIMIT", "5"), "syntax"),
    (("RMQ.PENDING", "q", "COUNT", "5", "x"), "wrong number of arguments"),
    (("RMQ.PENDING", "{}"), "queue name"),
]


@pytest.mark.parametrize("args,contains", ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_errors_change_nothing(r, args, contains):
    populate(r, "q")
    msg = expect_error_unchanged(r, *args, contains=contains)
    assert not msg.startswith("WRONGTYPE")


def test_errors_on_unknown_queue_create_nothing(r):
    for args, contains in ERRORS:
        expect_error(r, *args, contains=contains)
    assert r.dbsize() == 0


OPS = {
    "RMQ.EXTEND": ["f", "1000"],
    "RMQ.CANCEL": ["w"],
    "RMQ.REPLAY": [],
    "RMQ.INFO": [],
    "RMQ.PENDING": [],
}


@pytest.mark.parametrize("setup", list(WRONGTYPE_SETUPS))
@pytest.mark.parametrize("cmd", list(OPS))
def test_wrongtype(r, cmd, setup):
    populate(r, "q")
    if setup.startswith("store"):
        r.delete("q")                             # the store key must be free to hold a string
    elif setup.startswith("prepare"):
        r.delete(prep("q"))
    elif setup.startswith("dead"):
        r.delete(dead("q"))
    else:
        r.delete(meta("q"))
    WRONGTYPE_SETUPS[setup](r, "q")
    msg = expect_error_unchanged(r, cmd, "q", *OPS[cmd])
    assert msg.startswith("WRONGTYPE"), msg


@pytest.mark.parametrize("cmd", list(OPS))
def test_wrongtype_on_fresh_key(r, cmd):
    r.set("s", "x")
    msg = expect_error_unchanged(r, cmd, "s", *OPS[cmd])
    assert msg.startswith("WRONGTYPE"), msg
