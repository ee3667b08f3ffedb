"""RMQ.PUSH and RMQ.SCHEDULE SET: MESSAGES ends the options, the strict reading before it,
and a push without a mode told the modes (docs/COMMANDS.md, RMQ.PUSH)."""

import pytest

from helpers import expect_error_unchanged, pop, push, snapshot, zs

MODES_ERROR = "ERR syntax error: expected RANGE, PRIORITY, AT or DELAY, got '{}'"
NEEDS_ONE = "ERR syntax error: MESSAGES needs at least one message"


def unexpected(word):
    return f"ERR syntax error: unexpected argument '{word}'"


def refused(r, *args):
    """The exact error text of a command that must change nothing."""
    before = snapshot(r)
    text = str(expect_error_unchanged(r, *args))
    assert snapshot(r) == before
    return text if text.startswith("ERR ") else "ERR " + text


def test_the_issues_typo_is_refused_and_nothing_stored(r):
    push(r, "q", "DELAY", 0, "MESSAGES", "kept")
    assert refused(r, "RMQ.PUSH", "q", "DELAY", 0, "GROUPP", "order-1", "MESSAGES",
                   "order-1:paid") == unexpected("GROUPP")
    assert set(zs(r, "q")) == {b"kept"}
    # Without MESSAGES, read as before: the misspelling becomes messages (why clients send it).
    assert push(r, "q2", "DELAY", 0, "GROUPP", "order-1", "order-1:paid") == 3


def test_after_messages_every_argument_is_a_message(r):
    assert push(r, "q", "PRIORITY", 1, "MESSAGES", "GROUP", "g", "MESSAGES", "dedup") == 4
    assert set(zs(r, "q")) == {b"GROUP", b"g", b"MESSAGES", b"dedup"}
    assert push(r, "q1", "PRIORITY", 1, "messages", "GROUP") == 1, "any case, one message is enough"
    assert set(zs(r, "q1")) == {b"GROUP"}


def test_options_before_messages_in_any_order_last_counts(r):
    first = r.execute_command("RMQ.PUSH", "q", "DELAY", 0, "DEDUP", "d1", 60000, "NOTE", "n",
                              "GROUP", "a", "GROUP", "b", "SEQUENCE", "s-", "MESSAGES", "m")
    assert first == [[b"added", 1, None]]
    assert zs(r, "q") and list(zs(r, "q")) == [b"s-00000000000000000001 m"]
    assert push(r, "q", "DELAY", 0, "GROUP", "b", "MESSAGES", "m2") == 1
    assert push(r, "q", "DELAY", 0, "GROUP", "a", "MESSAGES", "m3") == 1
    # The first went to group b (the last GROUP): one of group b goes (which one is the
    # queue's order, and pushes in the same millisecond tie), m3 (group a) goes beside it.
    got = sorted(m for m, _ in pop(r, "q", "COUNT", 10))
    assert len(got) == 2 and b"m3" in got, got
    assert set(got) - {b"m3"} <= {b"m2", b"s-00000000000000000001 m"}, got
    again = r.execute_command("RMQ.PUSH", "q", "DELAY", 0, "DEDUP", "d1", 60000, "MESSAGES", "x")
    assert again[0][0] != b"added", "DEDUP before MESSAGES recorded its id"


def test_group_before_messages_groups(r):
    assert push(r, "q", "PRIORITY", 1, "GROUP", "g", "MESSAGES", "a", "b") == 2
    assert [m for m, _ in pop(r, "q", "COUNT", 10)] == [b"a"], "one of the group at a time"


@pytest.mark.parametrize("args,error", [
    (("DELAY", 0, "m", "MESSAGES", "n"), unexpected("m")),
    (("DELAY", 0, "NOTE", "n", "MESSAGES", "m"), unexpected("NOTE")),
    (("DELAY", 0, "GROUP", "g", "NOTE", "n", "MESSAGES", "m"), unexpected("NOTE")),
    (("DELAY", 0, "MESSAGES"), NEEDS_ONE),
    (("DELAY", 0, "GROUP", "g", "messages"), NEEDS_ONE),
    (("DELAY", 0, "DEDUP", "i", 5, "MESSAGES"), NEEDS_ONE),
    (("DELAY", 0, "GROUP", "", "MESSAGES", "m"),
     "ERR invalid GROUP: must be a non-empty string of at most 1024 bytes"),
    (("DELAY", 0, "DEDUP", "i", 0, "MESSAGES", "m"),
     "ERR invalid DEDUP: must be an integer from 1 to 2^41 (ms)"),
])
def test_strict_reading_errors_change_nothing(r, args, error):
    push(r, "q", "DELAY", 0, "MESSAGES", "kept")
    assert refused(r, "RMQ.PUSH", "q", *args) == error


@pytest.mark.parametrize("args", [("m",), ("x", "y"), ("x", "y", "z"), ("m", "MESSAGES", "a")])
def test_a_push_without_a_mode_names_the_modes(r, args):
    assert refused(r, "RMQ.PUSH", "q", *args) == MODES_ERROR.format(args[0])
    assert r.dbsize() == 0


def test_schedule_set_with_messages_and_lists_the_canonical_form(r):
    r.execute_command("RMQ.SCHEDULE", "s", "SET", "a", "EVERY", 3_600_000, "priority", 2,
                      "group", "g", "MESSAGES", "GROUP")
    r.execute_command("RMQ.SCHEDULE", "s", "SET", "b", "EVERY", 3_600_000, "DELAY", 0, "job")
    specs = {e[0]: e[1] for e in r.execute_command("RMQ.SCHEDULE", "s", "LIST")}
    assert specs == {b"a": b"EVERY 3600000 PRIORITY 2 GROUP g MESSAGES GROUP",
                     b"b": b"EVERY 3600000 DELAY 0 MESSAGES job"}
    for args, error in [
        (("RANGE", 1, "GROUPP", "g", "MESSAGES", "m"), unexpected("GROUPP")),
        (("RANGE", 1, "SEQUENCE", "p", "MESSAGES", "m"), unexpected("SEQUENCE")),
        (("RANGE", 1, "GROUP", "g", "MESSAGES"), NEEDS_ONE),
        (("RANGE", 1, "MESSAGES", "m", "n"), unexpected("n")),
    ]:
        assert refused(r, "RMQ.SCHEDULE", "s", "SET", "c", "EVERY", 1000, *args) == error
