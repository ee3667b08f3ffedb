"""RMQ.PUSH: kinds, merge rules, bounds, limits, binary messages (docs/COMMANDS.md: Model, RMQ.PUSH)."""

import pytest

from helpers import (MIN_AT, TWO53, ack, assert_time_score, dead, expect_error,
                     expect_error_unchanged, nack, now_ms, pop, prep, push, snapshot, state,
                     wait_due, zs)


# ---------------------------------------------------------------------------------------
# replies and basic storage
# ---------------------------------------------------------------------------------------

def test_push_priority_adds_with_score(r):
    assert push(r, "q", "PRIORITY", 5, "a", "b") == 2
    assert zs(r, "q") == {b"a": 5.0, b"b": 5.0}
    assert r.exists(prep("q"), dead("q")) == 0


def test_reply_counts_only_newly_added(r):
    assert push(r, "q", "PRIORITY", 1, "a") == 1
    assert push(r, "q", "PRIORITY", 1, "a", "b") == 1
    assert push(r, "q", "PRIORITY", 1, "a", "b") == 0
    # duplicates inside one batch merge with each other
    assert push(r, "q", "PRIORITY", 1, "c", "c", "d", "c") == 2
    assert set(zs(r, "q")) == {b"a", b"b", b"c", b"d"}


def test_priority_merge_latest_wins(r):
    assert push(r, "q", "PRIORITY", 5, "a") == 1
    assert push(r, "q", "PRIORITY", -3, "a") == 0
    assert zs(r, "q") == {b"a": -3.0}
    assert push(r, "q", "PRIORITY", 100, "a") == 0
    assert zs(r, "q") == {b"a": 100.0}


def test_priority_merge_within_one_batch_latest_wins(r):
    # same content twice in one call with the same priority: one message
    assert push(r, "q", "PRIORITY", 7, "a", "a") == 1
    assert zs(r, "q") == {b"a": 7.0}


def test_priority_bounds(r):
    assert push(r, "q", "PRIORITY", TWO53, "max") == 1
    assert push(r, "q", "PRIORITY", -TWO53, "min") == 1
    assert push(r, "q", "PRIORITY", 0, "zero") == 1
    assert zs(r, "q") == {b"max": float(TWO53), b"min": float(-TWO53), b"zero": 0.0}
    for bad in (TWO53 + 1, -(TWO53 + 1), "1.5", "abc", "", "1e3", 2 ** 64):
        expect_error_unchanged(r, "RMQ.PUSH", "q", "PRIORITY", bad, "x", contains="PRIORITY")


def test_range_new_message_due_now_plus_range(r):
    t0 = now_ms(r)
    assert push(r, "q", "RANGE", 60000, "a") == 1
    t1 = now_ms(r)
    assert_time_score(zs(r, "q")[b"a"], t0, t1, 60000)


def test_range_merge_keeps_original_due_time(r):
    push(r, "q", "RANGE", 60000, "a")
    s1 = zs(r, "q")[b"a"]
    assert push(r, "q", "RANGE", 1, "a") == 0
    assert zs(r, "q") == {b"a": s1}
    assert push(r, "q", "RANGE", 120000, "a", "b") == 1
    assert zs(r, "q")[b"a"] == s1


def test_range_bounds(r):
    assert push(r, "q", "RANGE", 1, "ok") == 1
    for bad in (0, -1, "abc", "1.5", "", 2 ** 64):
        expect_error_unchanged(r, "RMQ.PUSH", "q", "RANGE", bad, "x", contains="RANGE")


def test_at_sets_due_time_exactly(r):
    t = now_ms(r) + 60000
    assert push(r, "q", "AT", t, "a") == 1
    assert zs(r, "q") == {b"a": float(t)}


def test_at_merge_latest_wins_later_and_earlier(r):
    t = now_ms(r) + 60000
    push(r, "q", "AT", t, "a")
    assert push(r, "q", "AT", t + 5000, "a") == 0
    assert zs(r, "q") == {b"a": float(t + 5000)}
    assert push(r, "q", "AT", t - 30000, "a") == 0
    assert zs(r, "q") == {b"a": float(t - 30000)}


