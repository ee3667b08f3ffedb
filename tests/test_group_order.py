"""Groups keep their order through retries: a grouped message whose delivery is rolled back
(NACK with or without DELAY, a lease run out, SWEEP) is delivered again before any message
of its group that was behind it; while it waits out a retry delay the whole group waits;
until it is acked, cancelled or dead nothing else of its group is delivered, not even a
message pushed meanwhile that comes first in the queue's order. For every kind."""

import pytest

from helpers import ack, nack, now_ms, pop, pop_expire_sweep, prep, wait_due, wait_until

# A retry delay long enough that a stalled machine still pops inside it, short enough to
# keep the file fast.
DELAY_MS = 1500


def gpush(r, q, mode, value, group, *msgs):
    n = r.execute_command("RMQ.PUSH", q, mode, value, "GROUP", group, *msgs)
    if mode == "RANGE":
        wait_due(r, value)   # RANGE's shortest is 1 ms: let it come due
    return n


def mode_of(kind):
    return {"fixed": ("DELAY", 0), "range": ("RANGE", 1), "priority": ("PRIORITY", 5)}[kind]


def drain(r, q):
    """Pops one message at a time, acking each: the order the queue hands them out."""
    out = []
    while (got := pop(r, q)) is not None:
        (m, _), = got
        assert ack(r, q, m) == 1
        out.append(m)
    return out


def rollback(r, q, how, msg):
    if how == "nack":
        assert nack(r, q, msg) == b"requeued"
    elif how == "nack-delay-0":
        assert nack(r, q, msg, "DELAY", 0) == b"requeued"
    elif how == "expiry":
        # The module's timer rolls the lease back (LEASE 50 at the pop).
        assert wait_until(lambda: r.zcard(prep(q)) == 0, timeout=10), "the lease never ran out"
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("kind", ["fixed", "range", "priority"])
@pytest.mark.parametrize("how", ["nack", "nack-delay-0", "expiry"])
def test_a_rolled_back_message_goes_again_before_its_groups_later_ones(r, kind, how):
    mode, value = mode_of(kind)
    gpush(r, "q", mode, value, "order-1", "order-1:created")
    gpush(r, "q", mode, value, "order-1", "order-1:paid", "order-1:shipped")
    lease = ("LEASE", 50) if how == "expiry" else ()
    assert pop(r, "q", *lease) == [(b"order-1:created", 1)]
    rollback(r, "q", how, "order-1:created")
    assert pop(r, "q") == [(b"order-1:created", 2)], "the rolled-back message first"
    assert pop(r, "q") is None, "its group waits for it"
    assert ack(r, "q", "order-1:created") == 1
    assert drain(r, "q") == [b"order-1:paid", b"order-1:shipped"]
    assert r.dbsize() == 0


@pytest.mark.parametrize("kind", ["fixed", "range"])
def test_sweep_rolls_back_to_the_head_of_its_group(r, kind):
    mode, value = mode_of(kind)
    gpush(r, "q", mode, value, "g", "first", "second", "third")
    popped, swept, left = pop_expire_sweep(r, "q", lease=1, wait_ms=5)
    assert popped == [(b"first", 1)]
    # The module's own timer may have rolled it back first: either way it is no longer in flight.
    assert left == 0 and swept in (0, 1)
    assert drain(r, "q") == [b"first", b"second", b"third"]


