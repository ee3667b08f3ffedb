"""RMQ.POP: order, due-ness, COUNT, LEASE, BLOCK, never twice in flight (docs/COMMANDS.md: RMQ.POP, Model)."""

import time

from helpers import (MIN_AT, ack, assert_time_score, config_get, expect_error_unchanged, nack,
                     now_ms, pop, prep, push, state, wait_due, zs)


def test_pop_empty_queue_is_nil_and_creates_nothing(r):
    assert pop(r, "q") is None
    assert pop(r, "q", "COUNT", 5, "LEASE", 100) is None
    assert r.dbsize() == 0


def test_pop_default_count_is_one_highest_priority(r):
    push(r, "q", "PRIORITY", 1, "low")
    push(r, "q", "PRIORITY", 10, "high")
    push(r, "q", "PRIORITY", 5, "mid")
    assert pop(r, "q") == [(b"high", 1)]
    store, prepare, _ = state(r, "q")
    assert store == {b"low": 1.0, b"mid": 5.0}
    assert list(prepare) == [b"high"]


def test_pop_priority_highest_first(r):
    push(r, "q", "PRIORITY", 1, "a")
    push(r, "q", "PRIORITY", 10, "b")
    push(r, "q", "PRIORITY", -5, "c")
    push(r, "q", "PRIORITY", 3, "d")
    push(r, "q", "PRIORITY", 2 ** 53, "top")
    push(r, "q", "PRIORITY", -2 ** 53, "bottom")
    got = pop(r, "q", "COUNT", 10)
    assert got == [(b"top", 1), (b"b", 1), (b"d", 1), (b"a", 1), (b"c", 1), (b"bottom", 1)]
    assert r.exists("q") == 0


def test_pop_priority_respects_merged_priority(r):
    push(r, "q", "PRIORITY", 1, "a", "b")
    push(r, "q", "PRIORITY", 100, "a")  # latest wins
    push(r, "q", "PRIORITY", 50, "b")
    assert pop(r, "q", "COUNT", 2) == [(b"a", 1), (b"b", 1)]


def test_pop_equal_priorities_any_order(r):
    push(r, "q", "PRIORITY", 7, "a", "b", "c")
    push(r, "q", "PRIORITY", 1, "z")
    got = pop(r, "q", "COUNT", 3)
    assert sorted(got) == [(b"a", 1), (b"b", 1), (b"c", 1)]
    assert pop(r, "q") == [(b"z", 1)]


def test_pop_count_fewer_available(r):
    push(r, "q", "PRIORITY", 1, "a", "b")
    got = pop(r, "q", "COUNT", 10)
    assert sorted(got) == [(b"a", 1), (b"b", 1)]
    assert pop(r, "q", "COUNT", 10) is None


def test_pop_range_only_due_messages(r):
    push(r, "q", "RANGE", 60000, "later")
    assert pop(r, "q") is None
    push(r, "q", "RANGE", 1, "soon")
    wait_due(r, 3)
    assert pop(r, "q", "COUNT", 10) == [(b"soon", 1)]
    assert list(zs(r, "q")) == [b"later"]
    assert pop(r, "q", "COUNT", 10) is None


def test_pop_range_earliest_due_first(r):
    push(r, "q", "RANGE", 1800, "x")
    push(r, "q", "RANGE", 600, "y")
    push(r, "q", "RANGE", 1200, "z")
    scores = zs(r, "q")
    expected = [m for m, _ in sorted(scores.items(), key=lambda kv: kv[1])]
    assert expected == [b"y", b"z", b"x"]  # pushes took < 600 ms apart
    wait_due(r, int(max(scores.values()) - now_ms(r)) + 2)
    assert pop(r, "q", "COUNT", 3) == [(m, 1) for m in expected]


def test_pop_fixed_oldest_due_first_only_due(r):
    t = now_ms(r)
    push(r, "q", "AT", t - 3000, "a")
    push(r, "q", "AT", t - 1000, "b")
    push(r, "q", "AT", t - 2000, "c")
    push(r, "q", "AT", t + 60000, "future")
    push(r, "q", "DELAY", 60000, "delayed")
    push(r, "q", "AT", MIN_AT, "ancient")
    assert pop(r, "q", "COUNT", 10) == [(b"ancient", 1), (b"a", 1), (b"c", 1), (b"b", 1)]
    assert set(zs(r, "q")) == {b"future", b"delayed"}
    assert pop(r, "q") is None


def test_pop_fixed_future_not_delivered_until_due(r):
    push(r, "q", "DELAY", 1000, "d")
    assert pop(r, "q") is None
    wait_due(r, 1002)
    assert pop(r, "q") == [(b"d", 1)]