def test_at_in_the_past_is_accepted_and_overdue(r):
    assert push(r, "q", "AT", MIN_AT, "old") == 1
    assert zs(r, "q") == {b"old": float(MIN_AT)}
    assert pop(r, "q") == [(b"old", 1)]


def test_at_bounds(r):
    assert push(r, "q", "AT", MIN_AT, "lo") == 1
    assert push(r, "q", "AT", TWO53, "hi") == 1
    assert zs(r, "q") == {b"lo": float(MIN_AT), b"hi": float(TWO53)}
    # a time in seconds, just below the minimum, above 2^53, negative, not an integer
    for bad in (MIN_AT - 1, 1700000000, TWO53 + 1, -1, 0, "abc", "1.7e12", "", 2 ** 64):
        expect_error_unchanged(r, "RMQ.PUSH", "q", "AT", bad, "x", contains="AT")


def test_delay_due_now_plus_delay(r):
    t0 = now_ms(r)
    assert push(r, "q", "DELAY", 5000, "a") == 1
    t1 = now_ms(r)
    assert_time_score(zs(r, "q")[b"a"], t0, t1, 5000)


def test_delay_zero_is_due_now(r):
    t0 = now_ms(r)
    assert push(r, "q", "DELAY", 0, "a") == 1
    t1 = now_ms(r)
    assert_time_score(zs(r, "q")[b"a"], t0, t1, 0)
    assert pop(r, "q") == [(b"a", 1)]


def test_delay_latest_wins_debounce(r):
    push(r, "q", "DELAY", 60000, "a")
    t0 = now_ms(r)
    assert push(r, "q", "DELAY", 1000, "a") == 0   # earlier due time replaces the later one
    t1 = now_ms(r)
    assert_time_score(zs(r, "q")[b"a"], t0, t1, 1000)
    t0 = now_ms(r)
    assert push(r, "q", "DELAY", 90000, "a") == 0  # and a later one replaces an earlier one
    t1 = now_ms(r)
    assert_time_score(zs(r, "q")[b"a"], t0, t1, 90000)


def test_delay_bounds(r):
    for bad in (-1, "abc", "1.5", "", 2 ** 64):
        expect_error_unchanged(r, "RMQ.PUSH", "q", "DELAY", bad, "x", contains="DELAY")


def test_at_and_delay_are_the_same_kind(r):
    t = now_ms(r) + 60000
    assert push(r, "q", "AT", t, "a") == 1
    t0 = now_ms(r)
    assert push(r, "q", "DELAY", 2000, "a", "b") == 1
    t1 = now_ms(r)
    s = zs(r, "q")
    assert_time_score(s[b"a"], t0, t1, 2000)
    assert push(r, "q", "AT", t, "b") == 0
    assert zs(r, "q")[b"b"] == float(t)


# ---------------------------------------------------------------------------------------
# kind rule
# ---------------------------------------------------------------------------------------

KIND_ARGS = {
    "range": ("RANGE", 60000),
    "priority": ("PRIORITY", 1),
    "fixed-at": ("AT", None),  # filled with a future time
    "fixed-delay": ("DELAY", 60000),
}


def _kargs(r, name):
    opt, val = KIND_ARGS[name]
    if val is None:
        val = now_ms(r) + 60000
    return opt, val


def _kind(name):
    return "fixed" if name.startswith("fixed") else name


@pytest.mark.parametrize("first", list(KIND_ARGS))
@pytest.mark.parametrize("second", list(KIND_ARGS))
def test_kind_fixed_by_first_push(r, first, second):
    assert push(r, "q", *_kargs(r, first), "a") == 1
    if _kind(first) == _kind(second):
        assert push(r, "q", *_kargs(r, second), "b") == 1
    else:
        expect_error_unchanged(r, "RMQ.PUSH", "q", *_kargs(r, second), "b", contains="kind")
        # also when the message is already waiting (no merge across kinds)
        expect_error_unchanged(r, "RMQ.PUSH", "q", *_kargs(r, second), "a", contains="kind")