@pytest.mark.parametrize("kind", ["fixed", "range", "priority"])
def test_the_whole_group_waits_out_a_retry_delay(r, kind):
    mode, value = mode_of(kind)
    gpush(r, "q", mode, value, "g", "a", "b")
    assert pop(r, "q") == [(b"a", 1)]
    # The delay starts at the NACK, somewhere between these two server times: it lasts
    # past before + DELAY_MS and is over after after + DELAY_MS.
    before = now_ms(r)
    assert nack(r, "q", "a", "DELAY", DELAY_MS) == b"requeued"
    after = now_ms(r)
    # Pushed into the group meanwhile, first in the queue's order (due now, or the
    # highest priority): it waits too. A message of no group does not.
    first = ("PRIORITY", 9) if kind == "priority" else (mode, 1 if kind == "range" else 0)
    gpush(r, "q", *first, "g", "pushed-meanwhile")
    r.execute_command("RMQ.PUSH", "q", mode, value, "loose")
    wait_due(r, 2)
    got = pop(r, "q", "COUNT", 10)
    assert now_ms(r) < before + DELAY_MS, "machine too slow for this window"
    assert got == [(b"loose", 1)], "nothing of the group during its head's retry delay"
    assert ack(r, "q", "loose") == 1
    assert pop(r, "q") is None
    wait_due(r, after + DELAY_MS - now_ms(r))
    assert pop(r, "q", "COUNT", 10) == [(b"a", 2)], "the retry alone, when its delay ends"
    assert pop(r, "q", "COUNT", 10) is None
    assert ack(r, "q", "a") == 1
    rest = [b"pushed-meanwhile", b"b"] if kind == "priority" else [b"b", b"pushed-meanwhile"]
    assert drain(r, "q") == rest, "then the group in the queue's order"


@pytest.mark.parametrize("kind", ["fixed", "range"])
def test_several_groups_interleaved_each_keep_their_order(r, kind):
    mode, value = mode_of(kind)
    groups = [f"order-{i}" for i in range(4)]
    for step in range(3):
        for g in groups:
            gpush(r, "q", mode, value, g, f"{g}:{step}")
    seen = {g: [] for g in groups}
    rounds = 0
    while (got := pop(r, "q", "COUNT", 10)) is not None:
        rounds += 1
        assert rounds < 50
        assert len({m.split(b":")[0] for m, _ in got}) == len(got), "one message per group"
        for i, (m, d) in enumerate(got):
            g = m.split(b":")[0].decode()
            seen[g].append(m)
            # Fail each group's first delivery of every message once, in a different way.
            if d == 1 and i % 3 == 0:
                assert nack(r, "q", m) == b"requeued"
            elif d == 1 and i % 3 == 1:
                assert nack(r, "q", m, "DELAY", 0) == b"requeued"
            else:
                assert ack(r, "q", m) == 1
    for g in groups:
        delivered = [m for i, m in enumerate(seen[g]) if i == 0 or seen[g][i - 1] != m]
        assert delivered == [f"{g}:{s}".encode() for s in range(3)], f"{g}: {seen[g]}"
    assert r.dbsize() == 0


def test_cancelling_the_rolled_back_message_frees_its_group(r):
    gpush(r, "q", "DELAY", 0, "g", "a", "b")
    assert pop(r, "q") == [(b"a", 1)]
    assert nack(r, "q", "a", "DELAY", 60000) == b"requeued"
    assert pop(r, "q") is None, "b waits behind a's retry"
    assert r.execute_command("RMQ.CANCEL", "q", "a") == 1
    assert pop(r, "q") == [(b"b", 1)]


def test_a_rolled_back_message_that_dies_frees_its_group(r):
    r.execute_command("RMQ.POLICY", "q", "SET", "retries", 1)
    gpush(r, "q", "DELAY", 0, "g", "a", "b")
    assert pop(r, "q") == [(b"a", 1)]
    assert nack(r, "q", "a") == b"requeued"
    assert pop(r, "q") == [(b"a", 2)]
    assert nack(r, "q", "a") == b"dead"
    assert pop(r, "q") == [(b"b", 1)]



# The module knows in memory how many pinned heads a queue has (issue 42: with none, a pop
# looks no group up for one). These check that the count never says none while one waits:
# a copy of the group's that comes first in the queue's order waits behind its pinned head.

