"""RMQ.TPOP and RMQ.ROUTE, the v3 contract: QUANTUM (messages per queue per turn), queues written by
other commands seen by TPOP (after a load too, and waking blocked TPOPs), a blocked TPOP
that costs nothing per empty slot (blocked by the module, not on every queue key), and
ROUTE / TPOP refusing a topic whose slots would not be valid queue names."""

import time

import pytest

from helpers import expect_error_unchanged, info_rmq, pop, push, zs
from test_tpop import BlockedTpop, tpop
from timing_support import BlockedPop, RawBlocked, wait_blocked


# --- ROUTE and TPOP: the topic must make valid queue names -------------------------------

@pytest.mark.parametrize("topic", ["t{", "t}", "{t}", "a{b}c", ""])
def test_route_refuses_a_topic_no_command_accepts(r, topic):
    push(r, "t_0", "DELAY", 0, "a")
    expect_error_unchanged(r, "RMQ.ROUTE", topic, 4, "x", contains="queue name")
    expect_error_unchanged(r, "RMQ.TPOP", topic, 4, contains="queue name")


def test_every_name_route_hands_out_is_accepted(r):
    for topic in ("t", "t_1", "a b", b"bin\x00\xff"):
        q = r.execute_command("RMQ.ROUTE", topic, 16, "basis")
        assert push(r, q, "DELAY", 0, "m") == 1
        assert tpop(r, topic, 16) == [(q, b"m", 1)]


# --- QUANTUM ----------------------------------------------------------------------------

def test_quantum_takes_up_to_q_per_queue_per_turn(r):
    push(r, "t_0", "DELAY", 0, "a1", "a2", "a3", "a4", "a5")
    push(r, "t_1", "DELAY", 0, "b1")
    push(r, "t_2", "DELAY", 0, "c1", "c2", "c3", "c4", "c5")
    got = tpop(r, "t", 4, "COUNT", 8, "QUANTUM", 2, "LEASE", 60000)
    assert [m for _, m, _ in got] == [b"a1", b"a2", b"b1", b"c1", b"c2", b"a3", b"a4", b"c3"], "two per queue per turn"
    assert zs(r, "t_0").keys() == {b"a5"} and zs(r, "t_2").keys() == {b"c4", b"c5"}


def test_quantum_default_is_one_and_above_count_is_fine(r):
    for q in ("t_0", "t_1"):
        push(r, q, "DELAY", 0, *[f"{q}-{i}" for i in range(4)])
    assert [q for q, _, _ in tpop(r, "t", 2, "COUNT", 4)] == [b"t_0", b"t_1", b"t_0", b"t_1"]
    got = tpop(r, "t", 2, "COUNT", 3, "QUANTUM", 10000)
    # on from t_0, after t_1 which served last; a quantum above COUNT: COUNT bounds it
    assert [m for _, m, _ in got] == [b"t_0-2", b"t_0-3", b"t_1-2"]


def test_quantum_keeps_round_robin_across_tpops(r):
    for q in ("t_0", "t_3", "t_7"):
        push(r, q, "DELAY", 0, *[f"{q}-{i}" for i in range(20)])
    firsts = [tpop(r, "t", 8, "COUNT", 2, "QUANTUM", 2)[0][0] for _ in range(6)]
    assert firsts == [b"t_0", b"t_3", b"t_7", b"t_0", b"t_3", b"t_7"]
    got = tpop(r, "t", 8, "COUNT", 10000, "QUANTUM", 100)
    assert len(got) == 60 - 12 and [q for q, _, _ in got[:14]] == [b"t_0"] * 14, "one queue's turn, up to q"


def test_quantum_with_groups_and_rate_limits(r):
    r.execute_command("RMQ.PUSH", "t_0", "DELAY", 0, "GROUP", "g", "g1", "g2", "g3")
    push(r, "t_0", "DELAY", 0, "free")
    r.execute_command("RMQ.POLICY", "t_1", "SET", "rate", 1)
    push(r, "t_1", "DELAY", 0, "r1", "r2", "r3")
    got = tpop(r, "t", 2, "COUNT", 10, "QUANTUM", 5)
    assert sorted(m for _, m, _ in got) == [b"free", b"g1", b"r1"], "one per group, the rate limit"


