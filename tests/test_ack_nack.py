"""RMQ.ACK and RMQ.NACK (plus the retry policy, REPLAY and EXTEND basics)."""

import time

import pytest

from helpers import (MIN_AT, ack, assert_time_score, dead, expect_error_unchanged,
                     nack, now_ms, pop, pop_expire_sweep, prep, push, rmq_info, state, wait_due,
                     wait_until, zs)


# ---------------------------------------------------------------------------------------
# ACK
# ---------------------------------------------------------------------------------------

def test_ack_ends_delivery_and_leaves_no_keys(r):
    push(r, "q", "PRIORITY", 1, "a")
    assert pop(r, "q") == [(b"a", 1)]
    assert ack(r, "q", "a") == 1
    assert r.dbsize() == 0
    assert r.keys("*") == []


@pytest.mark.parametrize("way", ["hset", "restore"])
def test_a_delivery_count_written_by_another_command_is_read(r, way):
    """Whether `meta{Q}` holds waiting copies' records is known in memory (a pop skips the
    lookups while it holds none): one written by another command is still read."""
    push(r, "q", "PRIORITY", 1, "a")
    push(r, "q", "PRIORITY", 2, "b")
    assert pop(r, "q") == [(b"b", 1)]
    if way == "hset":
        r.hset("meta{q}", "wa", "4")
    else:
        # The same queue's keys from another server's view: `a` delivered 4 times before.
        r.hset("tmp{q}", mapping={**r.hgetall("meta{q}"), "wa": "4"})
        r.restore("meta{q}", 0, r.dump("tmp{q}"), replace=True)
        r.delete("tmp{q}")
    assert pop(r, "q") == [(b"a", 5)]
    assert nack(r, "q", "b") == b"requeued"
    assert pop(r, "q") == [(b"b", 2)], "a rollback's record, written by the module"
    assert ack(r, "q", "a", "b") == 2
    assert r.dbsize() == 0


def test_records_outliving_their_queue_are_still_read(r):
    """A queue with a policy keeps `meta{Q}` when it empties; a waiting record left there
    by keys deleted by hand is read as before (the queue is not assumed free of records)."""
    r.execute_command("RMQ.POLICY", "q", "SET", "retries", 5)
    push(r, "q", "PRIORITY", 1, "a")
    assert pop(r, "q") == [(b"a", 1)]
    assert nack(r, "q", "a") == b"requeued"
    r.delete("q")                     # the waiting copy goes, its record stays
    push(r, "q", "PRIORITY", 1, "b")
    assert pop(r, "q") == [(b"b", 1)] and ack(r, "q", "b") == 1
    push(r, "q", "PRIORITY", 1, "a")
    assert pop(r, "q") == [(b"a", 2)]
    assert ack(r, "q", "a") == 1
    push(r, "q", "PRIORITY", 1, "c")
    assert pop(r, "q") == [(b"c", 1)] and ack(r, "q", "c") == 1


def test_records_of_large_and_small_messages_in_turn(r):
    """Records' field names are built in a buffer kept between commands (let go once a
    large message has grown it): a large content's record and then shorter ones' are each
    exactly their own, binary-safe."""
    big, small = b"\x00b" * 5000, b"s\x00"
    for m in (big, small, big[:3], small):
        push(r, "q", "PRIORITY", 3, m)
        assert pop(r, "q") == [(m, 1)]
        assert r.hget("meta{q}", b"f" + m) is not None
        assert nack(r, "q", m) == b"requeued"
        assert pop(r, "q") == [(m, 2)]
        assert sorted(k for k in r.hkeys("meta{q}") if k[:1] == b"f") == [b"f" + m]
        assert ack(r, "q", m) == 1
    assert r.dbsize() == 0


