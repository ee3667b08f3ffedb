"""Queue and Topic: routing, argument validation, pushes, INFO summing, POLICY."""

from __future__ import annotations

from typing import Any

import pytest
import redis

import rmq
from conftest import require
from helpers import now_ms
from timing_support import sleep_until_server_ms


class Recorder:
    """A stand-in client that records the commands it is asked to send."""

    def __init__(self, reply: Any = 1) -> None:
        self.calls: list[tuple] = []
        self.reply = reply

    def execute_command(self, *args: Any, **_kw: Any) -> Any:
        self.calls.append(args)
        return self.reply

    def pipeline(self, transaction: bool = False) -> "Recorder":
        return self

    def execute(self) -> list:
        return [self.reply] * len(self.calls)


# -- routing -------------------------------------------------------------------------

@pytest.mark.parametrize("basis, slots, queue", [
    ("hello", 8, "t_6"), ("item:42", 16, "t_13"), ("order-1001", 1024, "t_569"), ("", 4, "t_0"),
])
def test_spec_route_vectors(basis: str, slots: int, queue: str) -> None:
    assert rmq.route("t", slots, basis) == queue
    assert rmq.route("t", slots, basis.encode()) == queue
    assert rmq.Topic(Recorder(), "t", slots).queue_for(basis) == queue


def test_local_routing_matches_rmq_route(r: redis.Redis) -> None:
    topic = rmq.Topic(r, "orders", 1024)
    for basis in [b"order-1001", b"\x00\xff binary", "é-unicode", b"x" * 300]:
        assert topic.queue_for(basis).encode() == r.execute_command(
            "RMQ.ROUTE", "orders", 1024, basis)


@pytest.mark.parametrize("slots", [0, 3, 12, 16385, 32768, -8, 2.0, True, "16"])
def test_bad_slot_counts_are_refused(slots: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        rmq.Topic(Recorder(), "t", slots)


@pytest.mark.parametrize("name", ["", "a{b", "a}b", None, b"bytes"])
def test_bad_queue_names_are_refused(name: Any) -> None:
    with pytest.raises(ValueError):
        rmq.Queue(Recorder(), name)


# -- argument validation: nothing is sent ---------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {},                                             # no mode
    {"priority": 1, "range": 5},                 # two modes
    {"at": 1767225600000, "delay": 0},
    {"range": 0}, {"range": -1}, {"range": 1.5}, {"range": True},
    {"priority": 2 ** 53 + 1}, {"priority": -(2 ** 53) - 1}, {"priority": "1"},
    {"at": 1767225600}, {"at": 2 ** 53 + 1},        # seconds, beyond 2^53
    {"delay": -1}, {"delay": 2 ** 52 + 1}, {"range": 2 ** 52 + 1},
    {"priority": 1, "group": ""}, {"priority": 1, "group": b"g" * 1025},
])
def test_bad_push_arguments_raise_before_sending(kwargs: dict) -> None:
    for target in (rmq.Queue(Recorder(), "q"), rmq.Topic(Recorder(), "t", 8)):
        with pytest.raises((ValueError, TypeError)):
            target.push("m", **kwargs)
        assert target.client.calls == []


def test_bad_messages_raise_before_sending() -> None:
    q = rmq.Queue(Recorder(), "q")
    for messages in [(), ("a", ""), ("a", b""), ("a", 5)]:
        with pytest.raises((ValueError, TypeError)):
            q.push(*messages, priority=1)
    assert q.client.calls == []


def test_bounds_that_are_accepted() -> None:
    q = rmq.Queue(Recorder(), "q")
    q.push("m", priority=2 ** 53)
    q.push("m", priority=-(2 ** 53))
    q.push("m", at=946684800000)
    q.push("m", delay=0)
    q.push("m", range=1, group=b"g" * 1024)
    q.push("m", range=2 ** 52)
    q.push("m", delay=2 ** 52)
    assert [c[2:4] for c in q.client.calls] == [
        ("PRIORITY", 2 ** 53), ("PRIORITY", -(2 ** 53)), ("AT", 946684800000), ("DELAY", 0),
        ("RANGE", 1), ("RANGE", 2 ** 52), ("DELAY", 2 ** 52)]