@pytest.mark.parametrize("args,word", [
    (("t", 8, "QUANTUM", 0), "QUANTUM"),
    (("t", 8, "QUANTUM", -1), "QUANTUM"),
    (("t", 8, "QUANTUM", 10001), "QUANTUM"),
    (("t", 8, "QUANTUM", "x"), "QUANTUM"),
    (("t", 8, "QUANTUM", "2.5"), "QUANTUM"),
    (("t", 8, "QUANTUM", ""), "QUANTUM"),
    (("t", 8, "COUNT", 5, "QUANTUM"), "syntax"),
    (("t", 8, "QUANTUM", 2, "BLOCK", 0, "QUANTUM"), "syntax"),
])
def test_quantum_errors_change_nothing(r, args, word):
    push(r, "t_0", "DELAY", 0, "a", "b")
    expect_error_unchanged(r, "RMQ.TPOP", *args, contains=word)


def test_pop_has_no_quantum(r):
    push(r, "q", "DELAY", 0, "a")
    expect_error_unchanged(r, "RMQ.POP", "q", "QUANTUM", 1, contains="syntax")


# --- queues written by other commands ----------------------------------------------------

def test_a_queue_written_by_zadd_is_seen_by_tpop(r):
    r.zadd("t_7", {"raw": 1})
    assert tpop(r, "t", 8, "LEASE", 60000) == [(b"t_7", b"raw", 1)], "as RMQ.POP t_7 would"
    push(r, "t_3", "DELAY", 0, "known")
    assert tpop(r, "t", 8) == [(b"t_3", b"known", 1)]
    r.zadd("t_3", {"refilled": 1})
    assert tpop(r, "t", 8) == [(b"t_3", b"refilled", 1)], "a known queue emptied, refilled by ZADD"
    r.zadd("src", {"s1": 1, "s2": 2})
    r.zunionstore("t_5", ["src"])
    assert sorted(m for _, m, _ in tpop(r, "t", 8, "COUNT", 5)) == [b"s1", b"s2"], "ZUNIONSTORE"
    push(r, "t_6", "DELAY", 600000, "fixed")
    r.zadd("t_6", {"later": 2 ** 52})
    assert tpop(r, "t", 8) is None, "not due: the queue's rules apply"


def test_zadd_queues_seen_after_a_reload(start_server):
    c = start_server(extra_conf=["--enable-debug-command", "yes"]).client()
    c.zadd("t_7", {"raw": 1})
    c.zadd("other_2", {"x": 1})
    c.execute_command("DEBUG", "RELOAD")
    assert tpop(c, "t", 8) == [(b"t_7", b"raw", 1)]
    assert tpop(c, "other", 4) == [(b"other_2", b"x", 1)]
    assert tpop(c, "t", 8) is None


def test_blocked_tpop_woken_by_zadd(server, r):
    t = BlockedTpop(server, "t", 16, "BLOCK", 10000)
    wait_blocked(r, 1)
    r.zadd("t_9", {"raw": 1})
    assert t.finish() == [(b"t_9", b"raw", 1)]
    # a queue that exists but has nothing deliverable, then a deliverable member added
    push(r, "t_4", "DELAY", 600000, "later")
    t = BlockedTpop(server, "t", 16, "BLOCK", 10000)
    wait_blocked(r, 1)
    time.sleep(0.05)
    assert t.is_alive()
    r.zadd("t_4", {"now": 1})
    assert t.finish() == [(b"t_4", b"now", 1)]
    assert info_rmq(r)["blocked_clients"] == 0


def test_blocked_pop_woken_by_zadd_to_an_existing_queue(server, r):
    push(r, "q", "DELAY", 600000, "later")
    p = BlockedPop(server, "q", "BLOCK", 10000)
    p.start()
    wait_blocked(r, 1)
    r.zadd("q", {"now": 1})
    assert p.finish() == [(b"now", 1)]


def test_blocked_tpop_woken_by_zrem_from_prepare(server, r):
    """Freeing a content by hand (ZREM prepare{Q}) makes its waiting copy deliverable."""
    push(r, "t_1", "DELAY", 0, "m")
    assert pop(r, "t_1", "LEASE", 600000) == [(b"m", 1)]
    push(r, "t_1", "DELAY", 0, "m")
    t = BlockedTpop(server, "t", 2, "BLOCK", 10000)
    wait_blocked(r, 1)
    time.sleep(0.05)
    assert t.is_alive(), "the waiting copy is not delivered while in flight"
    r.zrem("prepare{t_1}", "m")
    assert [(q, m) for q, m, _ in t.finish()] == [(b"t_1", b"m")]


