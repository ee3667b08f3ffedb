"""Blocking pops: RMQ.POP Q [COUNT n] [LEASE ms] BLOCK ms (docs/COMMANDS.md: RMQ.POP, Observability).

When nothing is deliverable the client waits until something is -- a push, a NACK, a lease
rollback by the timer, an ACK that frees the waiting copy of an in-flight content, a REPLAY,
or a waiting range/fixed message reaching its due time -- or until the timeout (then nil).
Blocked consumers are served first come, first served; one that disconnects leaves nothing
behind; inside MULTI or a script BLOCK acts as if absent. INFO rmq `blocked_clients`.

Blocked consumers run on their own connections in threads (timing_support.BlockedPop) or on
bare sockets (timing_support.RawBlocked) when they are to be dropped.
"""

import time

import pytest
import redis

from helpers import (ack, nack, now_ms, pop, prep, push, snapshot, state,
                     wait_due, zs)
from helpers import start_replica
from timing_support import (RawBlocked, blocked, crash_summary, keys_of, poll, start_blocked,
                            wait_blocked, wait_replicated)

# "promptly": a wake-up is expected within a millisecond or so; asserted loosely
PROMPT_S = 0.5
# due time reached: delivered no earlier than due and within ~100 ms after
DUE_SLACK_MS = 100
LONG_LEASE = 10000


def _still_blocked(t, secs=0.15):
    t.join(secs)
    return t.is_alive()


def _delivered_at(r, q, member, lease=LONG_LEASE):
    """Server time of a delivery made with LEASE `lease` (its deadline minus the lease)."""
    d = r.zscore(prep(q), member)
    assert d is not None, f"{member!r} should be in flight"
    return int(d) - lease


def blocked_client_ids(r):
    """Ids of the clients blocked in RMQ.POP (CLIENT LIST flag b)."""
    return [c["id"] for c in r.client_list()
            if "b" in str(c.get("flags", "")) and str(c.get("cmd", "")).lower() == "rmq.pop"]


@pytest.fixture(autouse=True)
def _no_one_left_blocked(r):
    yield
    ok, _ = poll(lambda: blocked(r) == 0, 3.0)
    assert ok, f"blocked_clients is {blocked(r)} after the test"


# ---------------------------------------------------------------------------------------
# wake-ups
# ---------------------------------------------------------------------------------------

def test_push_wakes_blocked_consumer(server, r):
    t = start_blocked(server, r, "q", "LEASE", 5000, "BLOCK", 5000)
    assert _still_blocked(t), "returned with nothing to deliver"
    push(r, "other", "PRIORITY", 1, "x")
    assert _still_blocked(t, 0.1), "a push to another queue woke it"
    t0 = now_ms(r)
    pushed_at = time.monotonic()
    assert push(r, "q", "PRIORITY", 3, "a") == 1
    assert t.finish() == [(b"a", 1)]
    assert t.t_end - pushed_at < PROMPT_S
    t1 = now_ms(r)
    deadline = r.zscore(prep("q"), "a")
    assert t0 + 5000 <= deadline <= t1 + 5000, "served with its own LEASE"
    assert zs(r, "q") == {} and zs(r, "other") == {b"x": 1.0}
    assert blocked(r) == 0
    assert pop(r, "q") is None


def test_push_in_multi_and_in_script_wakes_blocked_consumer(server, r):
    t = start_blocked(server, r, "q", "BLOCK", 5000)
    p = r.pipeline(transaction=True)
    push(p, "q", "PRIORITY", 1, "m")
    p.execute()
    assert t.finish() == [(b"m", 1)]
    t = start_blocked(server, r, "q", "BLOCK", 5000)
    r.eval("return redis.call('RMQ.PUSH', KEYS[1], 'PRIORITY', '1', 'e')", 1, "q")
    assert t.finish() == [(b"e", 1)]


