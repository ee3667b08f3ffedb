"""Keyspace notifications (module class, the `d` flag of notify-keyspace-events, included
in `A`): on queue key Q, one event per command per kind of change -- rmq.pushed,
rmq.merged, rmq.popped, rmq.acked, rmq.nacked, rmq.requeued, rmq.expired, rmq.dead,
rmq.extended, rmq.cancelled, rmq.replayed -- including those of the server's own lease
timer, and nothing at all when notifications are off."""

import pytest

from helpers import expect_error, nack, pop, pop_expire_sweep, push, wait_until
from ops_support import BlockedPop, EventListener, keyevent, keyspace, wait_blocked

ALL_EVENTS = {"rmq.pushed", "rmq.merged", "rmq.popped", "rmq.acked", "rmq.nacked",
              "rmq.requeued", "rmq.expired", "rmq.dead", "rmq.extended", "rmq.cancelled",
              "rmq.replayed"}


@pytest.fixture
def notify(server, r):
    """Sets notify-keyspace-events for one test (restored afterwards)."""
    c = server.client()
    old = c.config_get("notify-keyspace-events")["notify-keyspace-events"]

    def set_(flags):
        c.config_set("notify-keyspace-events", flags)

    yield set_
    c.config_set("notify-keyspace-events", old)
    c.close()


@pytest.fixture
def ev(server, r, notify):
    """A listener with notifications on (KEA); ev.run(*cmd) runs a command and returns
    (reply, [events on the keyspace channel of its queue])."""
    notify("KEA")
    lst = EventListener(server)
    lst.r = r

    def run(*args, q=None):
        reply = r.execute_command(*args)
        notes = lst.take()
        return reply, _events(notes, q if q is not None else args[1])

    lst.run = run
    yield lst
    lst.close()


@pytest.fixture
def retries(server, r):
    c = server.client()
    old = c.config_get("rmq.retries")["rmq.retries"]
    yield lambda n: c.config_set("rmq.retries", n)
    c.config_set("rmq.retries", old)
    c.close()


def _b(x):
    return x if isinstance(x, bytes) else str(x).encode()


def _events(notes, q, db=0):
    """Events of queue q, checking that keyspace and keyevent channels agree and that no
    other key was notified."""
    q = _b(q)
    ks = keyspace(notes, db)
    ke = keyevent(notes, db)
    assert all(k == q for k, _ in ks), f"notification on another key: {ks}"
    assert [(e, k) for k, e in ks] == ke, f"keyspace {ks} and keyevent {ke} disagree"
    events = [e.decode() for _, e in ks]
    assert set(events) <= ALL_EVENTS, f"unexpected event names: {events}"
    return events


# ---------------------------------------------------------------------------------------
# each command
# ---------------------------------------------------------------------------------------

def test_push_events(ev):
    assert ev.run("RMQ.PUSH", "q", "PRIORITY", 1, "a", "b") == (2, ["rmq.pushed"])
    assert ev.run("RMQ.PUSH", "q", "PRIORITY", 2, "a") == (0, ["rmq.merged"])
    assert ev.run("RMQ.PUSH", "q", "PRIORITY", 3, "a", "c", "b") == \
        (1, ["rmq.pushed", "rmq.merged"])
    assert ev.run("RMQ.PUSH", "r", "RANGE", 60000, "a", "a") == (1, ["rmq.pushed", "rmq.merged"])
    assert ev.run("RMQ.PUSH", "r", "RANGE", 60000, "a") == (0, ["rmq.merged"])
    assert ev.run("RMQ.PUSH", "f", "DELAY", 60000, "a") == (1, ["rmq.pushed"])
    assert ev.run("RMQ.PUSH", "f", "AT", 2 ** 53, "a") == (0, ["rmq.merged"])


def test_pop_events(ev):
    push(ev.r, "q", "PRIORITY", 1, "a", "b", "c")
    ev.take()
    rep, events = ev.run("RMQ.POP", "q", "COUNT", 3)
    assert len(rep) == 3 and events == ["rmq.popped"], "one event per command"
    assert ev.run("RMQ.POP", "q") == (None, [])
    assert ev.run("RMQ.POP", "empty") == (None, [])


def test_ack_events(ev):
    push(ev.r, "q", "PRIORITY", 1, "a", "b")
    pop(ev.r, "q", "COUNT", 2)
    ev.take()
    assert ev.run("RMQ.ACK", "q", "a", "b", "zz") == (2, ["rmq.acked"])
    assert ev.run("RMQ.ACK", "q", "a") == (0, [])