def test_blocked_tpop_woken_by_keys_that_arrive(server, r):
    push(r, "x", "DELAY", 0, "restored")
    dump = r.dump("x")
    r.delete("x", "meta{x}")
    t = BlockedTpop(server, "t", 4, "BLOCK", 10000)
    wait_blocked(r, 1)
    r.restore("t_2", 0, dump)
    assert t.finish() == [(b"t_2", b"restored", 1)]
    push(r, "staging", "DELAY", 0, "renamed")
    t = BlockedTpop(server, "t", 4, "BLOCK", 10000)
    wait_blocked(r, 1)
    r.rename("meta{staging}", "meta{t_3}")
    r.rename("staging", "t_3")
    assert t.finish() == [(b"t_3", b"renamed", 1)]


def test_blocked_tpop_woken_after_swapdb(server, r):
    r.select(1)
    push(r, "t_1", "DELAY", 0, "from-db1")
    r.select(0)
    t = BlockedTpop(server, "t", 2, "BLOCK", 10000)
    wait_blocked(r, 1)
    r.swapdb(0, 1)
    assert t.finish() == [(b"t_1", b"from-db1", 1)]


def test_a_slot_key_of_another_type_then_a_sorted_set(r):
    """A key named like a slot but of another type is skipped; once a sorted set, it is
    the queue's."""
    r.set("t_1", "a string")
    r.lpush("t_0", "a list")
    assert tpop(r, "t", 2) is None
    r.delete("t_1")
    r.zadd("t_1", {"m": 1})
    assert tpop(r, "t", 2) == [(b"t_1", b"m", 1)]
    assert r.lrange("t_0", 0, -1) == [b"a list"]


# --- a blocked TPOP costs nothing per slot -----------------------------------------------

def test_blocked_tpop_over_16384_slots_woken_timed_out_and_released(server, r):
    t = BlockedTpop(server, "big", 16384, "COUNT", 2, "BLOCK", 10000)
    wait_blocked(r, 1)
    push(r, "big_16383", "DELAY", 0, "last")
    assert t.finish() == [(b"big_16383", b"last", 1)]
    t0 = time.monotonic()
    assert tpop(r, "big", 16384, "BLOCK", 200) is None
    assert time.monotonic() - t0 >= 0.15
    raws = [RawBlocked(server, "RMQ.TPOP", "big", 16384, "BLOCK", 0) for _ in range(50)]
    wait_blocked(r, 50)
    for c in raws:
        c.close()
    wait_blocked(r, 0)
    push(r, "big_5", "DELAY", 0, "after")
    assert pop(r, "big_5") == [(b"after", 1)], "no gone client took it"


def test_blocked_tpops_served_in_arrival_order_with_their_own_slots(server, r):
    narrow = BlockedTpop(server, "t", 2, "BLOCK", 10000)
    wait_blocked(r, 1)
    wide = BlockedTpop(server, "t", 64, "BLOCK", 10000)
    wait_blocked(r, 2)
    wide2 = BlockedTpop(server, "t", 64, "COUNT", 3, "BLOCK", 10000)
    wait_blocked(r, 3)
    push(r, "t_40", "DELAY", 0, "far")
    assert wide.finish() == [(b"t_40", b"far", 1)], "the narrow one does not see slot 40"
    push(r, "t_1", "DELAY", 0, "near1", "near2")
    assert narrow.finish() == [(b"t_1", b"near1", 1)], "first come"
    assert wide2.finish() == [(b"t_1", b"near2", 1)]
    assert info_rmq(r)["blocked_clients"] == 0


def turn_by_turn(avail, order, count, quantum):
    """The contract's round-robin, one turn at a time: [(queue, index of its message)]."""
    taken = {q: 0 for q in order}
    out = []
    while len(out) < count:
        before = len(out)
        for q in order:
            k = min(quantum, avail[q] - taken[q], count - len(out))
            out += [(q, taken[q] + j) for j in range(k)]
            taken[q] += k
        if len(out) == before:
            break
    return out


def test_planned_turns_take_what_turn_after_turn_does(r):
    """TPOP asks each queue for its planned share at once; queues that fall short (few
    messages, some not due, a busy group) must leave exactly the turn-by-turn result."""
    import random
    rnd = random.Random(21)
    for trial in range(60):
        r.flushall()
        slots = rnd.choice([4, 8, 16])
        avail = {}
        for s in rnd.sample(range(slots), rnd.randint(1, slots)):
            q = f"t_{s}".encode()
            n = rnd.choice([0, 1, 2, 3, 5, 8, 20])
            msgs = [f"{s}:{i:03}" for i in range(n)]
            if msgs:
                for i, m in enumerate(msgs):  # one per push: due order = push order
                    r.execute_command("RMQ.PUSH", q, "AT", 946684800000 + i, m)
            if rnd.random() < 0.3:
                r.execute_command("RMQ.PUSH", q, "DELAY", 600000, f"{s}:later")
            avail[q] = n
        count, quantum = rnd.choice([1, 2, 3, 7, 10, 25, 100]), rnd.choice([1, 1, 2, 3, 5, 100])
        got = tpop(r, "t", slots, "COUNT", count, "QUANTUM", quantum, "LEASE", 60000)
        busy = sorted((q for q in avail if avail[q]), key=lambda q: int(q[2:]))
        if not busy:
            assert got is None
            continue
        start = busy.index(got[0][0])
        order = busy[start:] + busy[:start]
        expected = [(q, f"{q[2:].decode()}:{i:03}".encode()) for q, i in turn_by_turn(avail, order, count, quantum)]
        assert [(q, m) for q, m, _ in got] == expected, f"trial {trial}: count {count} quantum {quantum} avail {avail}"