def test_nack_wakes_blocked_consumer(server, r):
    push(r, "q", "PRIORITY", 2, "a")
    assert pop(r, "q") == [(b"a", 1)]
    t = start_blocked(server, r, "q", "BLOCK", 5000)
    assert _still_blocked(t)
    t_nack = time.monotonic()
    assert nack(r, "q", "a") == b"requeued"
    assert t.finish() == [(b"a", 2)]
    assert t.t_end - t_nack < PROMPT_S
    assert zs(r, "q") == {}


def test_lease_expiry_wakes_blocked_consumer(server, r):
    push(r, "q", "PRIORITY", 2, "a")
    # long enough for the consumer to be blocked before it runs out, on a slow machine
    assert pop(r, "q", "LEASE", 1000) == [(b"a", 1)]
    deadline = int(r.zscore(prep("q"), "a"))
    t = start_blocked(server, r, "q", "LEASE", LONG_LEASE, "BLOCK", 5000)
    assert t.finish(5.0) == [(b"a", 2)], "the expiry is a failed delivery"
    got_at = _delivered_at(r, "q", b"a")
    assert deadline <= got_at < deadline + 1000, (
        f"lease deadline {deadline}, re-delivered to the blocked consumer at {got_at}")


def test_ack_freeing_waiting_copy_wakes_blocked_consumer(server, r):
    push(r, "q", "PRIORITY", 2, "a")
    assert pop(r, "q") == [(b"a", 1)]
    assert push(r, "q", "PRIORITY", 2, "a") == 1  # a new waiting copy of the in-flight content
    t = start_blocked(server, r, "q", "BLOCK", 5000)
    assert _still_blocked(t, 0.2), "the waiting copy was delivered while a copy is in flight"
    t_ack = time.monotonic()
    assert ack(r, "q", "a") == 1
    assert t.finish() == [(b"a", 1)], "the new copy has a fresh delivery count"
    assert t.t_end - t_ack < PROMPT_S


def test_replay_wakes_blocked_consumer(server, r):
    push(r, "q", "PRIORITY", 2, "a")
    assert pop(r, "q") == [(b"a", 1)]
    assert nack(r, "q", "a", "DEAD") == b"dead"
    t = start_blocked(server, r, "q", "BLOCK", 5000)
    assert _still_blocked(t), "a dead message was delivered"
    t_replay = time.monotonic()
    assert r.execute_command("RMQ.REPLAY", "q") == 1
    assert t.finish() == [(b"a", 1)], "replay resets the delivery count"
    assert t.t_end - t_replay < PROMPT_S


@pytest.mark.parametrize("kind", ["DELAY", "AT", "RANGE"])
@pytest.mark.parametrize("order", ["blocked_first", "pushed_first"])
def test_due_time_wakes_blocked_consumer(server, r, kind, order):
    def do_push():
        value = now_ms(r) + 1000 if kind == "AT" else 1000  # due after the consumer blocks
        assert push(r, "q", kind, value, "a") == 1
        return int(r.zscore("q", "a"))

    if order == "pushed_first":
        due = do_push()
        t = start_blocked(server, r, "q", "LEASE", LONG_LEASE, "BLOCK", 5000)
    else:
        t = start_blocked(server, r, "q", "LEASE", LONG_LEASE, "BLOCK", 5000)
        due = do_push()
    assert t.finish(5.0) == [(b"a", 1)]
    got_at = _delivered_at(r, "q", b"a")
    assert due <= got_at <= due + DUE_SLACK_MS, (
        f"due at {due}, delivered at {got_at} ({got_at - due} ms after)")


def test_earlier_message_pushed_while_waiting_for_a_later_one(server, r):
    push(r, "q", "AT", now_ms(r) + 3000, "late")
    t = start_blocked(server, r, "q", "LEASE", LONG_LEASE, "BLOCK", 5000)
    push(r, "q", "AT", now_ms(r) + 250, "early")
    due = int(r.zscore("q", "early"))
    assert t.finish(5.0) == [(b"early", 1)]
    got_at = _delivered_at(r, "q", b"early")
    assert due <= got_at <= due + DUE_SLACK_MS
    assert list(zs(r, "q")) == [b"late"]