def test_pop_moves_to_prepare_with_lease_deadline(r):
    push(r, "q", "PRIORITY", 1, "a", "b")
    t0 = now_ms(r)
    got = pop(r, "q", "COUNT", 2, "LEASE", 5000)
    t1 = now_ms(r)
    assert sorted(got) == [(b"a", 1), (b"b", 1)]
    store, prepare, dd = state(r, "q")
    assert store == {} and dd == {}
    assert set(prepare) == {b"a", b"b"}
    for s in prepare.values():
        assert_time_score(s, t0, t1, 5000, "lease deadline")
    assert r.exists("q") == 0


def test_pop_default_lease_is_30000(r):
    push(r, "q", "PRIORITY", 1, "a")
    t0 = now_ms(r)
    pop(r, "q")
    t1 = now_ms(r)
    assert_time_score(zs(r, prep("q"))[b"a"], t0, t1, 30000, "lease deadline")


def test_pop_default_lease_from_setting(start_server):
    s = start_server(module_args=["lease-ms", "4321"])
    c = s.client()
    push(c, "q", "PRIORITY", 1, "a", "b")
    t0 = now_ms(c)
    pop(c, "q")
    t1 = now_ms(c)
    (m, dl), = zs(c, prep("q")).items()
    assert_time_score(dl, t0, t1, 4321, "lease deadline")
    # LEASE overrides the setting
    t0 = now_ms(c)
    pop(c, "q", "LEASE", 7777)
    t1 = now_ms(c)
    other = ({b"a", b"b"} - {m}).pop()
    assert_time_score(zs(c, prep("q"))[other], t0, t1, 7777, "lease deadline")


def test_pop_lease_setting_changed_at_runtime(start_server):
    s = start_server()
    c = s.client()
    assert c.config_set("rmq.lease-ms", 6000)
    assert config_get(c, "rmq.lease-ms") == "6000"
    push(c, "q", "PRIORITY", 1, "a")
    t0 = now_ms(c)
    pop(c, "q")
    t1 = now_ms(c)
    assert_time_score(zs(c, prep("q"))[b"a"], t0, t1, 6000, "lease deadline")


def test_pop_count_bounds(r):
    push(r, "q", "PRIORITY", 1, "a", "b", "c")
    for bad in (0, -1, 10001, "abc", "", "1.5", 2 ** 64):
        expect_error_unchanged(r, "RMQ.POP", "q", "COUNT", bad, contains="COUNT")
    expect_error_unchanged(r, "RMQ.POP", "q", "COUNT")
    got = pop(r, "q", "COUNT", 10000)
    assert len(got) == 3


def test_pop_count_10000_really_delivers_10000(r):
    msgs = [b"m%05d" % i for i in range(10001)]
    assert push(r, "q", "PRIORITY", 1, *msgs) == 10001
    got = pop(r, "q", "COUNT", 10000)
    assert len(got) == 10000
    assert len({m for m, _ in got}) == 10000
    assert r.zcard("q") == 1
    assert r.zcard(prep("q")) == 10000


def test_pop_lease_bounds(r):
    push(r, "q", "PRIORITY", 1, "a")
    for bad in (0, -1, "abc", "", "1.5", 2 ** 64):
        expect_error_unchanged(r, "RMQ.POP", "q", "LEASE", bad, contains="LEASE")
    expect_error_unchanged(r, "RMQ.POP", "q", "LEASE")
    assert pop(r, "q", "LEASE", 1000) == [(b"a", 1)]


def test_pop_options_in_any_order(r):
    push(r, "q", "PRIORITY", 1, "a", "b", "c", "d")
    t0 = now_ms(r)
    assert len(pop(r, "q", "LEASE", 9000, "COUNT", 2)) == 2
    assert len(pop(r, "q", "COUNT", 1, "BLOCK", 1, "LEASE", 9000)) == 1
    assert len(pop(r, "q", "BLOCK", 1, "LEASE", 9000)) == 1
    t1 = now_ms(r)
    for dl in zs(r, prep("q")).values():
        assert_time_score(dl, t0, t1, 9000, "lease deadline")


def test_pop_unknown_option_is_syntax_error(r):
    push(r, "q", "PRIORITY", 1, "a")
    expect_error_unchanged(r, "RMQ.POP", "q", "FOO", contains="syntax")
    expect_error_unchanged(r, "RMQ.POP", "q", "FOO", 1, contains="syntax")
    expect_error_unchanged(r, "RMQ.POP", "q", "COUNT", 1, "extra", contains="syntax")
    expect_error_unchanged(r, "RMQ.POP", contains="wrong number of arguments")


def test_delivery_count_increments(r):
    push(r, "q", "PRIORITY", 1, "a")
    for n in range(1, 5):
        assert pop(r, "q") == [(b"a", n)]
        assert nack(r, "q", "a") == b"requeued"
    assert pop(r, "q") == [(b"a", 5)]
    assert ack(r, "q", "a") == 1
    push(r, "q", "PRIORITY", 1, "a")
    assert pop(r, "q") == [(b"a", 1)]