def pin_beside_a_copy(r, q):
    """Pins `a` of group g with a copy `x` of the group's beside it that comes first."""
    r.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "x")
    assert pop(r, q) == [(b"x", 1)]
    r.execute_command("RMQ.PUSH", q, "PRIORITY", 7, "GROUP", "g", "a")
    # Its content is in flight: this copy waits in the queue beside the group's head.
    r.execute_command("RMQ.PUSH", q, "PRIORITY", 8, "GROUP", "g", "x")
    assert pop(r, q) == [(b"a", 1)]
    assert ack(r, q, "x") == 1
    assert nack(r, q, "a") == b"requeued"


def assert_pin_holds(r, q):
    r.execute_command("RMQ.PUSH", q, "PRIORITY", -5, "e")
    assert pop(r, q, "COUNT", 3) == [(b"a", 2), (b"e", 1)], "the pinned head before the copy beside it"
    assert ack(r, q, "a") == 1 and ack(r, q, "e") == 1
    assert pop(r, q, "COUNT", 3) == [(b"x", 1)]
    assert ack(r, q, "x") == 1


def other_pin(r, q, m, *delay):
    """Pins `m` of group h (delivered and rolled back: with a DELAY, held the while)."""
    r.execute_command("RMQ.PUSH", q, "PRIORITY", 9, "GROUP", "h", m)
    assert pop(r, q) == [(m.encode(), 1)]
    assert nack(r, q, m, *delay) == b"requeued"


def test_a_pin_holds_after_pins_come_and_go(r):
    for _ in range(3):
        pin_beside_a_copy(r, "q")
        assert_pin_holds(r, "q")
    # Another group's pin stays while g's comes and goes, then goes too.
    other_pin(r, "q", "h1", "DELAY", 60000)
    for _ in range(2):
        pin_beside_a_copy(r, "q")
        assert_pin_holds(r, "q")
    assert r.execute_command("RMQ.CANCEL", "q", "h1") == 1
    pin_beside_a_copy(r, "q")
    assert_pin_holds(r, "q")
    assert r.dbsize() == 0


@pytest.mark.parametrize("end", ["death", "replay", "cancel", "purge", "drop"])
def test_a_pin_holds_after_another_pin_ended(r, end):
    r.execute_command("RMQ.POLICY", "q", "SET", "retries", 1)
    other_pin(r, "q", "h1")
    r.execute_command("RMQ.PUSH", "q", "PRIORITY", 9, "GROUP", "h", "h2")
    if end in ("death", "replay"):
        assert pop(r, "q") == [(b"h1", 2)] and nack(r, "q", "h1") == b"dead"
        if end == "replay":
            assert r.execute_command("RMQ.REPLAY", "q") == 1
    elif end == "cancel":
        assert r.execute_command("RMQ.CANCEL", "q", "h1") == 1
    else:
        r.execute_command(f"RMQ.{end.upper()}", "q")
    drain(r, "q")
    pin_beside_a_copy(r, "q")
    # Counted again after the end: a second pin, held, then g's alone.
    other_pin(r, "q", "h3", "DELAY", 60000)
    assert_pin_holds(r, "q")
    pin_beside_a_copy(r, "q")
    assert r.execute_command("RMQ.CANCEL", "q", "h3") == 1
    assert_pin_holds(r, "q")
    pin_beside_a_copy(r, "q")
    assert_pin_holds(r, "q")


def test_a_pin_holds_after_a_reload_of_older_data(start_server):
    # What the module knew before the load (no pin: the queue emptied after the save) is
    # not taken for the loaded data's.
    c = start_server(extra_conf=["--enable-debug-command", "yes"]).client()
    pin_beside_a_copy(c, "q")
    c.save()
    assert_pin_holds(c, "q")
    c.execute_command("DEBUG", "RELOAD", "NOSAVE")
    assert_pin_holds(c, "q")
    pin_beside_a_copy(c, "q")
    assert_pin_holds(c, "q")