def test_kind_kept_while_only_in_flight(r):
    push(r, "q", "PRIORITY", 1, "a")
    assert pop(r, "q") == [(b"a", 1)]
    assert r.exists("q") == 0
    expect_error_unchanged(r, "RMQ.PUSH", "q", "RANGE", 100, "b", contains="kind")
    assert push(r, "q", "PRIORITY", 2, "b") == 1


def test_kind_kept_while_only_dead(r):
    push(r, "q", "RANGE", 1, "a")
    wait_due(r, 2)
    assert pop(r, "q") == [(b"a", 1)]
    assert nack(r, "q", "a", "DEAD") == b"dead"
    assert r.exists("q", prep("q")) == 0
    expect_error_unchanged(r, "RMQ.PUSH", "q", "PRIORITY", 1, "b", contains="kind")
    expect_error_unchanged(r, "RMQ.PUSH", "q", "AT", MIN_AT, "b", contains="kind")
    assert push(r, "q", "RANGE", 10, "b") == 1


def test_kind_reset_when_completely_empty_after_ack(r):
    push(r, "q", "PRIORITY", 1, "a")
    assert pop(r, "q") == [(b"a", 1)]
    assert ack(r, "q", "a") == 1
    assert r.dbsize() == 0
    assert push(r, "q", "RANGE", 60000, "b") == 1
    assert list(zs(r, "q")) == [b"b"]


def test_kind_reset_when_completely_empty_after_cancel(r):
    push(r, "q", "AT", MIN_AT, "a")
    assert r.execute_command("RMQ.CANCEL", "q", "a") == 1
    assert r.dbsize() == 0
    assert push(r, "q", "PRIORITY", 3, "b") == 1
    assert zs(r, "q") == {b"b": 3.0}


def test_kind_is_per_queue(r):
    assert push(r, "q1", "PRIORITY", 1, "a") == 1
    assert push(r, "q2", "RANGE", 100, "a") == 1
    assert push(r, "q3", "DELAY", 100, "a") == 1


# ---------------------------------------------------------------------------------------
# in flight / dead content pushed again
# ---------------------------------------------------------------------------------------

def test_push_of_in_flight_content_adds_waiting_copy(r):
    push(r, "q", "PRIORITY", 5, "m")
    assert pop(r, "q") == [(b"m", 1)]
    assert push(r, "q", "PRIORITY", 9, "m") == 1  # newly added, not merged
    store, prepare, _ = state(r, "q")
    assert store == {b"m": 9.0}
    assert list(prepare) == [b"m"]
    # merging now hits the waiting copy
    assert push(r, "q", "PRIORITY", 4, "m") == 0
    assert zs(r, "q") == {b"m": 4.0}


def test_push_of_in_flight_content_fresh_delivery_count(r):
    push(r, "q", "PRIORITY", 5, "m")
    assert pop(r, "q") == [(b"m", 1)]
    assert nack(r, "q", "m") == b"requeued"
    assert pop(r, "q") == [(b"m", 2)]
    assert push(r, "q", "PRIORITY", 5, "m") == 1
    assert ack(r, "q", "m") == 1
    assert pop(r, "q") == [(b"m", 1)]


def test_push_of_dead_content_adds_waiting_copy_fresh_count(r):
    push(r, "q", "PRIORITY", 5, "m")
    assert pop(r, "q") == [(b"m", 1)]
    assert nack(r, "q", "m") == b"requeued"
    assert pop(r, "q") == [(b"m", 2)]
    assert nack(r, "q", "m", "DEAD") == b"dead"
    assert push(r, "q", "PRIORITY", 6, "m") == 1
    store, prepare, dd = state(r, "q")
    assert store == {b"m": 6.0}
    assert prepare == {}
    # the contract-AMBIGUOUS: the contract says the dead message "stays there until someone replays it";
    # we read that as: the dead copy is untouched by a new push of the same content.
    assert list(dd) == [b"m"]
    assert pop(r, "q") == [(b"m", 1)]