# ---------------------------------------------------------------------------------------
# at most one delivery of a content in flight
# ---------------------------------------------------------------------------------------

def test_waiting_copy_not_delivered_while_in_flight_priority(r):
    push(r, "q", "PRIORITY", 5, "m")
    assert pop(r, "q") == [(b"m", 1)]
    assert push(r, "q", "PRIORITY", 5, "m") == 1
    assert pop(r, "q") is None
    push(r, "q", "PRIORITY", 1, "n")
    # m (priority 5) waits, but only n is deliverable
    assert pop(r, "q", "COUNT", 10) == [(b"n", 1)]
    store, prepare, _ = state(r, "q")
    assert store == {b"m": 5.0}
    assert set(prepare) == {b"m", b"n"}
    assert ack(r, "q", "m") == 1
    assert pop(r, "q", "COUNT", 10) == [(b"m", 1)]


def test_waiting_copy_not_delivered_while_in_flight_range(r):
    push(r, "q", "RANGE", 1, "m")
    wait_due(r, 2)
    assert pop(r, "q") == [(b"m", 1)]
    assert push(r, "q", "RANGE", 1, "m") == 1
    wait_due(r, 3)
    assert pop(r, "q") is None
    assert pop(r, "q", "COUNT", 10) is None
    assert nack(r, "q", "m") == b"requeued"
    # merged into the waiting copy which inherits the count
    assert pop(r, "q") == [(b"m", 2)]


def test_waiting_copy_not_delivered_while_in_flight_fixed(r):
    push(r, "q", "AT", MIN_AT, "m")
    assert pop(r, "q") == [(b"m", 1)]
    assert push(r, "q", "AT", MIN_AT, "m", "other") == 2
    assert pop(r, "q", "COUNT", 10) == [(b"other", 1)]
    assert ack(r, "q", "m") == 1
    assert pop(r, "q", "COUNT", 10) == [(b"m", 1)]


def test_waiting_copy_delivered_after_lease_rollback_merges(r):
    push(r, "q", "PRIORITY", 5, "m")
    assert pop(r, "q", "LEASE", 1000) == [(b"m", 1)]
    assert push(r, "q", "PRIORITY", 8, "m") == 1
    assert pop(r, "q") is None
    time.sleep(1.01)
    r.execute_command("RMQ.SWEEP", "q")  # the server timer may already have done it
    assert zs(r, prep("q")) == {}
    assert zs(r, "q") == {b"m": 8.0}
    assert pop(r, "q") == [(b"m", 2)]


# ---------------------------------------------------------------------------------------
# BLOCK
# ---------------------------------------------------------------------------------------

def test_pop_block_nothing_deliverable_returns_nil(r):
    # Passes whether or not blocking is implemented: BLOCK 1 on an empty queue ends in nil.
    t = time.monotonic()
    assert pop(r, "q", "BLOCK", 1) is None
    push(r, "q", "RANGE", 60000, "later")
    assert pop(r, "q", "BLOCK", 1, "COUNT", 5) is None
    assert time.monotonic() - t < 2
    assert list(zs(r, "q")) == [b"later"]
    assert r.exists(prep("q")) == 0


def test_pop_block_with_deliverable_message_returns_at_once(r):
    push(r, "q", "PRIORITY", 1, "a")
    t = time.monotonic()
    assert pop(r, "q", "BLOCK", 5000) == [(b"a", 1)]
    assert time.monotonic() - t < 1


def test_pop_block_in_multi_acts_as_absent(r):
    p = r.pipeline(transaction=True)
    p.execute_command("RMQ.POP", "q", "BLOCK", 0)
    p.execute_command("RMQ.PUSH", "q", "PRIORITY", 1, "a")
    p.execute_command("RMQ.POP", "q", "BLOCK", 0)
    res = p.execute()
    assert res[0] is None
    assert res[1] == 1
    assert res[2] == [[b"a", 1]]


def test_pop_block_in_script_acts_as_absent(r):
    assert r.eval("return redis.call('RMQ.POP', KEYS[1], 'BLOCK', '0')", 1, "q") is None


def test_pop_block_bad_values(r):
    push(r, "q", "PRIORITY", 1, "a")
    for bad in (-1, "abc", "", "1.5", 2 ** 64):
        expect_error_unchanged(r, "RMQ.POP", "q", "BLOCK", bad, contains="BLOCK")
    expect_error_unchanged(r, "RMQ.POP", "q", "BLOCK")


def test_pop_due_exactly_now_is_deliverable(r):
    # deliverable when due <= now: a message due at the current server ms comes out at once
    t = now_ms(r)
    push(r, "q", "AT", t, "now")
    assert pop(r, "q") == [(b"now", 1)]