def test_due_time_moved_later_is_respected(server, r):
    """A debounce (DELAY, latest wins) moves the due time later while a consumer waits: it
    must get the message at the new due time, not the old one."""
    t = start_blocked(server, r, "q", "LEASE", LONG_LEASE, "BLOCK", 8000)
    push(r, "q", "DELAY", 1000, "a")
    push(r, "q", "DELAY", 3000, "a")  # moved before the first due time, even on a stalled machine
    due = int(r.zscore("q", "a"))
    assert t.finish(8.0) == [(b"a", 1)]
    got_at = _delivered_at(r, "q", b"a")
    assert due <= got_at <= due + DUE_SLACK_MS, f"due {due}, delivered {got_at}"


def test_nack_with_delay_wakes_blocked_consumer_at_due_time(server, r):
    push(r, "q", "RANGE", 1, "a")
    wait_due(r, 2)
    assert pop(r, "q") == [(b"a", 1)]
    t = start_blocked(server, r, "q", "LEASE", LONG_LEASE, "BLOCK", 5000)
    assert nack(r, "q", "a", "DELAY", 1000) == b"requeued"
    due = int(r.zscore("q", "a"))
    assert _still_blocked(t, 0.1)
    assert t.finish(5.0) == [(b"a", 2)]
    got_at = _delivered_at(r, "q", b"a")
    assert due <= got_at <= due + DUE_SLACK_MS


def test_due_time_wake_in_another_database(server, r):
    r5 = server.client(db=5)
    t = start_blocked(server, r, "q", "LEASE", LONG_LEASE, "BLOCK", 5000, db=5)
    push(r5, "q", "DELAY", 1000, "a")
    due = int(r5.zscore("q", "a"))
    assert t.finish(5.0) == [(b"a", 1)]
    got_at = _delivered_at(r5, "q", b"a")
    assert due <= got_at <= due + DUE_SLACK_MS
    assert r.dbsize() == 0


def test_lease_expiry_wake_in_another_database(server, r):
    r5 = server.client(db=5)
    push(r5, "q", "PRIORITY", 1, "a")
    assert pop(r5, "q", "LEASE", 1000) == [(b"a", 1)]  # outlives blocking the consumer
    deadline = int(r5.zscore(prep("q"), "a"))
    t = start_blocked(server, r, "q", "LEASE", LONG_LEASE, "BLOCK", 5000, db=5)
    assert t.finish(5.0) == [(b"a", 2)]
    assert deadline <= _delivered_at(r5, "q", b"a") < deadline + 1000


def test_wake_with_nothing_left_keeps_waiting(server, r):
    """The key is signalled but another client took the message first: the blocked consumer
    keeps waiting (no nil), is served by the next push, and its timeout is not restarted."""
    t = start_blocked(server, r, "q", "BLOCK", 5000)
    p = r.pipeline(transaction=True)
    push(p, "q", "PRIORITY", 1, "stolen")
    p.execute_command("RMQ.POP", "q")
    assert p.execute()[1] == [[b"stolen", 1]]
    assert _still_blocked(t, 0.2), "a wake-up with nothing deliverable ended the wait"
    push(r, "q", "PRIORITY", 1, "next")
    assert t.finish() == [(b"next", 1)]
    # the timeout still counts from the start of the wait
    t = start_blocked(server, r, "q", "BLOCK", 600)
    time.sleep(0.1)
    p = r.pipeline(transaction=True)
    push(p, "q", "PRIORITY", 1, "stolen2")
    p.execute_command("RMQ.POP", "q")
    p.execute()
    assert t.finish(3.0) is None
    assert 0.58 <= t.elapsed <= 2.0, f"BLOCK 600 ended after {t.elapsed:.3f} s"