def test_nack_events(ev, retries):
    r = ev.r
    push(r, "q", "DELAY", 0, "a", "b", "c")
    pop(r, "q", "COUNT", 3)
    ev.take()
    assert ev.run("RMQ.NACK", "q", "a") == (b"requeued", ["rmq.nacked", "rmq.requeued"])
    assert ev.run("RMQ.NACK", "q", "b", "DELAY", 60000) == \
        (b"requeued", ["rmq.nacked", "rmq.requeued"])
    assert ev.run("RMQ.NACK", "q", "c", "DEAD") == (b"dead", ["rmq.nacked", "rmq.dead"])
    assert ev.run("RMQ.NACK", "q", "c") == (None, [])
    # retries used up
    retries(0)
    pop(r, "q")                                   # a, delivery 2
    ev.take()
    assert ev.run("RMQ.NACK", "q", "a") == (b"dead", ["rmq.nacked", "rmq.dead"])
    # a NACK that merges into a newer waiting copy is a requeue
    retries(16)
    push(r, "m", "PRIORITY", 1, "x")
    pop(r, "m")
    push(r, "m", "PRIORITY", 5, "x")
    ev.take()
    assert ev.run("RMQ.NACK", "m", "x") == (b"requeued", ["rmq.nacked", "rmq.requeued"])


def test_sweep_events(ev, retries):
    r = ev.r
    push(r, "q", "PRIORITY", 1, "a", "b")
    ev.take()
    popped, swept, left = pop_expire_sweep(r, "q", count=2, lease=1, wait_ms=5)
    assert swept == 2 and left == 0
    assert _events(ev.take(), "q") == ["rmq.popped", "rmq.expired", "rmq.requeued"]
    # one rolled back to waiting, one to dead, in one sweep
    retries(1)
    pop(r, "q", "LEASE", 600000)                  # a or b, kept in flight
    push(r, "q", "PRIORITY", 0, "c")
    ev.take()
    popped, swept, left = pop_expire_sweep(r, "q", count=2, lease=1, wait_ms=5)
    # the other of a/b is on its 2nd delivery (> 1 retry): it dies; c (1st) requeues
    assert sorted(popped) == sorted([(popped[0][0], 2), (b"c", 1)])
    notes = _events(ev.take(), "q")
    assert swept == 2 and left == 1
    assert notes == ["rmq.popped", "rmq.expired", "rmq.requeued", "rmq.dead"]
    assert ev.run("RMQ.SWEEP", "q") == (0, [])


def test_extend_events(ev):
    push(ev.r, "q", "PRIORITY", 2, "a")
    push(ev.r, "q", "PRIORITY", 1, "b")
    pop(ev.r, "q", "LEASE", 60000)
    ev.take()
    dl, events = ev.run("RMQ.EXTEND", "q", "a", 90000)
    assert isinstance(dl, int) and events == ["rmq.extended"]
    assert ev.run("RMQ.EXTEND", "q", "b", 90000) == (None, [])


def test_cancel_events(ev):
    push(ev.r, "q", "PRIORITY", 1, "a", "b", "c")
    ev.take()
    assert ev.run("RMQ.CANCEL", "q", "a", "b") == (2, ["rmq.cancelled"])
    assert ev.run("RMQ.CANCEL", "q", "zz") == (0, [])


def test_replay_events(ev):
    r = ev.r
    push(r, "q", "PRIORITY", 1, "a", "b")
    pop(r, "q", "COUNT", 2)
    nack(r, "q", "a", "DEAD")
    nack(r, "q", "b", "DEAD")
    ev.take()
    assert ev.run("RMQ.REPLAY", "q", "COUNT", 1) == (1, ["rmq.replayed"])
    assert ev.run("RMQ.REPLAY", "q") == (1, ["rmq.replayed"])
    assert ev.run("RMQ.REPLAY", "q") == (0, [])


def test_read_only_commands_and_errors_publish_nothing(ev):
    r = ev.r
    push(r, "q", "PRIORITY", 1, "a", "b")
    pop(r, "q")
    ev.take()
    assert ev.run("RMQ.INFO", "q")[1] == []
    assert ev.run("RMQ.PENDING", "q")[1] == []
    assert ev.run("RMQ.ROUTE", "q", 8, "x", q="q")[1] == []
    expect_error(r, "RMQ.PUSH", "q", "RANGE", 10, "c", contains="kind")
    expect_error(r, "RMQ.PUSH", "q", "PRIORITY", 1, "c", "", contains="empty message")
    expect_error(r, "RMQ.NACK", "q", "a", "DELAY", "soon", contains="DELAY")
    expect_error(r, "RMQ.POP", "q", "COUNT", 0, contains="COUNT")
    expect_error(r, "RMQ.EXTEND", "q", "a", 0, contains="EXTEND")
    assert ev.take() == []


def test_blocked_pop_served_publishes_popped(server, ev):
    r = ev.r
    b = BlockedPop(server, "q", "BLOCK", 5000, "LEASE", 60000)
    assert wait_blocked(r, 1)
    ev.take()
    push(r, "q", "PRIORITY", 1, "a")
    assert b.finish() == [[b"a", 1]]
    assert _events(ev.take(), "q") == ["rmq.pushed", "rmq.popped"]


