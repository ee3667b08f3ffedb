"""A Redis without the RMQ module: the client's error says the module is not loaded and how
to load it, for calls on queues, topics, schedules and the worker; other errors pass as
they are."""

from __future__ import annotations

from typing import Iterator

import pytest
import redis

import rmq
from server_support import Server

HINT = r"RMQ module is not loaded on this Redis server.*--loadmodule /path/to/librmq\.so.*loadmodule /path/to/librmq\.so. to its redis\.conf"


@pytest.fixture(scope="module")
def plain() -> Iterator[redis.Redis]:
    s = Server(module=None, tag="rmq-plain").start()
    try:
        yield s.client()
    finally:
        s.stop()


def test_queue_topic_and_schedule_calls_say_how_to_load_the_module(plain: redis.Redis) -> None:
    q, t = rmq.Queue(plain, "orders"), rmq.Topic(plain, "events", 4)
    calls = {
        "RMQ.PUSH": lambda: q.push("a", priority=1),
        "RMQ.POP": lambda: q.pop(),
        "RMQ.INFO": lambda: t.info(),
        "RMQ.SCHEDULE": lambda: q.schedule("s", "m", every=1000, priority=1),
    }
    for command, call in calls.items():
        with pytest.raises(rmq.ModuleNotLoaded, match=HINT) as got:
            call()
        assert str(got.value).startswith(f"{command}: ")
        assert f"unknown command '{command}'" in str(got.value), "the server's words are kept"
        assert isinstance(got.value, redis.ResponseError), "still a ResponseError, as before"


def test_the_worker_run_raises_it(plain: redis.Redis) -> None:
    w = rmq.Worker(rmq.Queue(plain, "orders"), lambda m: None, block_ms=100)
    with pytest.raises(rmq.ModuleNotLoaded, match=HINT):
        w.run()


def test_other_errors_are_left_alone(r: redis.Redis) -> None:
    """With the module loaded, an RMQ error or another command's is not taken for it."""
    q = rmq.Queue(r, "missing-kind")
    q.push("a", priority=1)
    with pytest.raises(redis.ResponseError) as got:
        rmq.Queue(r, "missing-kind").push("b", delay=10)
    assert not isinstance(got.value, rmq.ModuleNotLoaded)
    assert rmq.module_missing.module_missing(
        redis.ResponseError("unknown command 'WAITAOF', with args beginning with: ")) is None