def test_in_flight_records_alike_and_not_in_turn(r):
    """A POP writes the last in-flight record's value again for the same flight (kept
    between commands and queues): records of alike and differing flights, in one POP and
    across POPs of two queues, each restore their own priority and count."""
    push(r, "q", "PRIORITY", 5, "a", "b")
    push(r, "q", "PRIORITY", 4, "c")
    push(r, "q", "PRIORITY", 3, "d")
    push(r, "q2", "PRIORITY", 5, "e")
    assert sorted(pop(r, "q", "COUNT", 2)) == [(b"a", 1), (b"b", 1)]
    assert nack(r, "q", "a") == b"requeued"
    # a (second delivery, 5), c (4), d (3): a differing flight each, then alike with q2's.
    assert sorted(pop(r, "q", "COUNT", 3)) == [(b"a", 2), (b"c", 1), (b"d", 1)]
    assert pop(r, "q2") == [(b"e", 1)]
    for m in ("a", "b", "c", "d"):
        assert nack(r, "q", m) == b"requeued"
    assert nack(r, "q2", "e") == b"requeued"
    store, prepare, _ = state(r, "q")
    assert prepare == {} and store == {b"a": 5.0, b"b": 5.0, b"c": 4.0, b"d": 3.0}
    assert state(r, "q2")[0] == {b"e": 5.0}
    assert sorted(pop(r, "q", "COUNT", 4)) == [(b"a", 3), (b"b", 2), (b"c", 2), (b"d", 2)]
    assert pop(r, "q2") == [(b"e", 2)]


def test_ack_counts_only_in_flight(r):
    push(r, "q", "PRIORITY", 1, "a", "b", "c", "w")
    pop(r, "q", "COUNT", 10)
    push(r, "q", "PRIORITY", 1, "w2")
    # a, b in flight; w2 waiting only; zz unknown
    assert ack(r, "q", "a", "b", "w2", "zz") == 2
    store, prepare, _ = state(r, "q")
    assert set(prepare) == {b"c", b"w"}
    assert store == {b"w2": 1.0}
    # acking again: no longer in flight
    assert ack(r, "q", "a", "b") == 0


def test_ack_waiting_only_message_is_zero_and_changes_nothing(r):
    push(r, "q", "PRIORITY", 1, "a")
    assert ack(r, "q", "a") == 0
    assert zs(r, "q") == {b"a": 1.0}
    assert pop(r, "q") == [(b"a", 1)]


def test_ack_unknown_queue_is_zero_and_creates_nothing(r):
    assert ack(r, "nothing", "a", "b") == 0
    assert r.dbsize() == 0


def test_ack_too_late_after_rollback_is_zero(r):
    push(r, "q", "PRIORITY", 4, "a")
    popped, swept, left = pop_expire_sweep(r, "q", lease=1, wait_ms=4)
    assert popped == [(b"a", 1)]
    assert swept == 1 and left == 0
    assert ack(r, "q", "a") == 0
    assert zs(r, "q") == {b"a": 4.0}
    assert pop(r, "q") == [(b"a", 2)]


def test_ack_too_late_after_timer_rollback_is_zero(r):
    push(r, "q", "PRIORITY", 4, "a")
    assert pop(r, "q", "LEASE", 20) == [(b"a", 1)]
    time.sleep(0.03)
    r.execute_command("RMQ.SWEEP", "q")  # in case the timer has not run yet
    assert ack(r, "q", "a") == 0
    assert zs(r, "q") == {b"a": 4.0}


def test_ack_keeps_newer_waiting_copy(r):
    push(r, "q", "PRIORITY", 1, "m")
    assert pop(r, "q") == [(b"m", 1)]
    assert nack(r, "q", "m") == b"requeued"
    assert pop(r, "q") == [(b"m", 2)]
    assert push(r, "q", "PRIORITY", 3, "m") == 1
    assert ack(r, "q", "m") == 1
    store, prepare, dd = state(r, "q")
    assert store == {b"m": 3.0} and prepare == {} and dd == {}
    assert pop(r, "q") == [(b"m", 1)]  # fresh count
    assert ack(r, "q", "m") == 1
    assert r.dbsize() == 0


def test_ack_arity(r):
    expect_error_unchanged(r, "RMQ.ACK", "q", contains="wrong number of arguments")
    expect_error_unchanged(r, "RMQ.ACK", contains="wrong number of arguments")


# ---------------------------------------------------------------------------------------
# NACK: requeue
# ---------------------------------------------------------------------------------------

def test_nack_priority_keeps_delivered_priority(r):
    push(r, "q", "PRIORITY", 7, "a")
    push(r, "q", "PRIORITY", 1, "b")
    assert pop(r, "q") == [(b"a", 1)]
    assert nack(r, "q", "a") == b"requeued"
    store, prepare, dd = state(r, "q")
    assert store == {b"a": 7.0, b"b": 1.0}
    assert prepare == {} and dd == {}
    assert pop(r, "q") == [(b"a", 2)]