def test_bad_pop_and_settle_arguments_raise_before_sending() -> None:
    q, t = rmq.Queue(Recorder(), "q"), rmq.Topic(Recorder(), "t", 4)
    for kwargs in [{"count": 0}, {"count": 10_001}, {"lease_ms": 0}, {"lease_ms": 2 ** 52 + 1},
                   {"block_ms": -1}, {"count": 1.0}]:
        for target in (q, t):
            with pytest.raises((ValueError, TypeError)):
                target.pop(**kwargs)
    for quantum in (0, 10_001, 1.5):
        with pytest.raises((ValueError, TypeError)):
            t.pop(quantum=quantum)
    for count in (0, -1, 2 ** 62 + 1, 1.5):
        with pytest.raises((ValueError, TypeError)):
            t.replay(count)
    assert q.client.calls == [] and t.client.calls == []
    m = rmq.Message(Recorder(), "q", b"m", 1)
    for ms in (0, -5, 2 ** 52 + 1):
        with pytest.raises(ValueError):
            m.extend(ms)
    with pytest.raises(TypeError):          # not an integer, as in the Node client
        m.extend(1.5)
    with pytest.raises(ValueError):
        m.nack(delay_ms=-1)
    assert m._client.calls == [] and not m.settled


@pytest.mark.parametrize("kwargs", [
    {}, {"retries": 1001}, {"retries": -1}, {"lease_ms": 0}, {"rate": 10 ** 9 + 1},
    {"rate_window_ms": 0}, {"backoff_ms": 2 ** 31 + 1}, {"backoff_ms": 1.5}, {"unknown": 1},
    {"lease-ms": 5}, {"paused": 2}, {"paused": "yes"},
])
def test_bad_policy_fields_raise_before_sending(kwargs: dict) -> None:
    t = rmq.Topic(Recorder(), "t", 4)
    with pytest.raises((ValueError, TypeError)):
        t.set_policy(**kwargs)
    assert t.client.calls == []


def test_set_policy_is_sent_to_every_slot() -> None:
    t = rmq.Topic(Recorder(b"OK"), "t", 4)
    t.set_policy(retries=5, backoff_ms=1000)
    assert t.client.calls == [("RMQ.POLICY", f"t_{i}", "SET", "retries", 5, "backoff-ms", 1000)
                              for i in range(4)]


def test_purge_and_drop_are_sent_as_the_commands_say() -> None:
    t = rmq.Topic(Recorder(2), "t", 2)
    assert t.purge() == 4                           # the sum over the topic's queues
    t.purge(dead=True)
    t.drop()
    assert t.client.calls == [
        *[("RMQ.PURGE", f"t_{i}") for i in range(2)],
        *[("RMQ.PURGE", f"t_{i}", "DEAD") for i in range(2)],
        *[("RMQ.DROP", f"t_{i}") for i in range(2)]]
    q = rmq.Queue(Recorder(1), "q")
    assert q.purge() == 1
    q.drop()
    assert q.client.calls == [("RMQ.PURGE", "q"), ("RMQ.DROP", "q")]


def test_pause_resume_replay_and_quantum_are_sent_as_the_commands_say() -> None:
    t = rmq.Topic(Recorder(1), "t", 2)
    t.pause()
    t.resume()
    t.replay()
    t.replay(5)
    assert t.client.calls == [
        *[("RMQ.POLICY", f"t_{i}", "SET", "paused", 1) for i in range(2)],
        *[("RMQ.POLICY", f"t_{i}", "SET", "paused", 0) for i in range(2)],
        *[("RMQ.REPLAY", f"t_{i}") for i in range(2)],
        *[("RMQ.REPLAY", f"t_{i}", "COUNT", 5) for i in range(2)]]
    t = rmq.Topic(Recorder(b"OK"), "t", 1)
    t.set_policy(paused=True)                       # a bool is taken for paused, as in Node
    assert t.client.calls == [("RMQ.POLICY", "t_0", "SET", "paused", 1)]
    t = rmq.Topic(Recorder(None), "t", 2)
    assert t.pop(count=3, quantum=2) == []
    assert t.client.calls == [("RMQ.TPOP", "t", 2, "COUNT", 3, "QUANTUM", 2)]


# -- what a push sends ------------------------------------------------------------------