# ---------------------------------------------------------------------------------------
# message validity and limits
# ---------------------------------------------------------------------------------------

def test_empty_message_rejected(r):
    expect_error_unchanged(r, "RMQ.PUSH", "q", "PRIORITY", 1, "", contains="empty message")
    assert r.dbsize() == 0
    push(r, "q", "PRIORITY", 1, "keep")
    expect_error_unchanged(r, "RMQ.PUSH", "q", "PRIORITY", 2, "a", "", "b",
                           contains="empty message")
    expect_error_unchanged(r, "RMQ.PUSH", "q", "PRIORITY", 2, "keep", "", contains="empty message")
    assert zs(r, "q") == {b"keep": 1.0}


def test_default_max_message_bytes(r):
    limit = 1048576
    ok = b"x" * limit
    assert push(r, "q", "PRIORITY", 1, ok) == 1
    expect_error_unchanged(r, "RMQ.PUSH", "q", "PRIORITY", 1, b"y" * (limit + 1),
                           contains="max-message-bytes")
    expect_error_unchanged(r, "RMQ.PUSH", "q", "PRIORITY", 1, "small", b"y" * (limit + 1),
                           contains="max-message-bytes")
    assert r.zcard("q") == 1


def test_max_message_bytes_setting(start_server):
    s = start_server(module_args=["max-message-bytes", "10"])
    c = s.client()
    assert push(c, "q", "RANGE", 100, b"0123456789") == 1
    expect_error_unchanged(c, "RMQ.PUSH", "q", "RANGE", 100, b"0123456789A",
                           contains="max-message-bytes")
    expect_error_unchanged(c, "RMQ.PUSH", "q", "RANGE", 100, "a", "b", b"0123456789A", "c",
                           contains="max-message-bytes")
    assert list(zs(c, "q")) == [b"0123456789"]


def test_max_queue_length(start_server):
    s = start_server(module_args=["max-queue-length", "3"])
    c = s.client()
    assert push(c, "q", "PRIORITY", 1, "a", "b", "c") == 3
    expect_error_unchanged(c, "RMQ.PUSH", "q", "PRIORITY", 1, "d", contains="max-queue-length")
    # a merge does not add a waiting message
    assert push(c, "q", "PRIORITY", 2, "a") == 0
    # a batch that would exceed is rejected whole (the merge in it is not applied either)
    expect_error_unchanged(c, "RMQ.PUSH", "q", "PRIORITY", 9, "a", "d", contains="max-queue-length")
    assert zs(c, "q") == {b"a": 2.0, b"b": 1.0, b"c": 1.0}
    # in-flight messages are not waiting
    assert pop(c, "q") == [(b"a", 1)]
    assert push(c, "q", "PRIORITY", 1, "d") == 1
    # a new waiting copy of an in-flight content is a waiting message
    expect_error_unchanged(c, "RMQ.PUSH", "q", "PRIORITY", 1, "a", contains="max-queue-length")
    assert set(zs(c, "q")) == {b"b", b"c", b"d"}


def test_max_queue_length_batch_rejected_whole(start_server):
    s = start_server(module_args=["max-queue-length", "3"])
    c = s.client()
    assert push(c, "q", "RANGE", 60000, "a") == 1
    expect_error_unchanged(c, "RMQ.PUSH", "q", "RANGE", 60000, "x", "y", "z",
                           contains="max-queue-length")
    assert list(zs(c, "q")) == [b"a"]
    # duplicates in the batch count once: a (merge) + x + y = 3 waiting
    assert push(c, "q", "RANGE", 60000, "a", "x", "x", "y", "y") == 2
    assert c.zcard("q") == 3


def test_max_queue_length_is_per_queue(start_server):
    s = start_server(module_args=["max-queue-length", "1"])
    c = s.client()
    assert push(c, "q1", "PRIORITY", 1, "a") == 1
    assert push(c, "q2", "PRIORITY", 1, "a") == 1
    expect_error(c, "RMQ.PUSH", "q1", "PRIORITY", 1, "b", contains="max-queue-length")