@pytest.mark.parametrize("kind", ["range", "fixed"])
def test_nack_range_fixed_due_now(r, kind):
    if kind == "range":
        push(r, "q", "RANGE", 1, "a")
        wait_due(r, 2)
    else:
        push(r, "q", "AT", MIN_AT, "a")
    assert pop(r, "q") == [(b"a", 1)]
    t0 = now_ms(r)
    assert nack(r, "q", "a") == b"requeued"
    t1 = now_ms(r)
    store, prepare, _ = state(r, "q")
    assert prepare == {}
    assert_time_score(store[b"a"], t0, t1, 0, "due time")
    assert pop(r, "q") == [(b"a", 2)]


def test_nack_priority_uses_priority_delivered_with_not_later_push(r):
    push(r, "q", "PRIORITY", 5, "m")
    assert pop(r, "q") == [(b"m", 1)]
    assert push(r, "q", "PRIORITY", 9, "m") == 1            # waiting copy, priority 9
    assert r.execute_command("RMQ.CANCEL", "q", "m") == 1    # copy removed again
    assert nack(r, "q", "m") == b"requeued"
    assert zs(r, "q") == {b"m": 5.0}
    assert pop(r, "q") == [(b"m", 2)]


@pytest.mark.parametrize("kind", ["range", "fixed"])
def test_nack_delay_range_fixed(r, kind):
    if kind == "range":
        push(r, "q", "RANGE", 1, "a")
        wait_due(r, 2)
    else:
        push(r, "q", "DELAY", 0, "a")
    assert pop(r, "q") == [(b"a", 1)]
    t0 = now_ms(r)
    assert nack(r, "q", "a", "DELAY", 60000) == b"requeued"
    t1 = now_ms(r)
    assert_time_score(zs(r, "q")[b"a"], t0, t1, 60000, "due time")
    assert pop(r, "q") is None


def test_nack_delay_short_then_deliverable(r):
    push(r, "q", "AT", MIN_AT, "a")
    pop(r, "q")
    assert nack(r, "q", "a", "DELAY", 1000) == b"requeued"
    assert pop(r, "q") is None
    wait_due(r, 1002)
    assert pop(r, "q") == [(b"a", 2)]


def test_nack_delay_zero_allowed(r):
    push(r, "q", "RANGE", 1, "a")
    wait_due(r, 2)
    pop(r, "q")
    assert nack(r, "q", "a", "DELAY", 0) == b"requeued"
    assert pop(r, "q") == [(b"a", 2)]


def test_nack_delay_on_priority_queue_holds_back(r):
    """the contract NACK: on a priority queue a delay holds the message back until now + delay,
    after which it competes with its priority again."""
    push(r, "q", "PRIORITY", 5, "a")
    push(r, "q", "PRIORITY", 1, "b")
    assert pop(r, "q") == [(b"a", 1)]
    t0 = now_ms(r)
    assert nack(r, "q", "a", "DELAY", 1500) == b"requeued"
    t1 = now_ms(r)
    assert zs(r, "q") == {b"b": 1.0}, "held back: not in the store"
    release = zs(r, "hold{q}")[b"a"]
    assert t0 + 1500 <= release <= t1 + 1500
    i = rmq_info(r, "q")
    assert (i["waiting"], i["ready"], i["next_due"]) == (2, 1, int(release))
    assert pop(r, "q", "COUNT", 10) == [(b"b", 1)], "the lower priority goes first while a is held"
    assert pop(r, "q") is None
    wait_until(lambda: now_ms(r) >= release, timeout=10, interval=0.02)
    assert rmq_info(r, "q")["ready"] == 1
    assert pop(r, "q") == [(b"a", 2)]
    assert nack(r, "q", "a", "DELAY", 0) == b"requeued", "DELAY 0: no hold"
    assert zs(r, "q") == {b"a": 5.0} and zs(r, "hold{q}") == {}


def test_nack_delay_bad_values(r):
    push(r, "q", "RANGE", 1, "a")
    wait_due(r, 2)
    pop(r, "q")
    for bad in (-1, "abc", "", "1.5", 2 ** 64):
        expect_error_unchanged(r, "RMQ.NACK", "q", "a", "DELAY", bad, contains="DELAY")
    expect_error_unchanged(r, "RMQ.NACK", "q", "a", "DELAY")