def test_due_time_during_client_pause_write(start_server):
    """A message coming due while writes are paused (CLIENT PAUSE WRITE, as FAILOVER does)
    must not be delivered to a blocked consumer during the pause -- a delivery is a write,
    which Redis forbids then (and asserts on with AOF or replicas) -- and must be delivered
    promptly after the unpause."""
    srv = start_server(extra_conf=["--appendonly", "yes"])
    c = srv.client()
    t = start_blocked(srv, c, "q", "LEASE", LONG_LEASE, "BLOCK", 5000)
    push(c, "q", "DELAY", 1000, "a")  # due well after the pause begins, even on a slow machine
    due = int(c.zscore("q", "a"))
    c.execute_command("CLIENT", "PAUSE", 5000, "WRITE")
    try:
        t.join(max(due + 300 - now_ms(c), 0) / 1000)
        crashed = srv.wait_exit(0.2) is not None
        if not crashed:
            assert t.is_alive(), "a blocked consumer was served (a write) during CLIENT PAUSE WRITE"
            assert now_ms(c) > due + 200
    except redis.ConnectionError:
        crashed = True
    finally:
        if srv.alive():
            c.execute_command("CLIENT", "UNPAUSE")
    if crashed:
        srv.wait_exit(2)
        pytest.fail("the server died when a blocked consumer's message came due during "
                    "CLIENT PAUSE WRITE:\n" + crash_summary(srv), pytrace=False)
    unpaused = time.monotonic()
    assert t.finish(3.0) == [(b"a", 1)]
    assert t.t_end - unpaused < PROMPT_S


# ---------------------------------------------------------------------------------------
# timeouts, BLOCK 0, COUNT
# ---------------------------------------------------------------------------------------

def test_timeout_returns_nil(server, r):
    t = start_blocked(server, r, "q", "BLOCK", 300)
    assert t.finish(3.0) is None
    assert 0.28 <= t.elapsed <= 1.5, f"BLOCK 300 returned after {t.elapsed:.3f} s"
    assert blocked(r) == 0
    assert r.dbsize() == 0, "a timed-out blocking pop leaves no keys"


def test_timeout_before_due_time_returns_nil_and_leaves_message(server, r):
    push(r, "q", "DELAY", 1500, "a")
    t = start_blocked(server, r, "q", "BLOCK", 200)
    assert t.finish(3.0) is None
    assert list(zs(r, "q")) == [b"a"] and zs(r, prep("q")) == {}


def test_immediate_when_deliverable(server, r):
    push(r, "q", "PRIORITY", 1, "a")
    t0 = time.monotonic()
    assert pop(r, "q", "BLOCK", 5000) == [(b"a", 1)]
    assert time.monotonic() - t0 < PROMPT_S


def test_block_zero_waits_until_push(server, r):
    t = start_blocked(server, r, "q", "BLOCK", 0)
    assert _still_blocked(t, 0.6), "BLOCK 0 returned without a message"
    assert blocked(r) == 1
    push(r, "q", "PRIORITY", 1, "a")
    assert t.finish() == [(b"a", 1)]


def test_count_with_block_returns_up_to_count(server, r):
    t = start_blocked(server, r, "q", "COUNT", 3, "BLOCK", 5000)
    push(r, "q", "PRIORITY", 1, "a", "b")
    got = t.finish()
    assert sorted(got) == [(b"a", 1), (b"b", 1)], "fewer than COUNT available: all of them"
    t = start_blocked(server, r, "q", "COUNT", 3, "BLOCK", 5000)
    p = r.pipeline(transaction=True)
    for i, m in enumerate(["m1", "m2", "m3", "m4", "m5"]):
        push(p, "q", "PRIORITY", i, m)
    p.execute()
    assert t.finish() == [(b"m5", 1), (b"m4", 1), (b"m3", 1)], "at most COUNT, best first"
    assert zs(r, "q") == {b"m1": 0.0, b"m2": 1.0}


# ---------------------------------------------------------------------------------------
# first come, first served
# ---------------------------------------------------------------------------------------

def test_first_come_first_served(server, r):
    consumers = []
    for i in range(3):
        consumers.append(start_blocked(server, r, "q", "BLOCK", 5000, expect=i + 1))
        time.sleep(0.02)
    for i in range(3):
        push(r, "q", "PRIORITY", 1, f"m{i}")
        assert consumers[i].finish() == [(f"m{i}".encode(), 1)], f"consumer {i} served out of order"
        for later in consumers[i + 1:]:
            assert later.is_alive(), "a later consumer was served before an earlier one"
        wait_blocked(r, 2 - i)
    assert zs(r, "q") == {}