def test_channels_carry_queue_and_database(server, ev):
    c = server.client(db=3)
    c.execute_command("RMQ.PUSH", "jobs:1", "PRIORITY", 1, "a")
    notes = ev.take()
    assert (b"__keyspace@3__:jobs:1", b"rmq.pushed") in notes
    assert (b"__keyevent@3__:rmq.pushed", b"jobs:1") in notes
    assert keyspace(notes, 0) == [] and keyevent(notes, 0) == []
    c.flushdb()
    c.close()


def test_binary_queue_name(ev):
    q = b"q\x00\xff"
    assert ev.run("RMQ.PUSH", q, "DELAY", 0, "a") == (1, ["rmq.pushed"])


# ---------------------------------------------------------------------------------------
# the server timer
# ---------------------------------------------------------------------------------------

def test_timer_expiry_publishes_expired_and_requeued(ev):
    r = ev.r
    push(r, "q", "PRIORITY", 1, "a")
    pop(r, "q", "LEASE", 500)  # runs out after take(), even on a slow machine
    ev.take()
    got = ev.wait_for(lambda n: len(keyevent(n)) >= 2, timeout=3.0)
    assert _events(got, "q") == ["rmq.expired", "rmq.requeued"]
    assert r.zscore("q", "a") == 1.0


def test_timer_expiry_publishes_expired_and_dead(ev, retries):
    r = ev.r
    retries(0)
    push(r, "q", "DELAY", 0, "a")
    pop(r, "q", "LEASE", 500)  # runs out after take(), even on a slow machine
    ev.take()
    got = ev.wait_for(lambda n: len(keyevent(n)) >= 2, timeout=3.0)
    assert _events(got, "q") == ["rmq.expired", "rmq.dead"]
    assert r.zscore("dead{q}", "a") is not None


def test_timer_range_due_time_publishes_nothing(ev):
    """A message coming due is not a change of state: no event (the pop is)."""
    r = ev.r
    push(r, "q", "RANGE", 30, "a")
    ev.take()
    got = ev.wait_for(lambda n: False, timeout=0.15)
    assert _events(got, "q") == []


# ---------------------------------------------------------------------------------------
# which flags enable what
# ---------------------------------------------------------------------------------------

def _scenario(r, q="q"):
    """Runs every kind of change once on q (a priority queue)."""
    push(r, q, "PRIORITY", 1, "a", "b", "c")
    push(r, q, "PRIORITY", 1, "a")
    pop(r, q, "COUNT", 3, "LEASE", 60000)
    r.execute_command("RMQ.ACK", q, "a")
    r.execute_command("RMQ.EXTEND", q, "b", 1000)
    nack(r, q, "b")
    nack(r, q, "c", "DEAD")
    r.execute_command("RMQ.REPLAY", q)
    r.execute_command("RMQ.CANCEL", q, "b", "c")
    pop_expire_sweep(r, q)  # nothing left to pop or sweep: no event


SCENARIO_EVENTS = ["rmq.pushed", "rmq.merged", "rmq.popped", "rmq.acked", "rmq.extended",
                   "rmq.nacked", "rmq.requeued", "rmq.nacked", "rmq.dead", "rmq.replayed",
                   "rmq.cancelled"]


@pytest.mark.parametrize("flags", ["KEA", "AKE", "Kd", "Ed", "KEd", "Kdg"])
def test_flags_that_enable_events(server, r, notify, flags):
    notify(flags)
    lst = EventListener(server)
    try:
        _scenario(r)
        notes = lst.take()
    finally:
        lst.close()
    ks, ke = keyspace(notes), keyevent(notes)
    if "K" in flags:
        assert [e.decode() for k, e in ks] == SCENARIO_EVENTS
        assert {k for k, _ in ks} == {b"q"}
    else:
        assert ks == []
    if "E" in flags:
        assert [e.decode() for e, _ in ke] == SCENARIO_EVENTS
        assert {k for _, k in ke} == {b"q"}
    else:
        assert ke == []


@pytest.mark.parametrize("flags", ["", "KE", "KEg$lshzxet", "d"])
def test_nothing_published_when_off(server, r, notify, flags):
    """Notifications off (""), or on for every class but the module's (d), or d without
    K/E: nothing is published -- not even by the timer."""
    notify(flags)
    lst = EventListener(server)
    try:
        _scenario(r)
        push(r, "t", "PRIORITY", 1, "x")
        pop(r, "t", "LEASE", 20)
        assert wait_until(lambda: r.zscore("t", "x") == 1.0, timeout=3.0), \
            "the timer should have rolled x back"
        got = lst.wait_for(lambda n: False, timeout=0.3)   # whatever the rollback published
        notes = got + lst.take()
    finally:
        lst.close()
    assert [n for n in notes if b"rmq." in n[0] or b"rmq." in n[1]] == []
    if flags in ("", "d"):
        assert notes == []


def test_events_on_after_being_off(server, r, notify):
    notify("")
    lst = EventListener(server)
    try:
        push(r, "q", "PRIORITY", 1, "a")
        assert lst.take() == []
        notify("Kd")
        push(r, "q", "PRIORITY", 1, "b")
        assert keyspace(lst.take()) == [(b"q", b"rmq.pushed")]
    finally:
        lst.close()