def test_nack_syntax(r):
    push(r, "q", "RANGE", 1, "a")
    wait_due(r, 2)
    pop(r, "q")
    expect_error_unchanged(r, "RMQ.NACK", "q", "a", "BOGUS", contains="syntax")
    expect_error_unchanged(r, "RMQ.NACK", "q", contains="wrong number of arguments")
    expect_error_unchanged(r, "RMQ.NACK", contains="wrong number of arguments")


# ---------------------------------------------------------------------------------------
# NACK: dead, nil
# ---------------------------------------------------------------------------------------

def test_nack_dead(r):
    push(r, "q", "PRIORITY", 1, "a", "b")
    pop(r, "q", "COUNT", 2)
    t0 = now_ms(r)
    assert nack(r, "q", "a", "DEAD") == b"dead"
    t1 = now_ms(r)
    store, prepare, dd = state(r, "q")
    assert store == {}
    assert list(prepare) == [b"b"]
    assert list(dd) == [b"a"]
    assert_time_score(dd[b"a"], t0, t1, 0, "death time")
    # a dead message is not in flight any more
    assert nack(r, "q", "a") is None
    assert ack(r, "q", "a") == 0


def test_nack_dead_with_delay_goes_dead(r):
    push(r, "q", "RANGE", 1, "a")
    wait_due(r, 2)
    pop(r, "q")
    assert nack(r, "q", "a", "DELAY", 100, "DEAD") == b"dead"
    assert list(zs(r, dead("q"))) == [b"a"]
    assert r.exists("q", prep("q")) == 0


def test_nack_not_in_flight_is_nil(r):
    assert nack(r, "q", "a") is None
    assert r.dbsize() == 0
    push(r, "q", "PRIORITY", 1, "a")
    assert nack(r, "q", "a") is None
    assert nack(r, "q", "zz", "DEAD") is None
    assert zs(r, "q") == {b"a": 1.0}
    assert r.exists(prep("q"), dead("q")) == 0


def test_nack_dead_keeps_newer_waiting_copy(r):
    push(r, "q", "PRIORITY", 1, "m")
    pop(r, "q")
    nack(r, "q", "m")
    assert pop(r, "q") == [(b"m", 2)]
    push(r, "q", "PRIORITY", 2, "m")
    assert nack(r, "q", "m", "DEAD") == b"dead"
    store, prepare, dd = state(r, "q")
    assert store == {b"m": 2.0} and prepare == {} and list(dd) == [b"m"]
    assert pop(r, "q") == [(b"m", 1)]


# ---------------------------------------------------------------------------------------
# NACK: merging into a newer waiting copy
# ---------------------------------------------------------------------------------------

def test_nack_merges_into_waiting_copy_priority(r):
    push(r, "q", "PRIORITY", 5, "m")
    assert pop(r, "q") == [(b"m", 1)]
    assert nack(r, "q", "m") == b"requeued"
    assert pop(r, "q") == [(b"m", 2)]
    assert push(r, "q", "PRIORITY", 9, "m") == 1
    assert nack(r, "q", "m") == b"requeued"
    store, prepare, _ = state(r, "q")
    assert store == {b"m": 9.0}  # the waiting copy keeps its score
    assert prepare == {}
    assert pop(r, "q") == [(b"m", 3)]  # and inherits the delivery count


def test_nack_merges_into_waiting_copy_range(r):
    push(r, "q", "RANGE", 1, "m")
    wait_due(r, 2)
    assert pop(r, "q") == [(b"m", 1)]
    assert push(r, "q", "RANGE", 1000, "m") == 1
    s = zs(r, "q")[b"m"]
    assert nack(r, "q", "m") == b"requeued"
    assert zs(r, "q") == {b"m": s}
    assert pop(r, "q") is None  # not due yet: it was not made due now
    wait_due(r, int(s - now_ms(r)) + 2)
    assert pop(r, "q") == [(b"m", 2)]


def test_nack_delay_merges_into_waiting_copy_keeps_score(r):
    push(r, "q", "AT", MIN_AT, "m")
    pop(r, "q")
    t = now_ms(r) + 5000
    assert push(r, "q", "AT", t, "m") == 1
    assert nack(r, "q", "m", "DELAY", 60000) == b"requeued"
    assert zs(r, "q") == {b"m": float(t)}
    assert r.exists(prep("q")) == 0


# ---------------------------------------------------------------------------------------
# retries
# ---------------------------------------------------------------------------------------