def test_one_push_of_several_messages_serves_several_consumers(server, r):
    consumers = [start_blocked(server, r, "q", "BLOCK", 5000, expect=i + 1) for i in range(3)]
    p = r.pipeline(transaction=True)
    push(p, "q", "PRIORITY", 3, "hi")
    push(p, "q", "PRIORITY", 2, "mid")
    push(p, "q", "PRIORITY", 1, "lo")
    push(p, "q", "PRIORITY", 0, "spare")
    p.execute()
    got = [c.finish() for c in consumers]
    assert got == [[(b"hi", 1)], [(b"mid", 1)], [(b"lo", 1)]], "served in order, best first"
    assert zs(r, "q") == {b"spare": 0.0}


# ---------------------------------------------------------------------------------------
# disconnects, CLIENT KILL / UNBLOCK
# ---------------------------------------------------------------------------------------

def test_disconnect_while_blocked_leaves_nothing_behind(server, r):
    gone = RawBlocked(server, "RMQ.POP", "q", "BLOCK", 0)
    wait_blocked(r, 1)
    waiting = start_blocked(server, r, "q", "BLOCK", 5000, expect=2)
    gone.close()
    wait_blocked(r, 1)
    push(r, "q", "PRIORITY", 1, "m")
    assert waiting.finish() == [(b"m", 1)], "the next blocked consumer gets the message"
    assert blocked(r) == 0
    # nobody waiting any more: the message stays waiting
    gone = RawBlocked(server, "RMQ.POP", "q", "BLOCK", 0)
    wait_blocked(r, 1)
    gone.close()
    wait_blocked(r, 0)
    push(r, "q", "PRIORITY", 1, "n")
    time.sleep(0.05)
    store, prepare, _ = state(r, "q")
    assert store == {b"n": 1.0}, "a message pushed after the consumer left is not lost"
    assert list(prepare) == [b"m"]
    assert pop(r, "q") == [(b"n", 1)]


def test_client_kill_while_blocked(server, r):
    t = start_blocked(server, r, "q", "BLOCK", 0)
    ids = blocked_client_ids(r)
    assert len(ids) == 1, ids
    r.client_kill_filter(_id=ids[0])
    t.join(5)
    assert not t.is_alive()
    assert isinstance(t.error, redis.ConnectionError)
    wait_blocked(r, 0)
    push(r, "q", "PRIORITY", 1, "m")
    assert zs(r, "q") == {b"m": 1.0} and zs(r, prep("q")) == {}


def test_client_unblock_ends_wait_with_nil(server, r):
    t = start_blocked(server, r, "q", "BLOCK", 0)
    ids = blocked_client_ids(r)
    assert len(ids) == 1
    assert r.client_unblock(ids[0]) in (1, True)
    assert t.finish() is None, "CLIENT UNBLOCK ends the wait like a timeout"
    assert blocked(r) == 0
    assert r.dbsize() == 0


# ---------------------------------------------------------------------------------------
# MULTI, scripts
# ---------------------------------------------------------------------------------------

def test_block_in_multi_is_nil_immediately(r):
    t0 = time.monotonic()
    p = r.pipeline(transaction=True)
    p.execute_command("RMQ.POP", "q", "BLOCK", 0)
    p.execute_command("RMQ.POP", "q", "COUNT", 2, "BLOCK", 5000)
    assert p.execute() == [None, None]
    assert time.monotonic() - t0 < PROMPT_S
    assert blocked(r) == 0
    push(r, "q", "PRIORITY", 1, "a")
    p = r.pipeline(transaction=True)
    p.execute_command("RMQ.POP", "q", "BLOCK", 0)
    p.execute_command("RMQ.POP", "q", "BLOCK", 0)
    assert p.execute() == [[[b"a", 1]], None]


