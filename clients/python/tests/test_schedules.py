"""Queue.schedule / schedules / unschedule, Topic helpers and `python -m rmq schedules`."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

import rmq
from rmq.schedules import Schedule, schedules_table, set_args
from test_cli import run_cli


def test_set_args_are_checked_before_sending() -> None:
    assert set_args("q", "n", "m", every=5, priority=1, times=3, group="g") == [
        "RMQ.SCHEDULE", "q", "SET", b"n", "EVERY", 5, "TIMES", 3, "PRIORITY", 1, "GROUP", b"g", "MESSAGES",
        b"m"]
    assert set_args("q", "n", b"m", cron="0 9 * * 1", tz="Asia/Tokyo", delay=0, start=10 ** 12) == [
        "RMQ.SCHEDULE", "q", "SET", b"n", "CRON", "0 9 * * 1", "TZ", "Asia/Tokyo", "START", 10 ** 12,
        "DELAY", 0, "MESSAGES", b"m"]
    bad: list[dict[str, Any]] = [
        {"priority": 1},                                        # no timing
        {"every": 5, "cron": "* * * * *", "priority": 1},    # both
        {"every": 5},                                        # no mode
        {"every": 5, "priority": 1, "delay": 1},             # two modes
        {"every": 0, "priority": 1},
        {"every": 5, "tz": "UTC", "priority": 1},
        {"every": 5, "times": 0, "priority": 1},
        {"every": 5, "start": 5, "priority": 1},
        {"every": 5, "range": 0},
        {"every": 5, "priority": 1, "group": ""},
    ]
    for kw in bad:
        with pytest.raises(ValueError):
            set_args("q", "n", "m", **kw)
    with pytest.raises(ValueError):
        set_args("q", "n", "", every=5, priority=1)
    with pytest.raises(TypeError):
        set_args("q", "n", "m", every="5", priority=1)


def test_queue_schedules_against_a_server(server: Any, r: redis.Redis) -> None:
    q = rmq.Queue(r, "py_sched")
    first = q.schedule("tick", "job", every=100, priority=3)
    q.schedule("daily", "report", cron="0 9 * * MON-FRI", tz="Europe/Paris", priority=1)
    assert first > 0
    time.sleep(0.45)
    got = {s.name: s for s in q.schedules()}
    assert set(got) == {"daily", "tick"}
    tick = got["tick"]
    assert tick.queue == "py_sched" and tick.spec == "EVERY 100 PRIORITY 3 MESSAGES job"
    assert tick.fired >= 2 and tick.last == first + (tick.fired - 1) * 100
    assert got["daily"].fired == 0 and got["daily"].last is None
    assert q.info()["schedules"] == 2
    assert [m.body for m in q.pop()] == [b"job"]
    assert q.unschedule("tick", "nope") == 1
    with pytest.raises(redis.ResponseError, match="time zone"):
        q.schedule("x", "m", cron="* * * * *", tz="Nowhere/Land", priority=1)
    assert [s.name for s in q.schedules()] == ["daily"]
    # a stored value the module cannot use is listed as broken, never fired
    r.hset("sched{py_sched}", "junk", b"\x01not a schedule")
    junk = {s.name: s for s in q.schedules()}["junk"]
    assert junk.spec.startswith("broken: ") and (junk.next, junk.fired, junk.last) == (None, None, None)
    assert "broken: " in rmq.schedules.schedules_table(q.schedules())


def test_topic_schedule_goes_to_the_routed_queue(server: Any, r: redis.Redis) -> None:
    t = rmq.Topic(r, "py_st", slots=4)
    t.schedule("refresh", "prices", every=60_000, range=10, basis="eu")
    entries = t.schedules()
    assert [(e.queue, e.name) for e in entries] == [(t.queue_for("eu"), "refresh")]
    assert t.unschedule("refresh") == 1
    assert t.schedules() == []


def test_schedules_table_and_cli(server: Any, r: redis.Redis) -> None:
    out = schedules_table([Schedule("q", "a", "EVERY 5 PRIORITY 1 m", 1_700_000_000_000, 12, None)])
    lines = out.splitlines()
    assert lines[0].split() == ["queue", "name", "next", "last", "fired", "spec"]
    assert lines[1].split()[:5] == ["q", "a", "2023-11-14", "22:13:20.000Z", "-"]
    assert lines[1].endswith("12  EVERY 5 PRIORITY 1 m")
    rmq.Queue(r, "py_cli").schedule("n", "m", every=3_600_000, delay=5)
    p = run_cli("schedules", "py_cli", "--port", server.port)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[1].split()[:2] == ["py_cli", "n"]
    assert p.stdout.rstrip().endswith("EVERY 3600000 DELAY 5 MESSAGES m")