def test_retries_2_three_deliveries_then_dead(start_server):
    s = start_server(module_args=["retries", "2"])
    c = s.client()
    push(c, "q", "PRIORITY", 1, "m")
    assert pop(c, "q") == [(b"m", 1)]
    assert nack(c, "q", "m") == b"requeued"
    assert pop(c, "q") == [(b"m", 2)]
    assert nack(c, "q", "m") == b"requeued"
    assert pop(c, "q") == [(b"m", 3)]
    t0 = now_ms(c)
    assert nack(c, "q", "m") == b"dead"
    t1 = now_ms(c)
    store, prepare, dd = state(c, "q")
    assert store == {} and prepare == {}
    assert_time_score(dd[b"m"], t0, t1, 0, "death time")


def test_retries_2_dead_even_with_delay(start_server):
    s = start_server(module_args=["retries", "2"])
    c = s.client()
    push(c, "q", "AT", MIN_AT, "m")
    for n in (1, 2):
        assert pop(c, "q") == [(b"m", n)]
        assert nack(c, "q", "m", "DELAY", 0) == b"requeued"
    assert pop(c, "q") == [(b"m", 3)]
    assert nack(c, "q", "m", "DELAY", 1000) == b"dead"
    assert list(zs(c, dead("q"))) == [b"m"]


def test_retries_0_first_failure_is_dead(start_server):
    s = start_server(module_args=["retries", "0"])
    c = s.client()
    push(c, "q", "RANGE", 1, "m", "n")
    wait_due(c, 2)
    got = pop(c, "q", "COUNT", 2)
    assert sorted(got) == [(b"m", 1), (b"n", 1)]
    assert nack(c, "q", "m") == b"dead"
    assert nack(c, "q", "n", "DELAY", 5) == b"dead"
    assert set(zs(c, dead("q"))) == {b"m", b"n"}
    assert c.exists("q", prep("q")) == 0


def test_default_retries_17_deliveries(r):
    push(r, "q", "PRIORITY", 1, "m")
    for n in range(1, 17):
        assert pop(r, "q") == [(b"m", n)]
        assert nack(r, "q", "m") == b"requeued"
    assert pop(r, "q") == [(b"m", 17)]
    assert nack(r, "q", "m") == b"dead"


def test_retries_count_inherited_through_merge(start_server):
    s = start_server(module_args=["retries", "1"])
    c = s.client()
    push(c, "q", "PRIORITY", 1, "m")
    assert pop(c, "q") == [(b"m", 1)]
    push(c, "q", "PRIORITY", 1, "m")           # fresh waiting copy
    assert nack(c, "q", "m") == b"requeued"     # merges, copy inherits count 1
    assert pop(c, "q") == [(b"m", 2)]
    assert nack(c, "q", "m") == b"dead"


# ---------------------------------------------------------------------------------------
# REPLAY / EXTEND basics (supporting commands used by the scenarios above)
# ---------------------------------------------------------------------------------------

def test_replay_dead_back_to_waiting_with_fresh_count(r):
    push(r, "q", "PRIORITY", 6, "a")
    pop(r, "q")
    nack(r, "q", "a")
    assert pop(r, "q") == [(b"a", 2)]
    nack(r, "q", "a", "DEAD")
    assert r.execute_command("RMQ.REPLAY", "q") == 1
    store, prepare, dd = state(r, "q")
    assert store == {b"a": 6.0} and prepare == {} and dd == {}
    assert pop(r, "q") == [(b"a", 1)]


def test_replay_range_due_now_oldest_first_count(r):
    push(r, "q", "RANGE", 1, "a", "b")
    wait_due(r, 2)
    pop(r, "q", "COUNT", 2)
    nack(r, "q", "b", "DEAD")
    time.sleep(0.003)
    nack(r, "q", "a", "DEAD")
    t0 = now_ms(r)
    assert r.execute_command("RMQ.REPLAY", "q", "COUNT", 1) == 1
    t1 = now_ms(r)
    assert_time_score(zs(r, "q")[b"b"], t0, t1, 0, "due time")
    assert list(zs(r, dead("q"))) == [b"a"]


def test_extend_lease(r):
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q", "LEASE", 1000)
    t0 = now_ms(r)
    dl = r.execute_command("RMQ.EXTEND", "q", "a", 60000)
    t1 = now_ms(r)
    assert_time_score(dl, t0, t1, 60000, "new deadline")
    assert zs(r, prep("q")) == {b"a": float(dl)}
    assert r.execute_command("RMQ.EXTEND", "q", "zz", 1000) is None