def test_topic_push_routes_each_message_by_itself_one_push_per_queue() -> None:
    t = rmq.Topic(Recorder(), "t", 8)
    msgs = [b"m%d" % i for i in range(40)]
    t.push(*msgs, priority=3)
    by_queue: dict[str, list[bytes]] = {}
    for m in msgs:
        by_queue.setdefault(rmq.route("t", 8, m), []).append(m)
    assert sorted(t.client.calls) == sorted(("RMQ.PUSH", q, "PRIORITY", 3, "MESSAGES", *ms)
                                            for q, ms in by_queue.items())


def test_topic_push_with_basis_or_group_uses_one_queue() -> None:
    t = rmq.Topic(Recorder(), "orders", 16)
    t.push("order-1001:paid", "x", delay=900_000, group="order-1001", basis="item:42")
    t.push("a", "b", "c", range=5, group="order-1001")
    assert t.client.calls == [
        ("RMQ.PUSH", "orders_13", "DELAY", 900_000, "GROUP", b"order-1001", "MESSAGES",
         b"order-1001:paid", b"x"),
        ("RMQ.PUSH", t.queue_for("order-1001"), "RANGE", 5, "GROUP", b"order-1001", "MESSAGES",
         b"a", b"b", b"c"),
    ]


def test_messages_ends_the_options_so_any_spelling_is_a_message() -> None:
    q = rmq.Queue(Recorder(), "q")
    q.push("GROUP", "x", "y", priority=1)
    q.push("MESSAGES", priority=1, group="g")
    assert q.client.calls == [
        ("RMQ.PUSH", "q", "PRIORITY", 1, "MESSAGES", b"GROUP", b"x", b"y"),
        ("RMQ.PUSH", "q", "PRIORITY", 1, "GROUP", b"g", "MESSAGES", b"MESSAGES"),
    ]


def test_messages_spelt_like_options_arrive_as_messages(r: redis.Redis) -> None:
    q = rmq.Queue(r, "gq")
    assert q.push("GROUP", "x", "y", priority=1) == 3
    assert q.push("group", "Group", "GROUP", "gRoUp", priority=1) == 3   # GROUP merges
    assert q.push("MESSAGES", "dedup", "messages", priority=1) == 3
    assert sorted(r.zrange("gq", 0, -1)) == sorted([b"GROUP", b"x", b"y", b"group", b"Group",
                                                    b"gRoUp", b"MESSAGES", b"dedup",
                                                    b"messages"])


# -- against the server ---------------------------------------------------------------

def test_push_pop_ack_nack_extend(r: redis.Redis) -> None:
    q = rmq.Queue(r, "jobs")
    assert q.push("a", "b", priority=5) == 2
    assert q.push("a", priority=9) == 0             # merged, priority replaced
    a, b = q.pop(count=2, lease_ms=10_000)
    assert (a.body, a.queue, a.deliveries, b.body) == (b"a", "jobs", 1, b"b")
    deadline = a.extend(60_000)
    assert isinstance(deadline, int) and deadline > 0
    assert a.ack() is True
    with pytest.raises(rmq.AlreadySettled):
        a.ack()
    with pytest.raises(rmq.AlreadySettled):
        a.nack()
    assert b.nack() == "requeued"
    (b2,) = q.pop(lease_ms=10_000)
    assert (b2.body, b2.deliveries) == (b"b", 2)
    assert b2.nack(dead=True) == "dead"
    assert q.info()["dead"] == 1 and q.pop() == []
    assert a.extend(1000) is None                   # no longer in flight


def test_topic_push_lands_where_route_says(r: redis.Redis) -> None:
    t = rmq.Topic(r, "prices", 16)
    msgs = [f"item:{i}" for i in range(100)]
    assert t.push(*msgs, range=60_000) == 100
    for m in msgs:
        assert r.zscore(t.queue_for(m), m) is not None
    assert t.push("p1", "p2", range=60_000, basis="customer-7") == 2
    assert {m for m in r.zrange(t.queue_for("customer-7"), 0, -1)} >= {b"p1", b"p2"}