# --- v4: successive TPOPs start at the queue after the last one served ---------------------

def test_next_tpop_starts_after_the_last_queue_served(r):
    """Issue 31's example: 4 busy queues, COUNT 3 QUANTUM 2 serves a,a,b; the next call
    starts at c (it started at b again, after the previous call's first queue)."""
    for q in ("t_0", "t_1", "t_2", "t_3"):
        push(r, q, "DELAY", 0, *[f"{q}-{i}" for i in range(10)])
    calls = [[q for q, _, _ in tpop(r, "t", 4, "COUNT", 3, "QUANTUM", 2)] for _ in range(3)]
    assert calls == [[b"t_0", b"t_0", b"t_1"], [b"t_2", b"t_2", b"t_3"], [b"t_0", b"t_0", b"t_1"]]
    # COUNT 3 QUANTUM 1 over 4: every queue served once in any 4 successive deliveries
    served = [q for _ in range(4) for q, _, _ in tpop(r, "t", 4, "COUNT", 3)]
    assert served == [b"t_2", b"t_3", b"t_0", b"t_1"] * 3


def test_next_tpop_starts_after_the_last_served_when_queues_run_short(r):
    """The last served is the queue of the reply's last entry: a queue that gave less than
    its turns (or emptied) does not count as served after it gave out."""
    push(r, "t_0", "DELAY", 0, *[f"a{i}" for i in range(10)])
    push(r, "t_1", "DELAY", 0, "b0")
    push(r, "t_2", "DELAY", 0, *[f"c{i}" for i in range(10)])
    push(r, "t_3", "DELAY", 0, "d0")
    got = [m for _, m, _ in tpop(r, "t", 4, "COUNT", 6, "QUANTUM", 2)]
    assert got == [b"a0", b"a1", b"b0", b"c0", b"c1", b"d0"], "t_3 served last"
    got = [m for _, m, _ in tpop(r, "t", 4, "COUNT", 5)]
    assert got == [b"a2", b"c2", b"a3", b"c3", b"a4"], "from t_0, after t_3; t_1 and t_3 empty"
    got = [m for _, m, _ in tpop(r, "t", 4, "COUNT", 1)]
    assert got == [b"c4"], "after t_0, the last served"


def test_successive_tpops_follow_turn_after_turn(r):
    """Random topics drained by successive TPOPs: each call is the turn-by-turn result from
    the first busy queue after the previous call's last entry."""
    import random
    rnd = random.Random(31)
    for trial in range(20):
        r.flushall()
        slots = rnd.choice([4, 8])
        avail = {}
        for s in rnd.sample(range(slots), rnd.randint(2, slots)):
            q = f"t_{s}".encode()
            avail[q] = rnd.choice([1, 2, 3, 5, 8])
            for i in range(avail[q]):
                r.execute_command("RMQ.PUSH", q, "AT", 946684800000 + i, f"{s}:{i:03}")
        taken = {q: 0 for q in avail}
        last = None
        while any(taken[q] < avail[q] for q in avail):
            count, quantum = rnd.choice([1, 2, 3, 5]), rnd.choice([1, 2, 3])
            got = tpop(r, "t", slots, "COUNT", count, "QUANTUM", quantum, "LEASE", 60000)
            busy = sorted((q for q in avail if taken[q] < avail[q]), key=lambda q: int(q[2:]))
            after = [q for q in busy if last is not None and int(q[2:]) > int(last[2:])]
            order = after + [q for q in busy if q not in after]
            left = {q: avail[q] - taken[q] for q in busy}
            expected = [(q, f"{q[2:].decode()}:{taken[q] + i:03}".encode())
                        for q, i in turn_by_turn(left, order, count, quantum)]
            assert [(q, m) for q, m, _ in got] == expected, f"trial {trial}: {count} {quantum} {left} after {last}"
            for q, _ in expected:
                taken[q] += 1
            last = got[-1][0]