def test_block_in_eval_is_nil_immediately(r):
    t0 = time.monotonic()
    assert r.eval('return redis.call("RMQ.POP", KEYS[1], "BLOCK", "0")', 1, "q") is None
    assert time.monotonic() - t0 < PROMPT_S
    push(r, "q", "PRIORITY", 1, "a")
    assert r.eval('return redis.call("RMQ.POP", KEYS[1], "BLOCK", "0")', 1, "q") == [[b"a", 1]]
    assert blocked(r) == 0


def test_block_in_function_is_nil_immediately(r):
    lib = ("#!lua name=rmqblocktest\n"
           "redis.register_function('bpop', function(keys, args)\n"
           "  return redis.call('RMQ.POP', keys[1], 'BLOCK', '0')\n"
           "end)")
    r.execute_command("FUNCTION", "LOAD", "REPLACE", lib)
    try:
        t0 = time.monotonic()
        assert r.execute_command("FCALL", "bpop", 1, "q") is None
        assert time.monotonic() - t0 < PROMPT_S
        assert blocked(r) == 0
    finally:
        r.execute_command("FUNCTION", "DELETE", "rmqblocktest")


# ---------------------------------------------------------------------------------------
# the gauge
# ---------------------------------------------------------------------------------------

def test_blocked_clients_gauge(server, r):
    assert blocked(r) == 0
    a = start_blocked(server, r, "q1", "BLOCK", 0)
    b = start_blocked(server, r, "q2", "BLOCK", 0)
    c = start_blocked(server, r, "q1", "BLOCK", 1000)
    assert blocked(r) == 3
    assert c.finish(3.0) is None
    assert blocked(r) == 2
    push(r, "q1", "PRIORITY", 1, "x")
    assert a.finish() == [(b"x", 1)]
    assert blocked(r) == 1
    ids = blocked_client_ids(r)
    assert len(ids) == 1
    r.client_kill_filter(_id=ids[0])
    b.join(5)
    wait_blocked(r, 0)


# ---------------------------------------------------------------------------------------
# replication of a served blocked pop
# ---------------------------------------------------------------------------------------

def test_served_blocked_pop_reaches_replica(start_server):
    primary = start_server()
    replica = start_replica(start_server, primary)
    pc, rc = primary.client(), replica.client()
    t = start_blocked(primary, pc, "q", "LEASE", 60000, "BLOCK", 5000)
    push(pc, "q", "PRIORITY", 1, "a", "b")
    got = t.finish()
    assert len(got) == 1 and got[0][1] == 1
    wait_replicated(pc)
    assert keys_of(rc, "q") == keys_of(pc, "q")
    assert snapshot(rc) == snapshot(pc)
    # and a consumer woken by a due time
    t = start_blocked(primary, pc, "d", "LEASE", 60000, "BLOCK", 5000)
    push(pc, "d", "DELAY", 100, "x")
    assert t.finish() == [(b"x", 1)]
    wait_replicated(pc)
    assert snapshot(rc) == snapshot(pc)


def test_due_time_after_cancelled_head_not_tied_to_server_cron(start_server):
    """Two consumers wait; X is due first but cancelled, so when its time comes nothing is
    deliverable, and Y, due 5 ms later, must still be delivered on time -- with hz 1, so a
    wake-up that waited for serverCron would be up to a second late."""
    s = start_server(extra_conf=["--hz", "1"])
    r = s.client()
    a = start_blocked(s, r, "q", "LEASE", LONG_LEASE, "BLOCK", 4000)
    b = start_blocked(s, r, "q", "LEASE", LONG_LEASE, "BLOCK", 4000)
    dx = now_ms(r) + 1000  # X is cancelled well before it comes due, even on a stalled machine
    dy = dx + 5
    push(r, "q", "AT", dx, "X")
    push(r, "q", "AT", dy, "Y")
    assert r.execute_command("RMQ.CANCEL", "q", "X") == 1
    assert now_ms(r) < dx, "test too slow: X came due before it was cancelled"
    results = [a.finish(5.0), b.finish(5.0)]
    assert [(b"Y", 1)] in results, results
    at = _delivered_at(r, "q", b"Y")
    assert dy <= at <= dy + DUE_SLACK_MS, f"Y due at {dy}, delivered {at - dy} ms after"