def test_info_is_summed_over_the_slots(r: redis.Redis) -> None:
    t = rmq.Topic(r, "sum", 8)
    t.push(*[f"m{i}" for i in range(50)], range=1)
    t.push(*[f"later{i}" for i in range(7)], range=3_600_000)
    sleep_until_server_ms(r, now_ms(r) + 2)  # every m<i> is due: the counts hold still
    q0 = rmq.Queue(r, t.queue_for("m1"))
    (m,) = q0.pop(lease_ms=60_000, block_ms=2000)
    (dead,) = q0.pop(lease_ms=60_000, block_ms=2000)
    dead.nack(dead=True)
    per_queue = t.info_by_queue()
    assert set(per_queue) == set(t.queues)
    total = t.info()
    assert total["waiting"] == 55 and total["inflight"] == 1 and total["dead"] == 1
    assert total["ready"] == sum(i["ready"] for i in per_queue.values())
    assert total["kinds"] == ["range"]
    assert total["next_expiry"] == min(i["next_expiry"] for i in per_queue.values()
                                       if i["next_expiry"] is not None)
    assert total["next_due"] == min(i["next_due"] for i in per_queue.values()
                                    if i["next_due"] is not None)
    m.ack()


def test_sum_info_of_maps() -> None:
    infos = [
        {"kind": "priority", "waiting": 2, "ready": 2, "inflight": 1, "dead": 0,
         "next_due": None, "next_expiry": 500, "lag_ms": None, "paused": 1},
        {"kind": None, "waiting": 0, "ready": 0, "inflight": 0, "dead": 0, "next_due": None,
         "next_expiry": None, "lag_ms": 0, "paused": 0},
        {"kind": "range", "waiting": 3, "ready": 1, "inflight": 2, "dead": 4, "next_due": 70,
         "next_expiry": 400, "lag_ms": 25, "paused": 1},
    ]
    assert rmq.sum_info(infos) == {"kinds": ["priority", "range"], "waiting": 5, "ready": 3,
                                   "inflight": 3, "dead": 4, "next_due": 70, "next_expiry": 400,
                                   "lag_ms": 25, "paused": 2}
    assert rmq.sum_info([])["kinds"] == []


@pytest.mark.parametrize("protocol, decode", [(2, False), (3, False), (3, True), (2, True)])
def test_replies_in_resp2_and_resp3_with_or_without_decoding(server: Any, r: redis.Redis,
                                                             protocol: int, decode: bool) -> None:
    c = server.client(protocol=protocol, decode_responses=decode)
    q = rmq.Queue(c, "shapes")
    q.push("hello", priority=1)
    info = q.info()
    assert info["kind"] == "priority" and info["waiting"] == 1 and info["next_due"] is None
    (m,) = q.pop(lease_ms=5000)
    assert m.body == b"hello" and m.queue == "shapes"
    assert m.ack() is True


def test_policy_set_get_reset(r: redis.Redis) -> None:
    require(r, "policy")
    t = rmq.Topic(r, "pol", 4)
    t.set_policy(retries=5, backoff_ms=1000)
    policies = t.policy()
    assert set(policies) == set(t.queues)
    for p in policies.values():
        assert p["retries"] == 5 and p["backoff_ms"] == 1000
    q = rmq.Queue(r, "pol_0")
    assert q.policy()["retries"] == 5
    assert t.reset_policy() == 4
    assert t.reset_policy() == 0
    assert q.policy()["retries"] == 16


def test_push_with_group(r: redis.Redis) -> None:
    require(r, "group")
    t = rmq.Topic(r, "orders", 16)
    assert t.push("order-1001:paid", "order-1001:shipped", priority=1, group="order-1001") == 2
    q = rmq.Queue(r, t.queue_for("order-1001"))
    (first,) = q.pop(count=2, lease_ms=10_000)      # one POP takes one message of a group
    assert q.pop(lease_ms=10_000) == []             # the other is held back by its group
    first.ack()
    (second,) = q.pop(lease_ms=10_000)
    assert {first.body, second.body} == {b"order-1001:paid", b"order-1001:shipped"}
    second.ack()


def test_topic_pop_takes_from_every_queue(r: redis.Redis) -> None:
    require(r, "tpop")
    t = rmq.Topic(r, "tp", 8)
    msgs = {f"m{i}".encode() for i in range(30)}
    t.push(*msgs, priority=1)
    got = t.pop(count=100, lease_ms=10_000)
    assert {m.body for m in got} == msgs
    assert all(m.queue == t.queue_for(m.body) and m.deliveries == 1 for m in got)
    assert t.pop(block_ms=50) == []
    for m in got:
        assert m.ack()