BINARY = [b"\x00", b"a\x00b", b"\xff", b"\xff\x00\xfe", bytes(range(256)), b"\x00" * 7,
          "ünïcode ✓".encode(), b" ", b"\r\n"]


def test_binary_messages_round_trip(r):
    assert push(r, "q", "PRIORITY", 1, *BINARY) == len(BINARY)
    assert set(zs(r, "q")) == set(BINARY)
    got = pop(r, "q", "COUNT", 100)
    assert sorted(m for m, _ in got) == sorted(BINARY)
    assert all(n == 1 for _, n in got)
    assert set(zs(r, prep("q"))) == set(BINARY)
    assert ack(r, "q", *BINARY) == len(BINARY)
    assert r.dbsize() == 0


def test_binary_messages_distinct_identities(r):
    # b"a" and b"a\x00" are different contents
    assert push(r, "q", "PRIORITY", 1, b"a", b"a\x00", b"\x00a") == 3
    assert r.zcard("q") == 3


def test_messages_may_look_like_options(r):
    assert push(r, "q", "PRIORITY", 1, "PRIORITY", "RANGE", "COUNT", "1") == 4
    assert set(zs(r, "q")) == {b"PRIORITY", b"RANGE", b"COUNT", b"1"}


def test_push_syntax_errors(r):
    expect_error_unchanged(r, "RMQ.PUSH", "q", "BOGUS", 1, "a", contains="syntax")
    expect_error_unchanged(r, "RMQ.PUSH", "q", "a")
    expect_error_unchanged(r, "RMQ.PUSH", "q", "PRIORITY", 1)
    expect_error_unchanged(r, "RMQ.PUSH", "q", "PRIORITY")
    expect_error_unchanged(r, "RMQ.PUSH", "q", contains="wrong number of arguments")
    expect_error_unchanged(r, "RMQ.PUSH", contains="wrong number of arguments")
    assert r.dbsize() == 0


def test_options_are_case_insensitive(r):
    # the contract-AMBIGUOUS: the contract writes options in upper case; like every Redis command we expect
    # them to be case-insensitive.
    assert push(r, "q", "priority", 1, "a") == 1
    assert push(r, "q2", "Range", 100, "a") == 1
    assert push(r, "q3", "at", MIN_AT, "a") == 1
    assert push(r, "q3", "delay", 0, "b") == 1
    assert pop(r, "q", "count", 1, "lease", 1000) == [(b"a", 1)]


def test_range_push_in_flight_copy_is_new_message(r):
    push(r, "q", "RANGE", 1, "m")
    wait_due(r, 2)
    assert pop(r, "q") == [(b"m", 1)]
    t0 = now_ms(r)
    assert push(r, "q", "RANGE", 50000, "m") == 1
    t1 = now_ms(r)
    assert_time_score(zs(r, "q")[b"m"], t0, t1, 50000)


def test_cancel_removes_waiting_copies_only(r):
    push(r, "q", "PRIORITY", 1, "a", "b", "c")
    assert pop(r, "q", "COUNT", 1) is not None
    inflight = list(zs(r, prep("q")))[0]
    assert r.execute_command("RMQ.CANCEL", "q", inflight) == 0
    waiting = sorted(zs(r, "q"))
    assert r.execute_command("RMQ.CANCEL", "q", *waiting, "nope") == 2
    assert r.exists("q") == 0
    assert list(zs(r, prep("q"))) == [inflight]


def test_push_unchanged_snapshot_on_kind_error_with_full_state(r):
    push(r, "q", "PRIORITY", 3, "a", "b", "c")
    pop(r, "q")
    pop(r, "q")
    nack(r, "q", pop(r, "q")[0][0], "DEAD")
    before = snapshot(r)
    expect_error(r, "RMQ.PUSH", "q", "RANGE", 10, "a", "z", contains="kind")
    assert snapshot(r) == before
