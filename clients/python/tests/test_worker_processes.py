"""Workers in their own processes (tests/worker_proc.py), started here and signalled or
killed by their pid: redelivery after a SIGKILL, groups never handled twice at once across
4 processes, SIGTERM as a graceful stop. Times compared are the server's clock (TIME)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator, Union

import pytest
import redis

import rmq
from conftest import require, subprocess_env
from helpers import now_ms as server_ms
from server_support import wait_for

SCRIPT = str(Path(__file__).with_name("worker_proc.py"))
Source = Union[rmq.Queue, rmq.Topic]


@pytest.fixture(params=["queue", "topic"])
def kind(request: Any, r: redis.Redis) -> str:
    if request.param == "topic":
        require(r, "tpop")
    return request.param


@pytest.fixture
def spawn(server: Any) -> Iterator[Callable[..., subprocess.Popen]]:
    """spawn(source, *options) starts worker_proc.py on `source` and waits until it is up."""
    procs: list[subprocess.Popen] = []

    def start(source: Source, *options: Any) -> subprocess.Popen:
        where = (["--topic", source.name, "--slots", source.slots] if isinstance(source, rmq.Topic)
                 else ["--queue", source.name])
        argv = [sys.executable, SCRIPT, "--port", server.port, *where, *options]
        p = subprocess.Popen([str(a) for a in argv], env=subprocess_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        wait_for(lambda: p.poll() is not None or server.conn().exists(f"rmqtest:up:{p.pid}"),
                 timeout=30, what="the worker process to start")
        assert p.poll() is None, p.communicate()[1]
        return p
    yield start
    for p in procs:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)


def make(r: redis.Redis, kind: str, name: str) -> Source:
    return rmq.Queue(r, name) if kind == "queue" else rmq.Topic(r, name, 8)


def log_entries(r: redis.Redis) -> list[tuple[bytes, int, int, int, int]]:
    """(body, deliveries, start µs, end µs, pid) for each handled message."""
    out = []
    for line in r.lrange("rmqtest:log", 0, -1):
        body, rest = line.split(b"|", 1)
        out.append((body, *(int(x) for x in rest.split(b"|"))))
    return out


def test_a_killed_workers_message_is_redelivered_after_its_lease(
        r: redis.Redis, kind: str, spawn: Callable) -> None:
    source = make(r, kind, "killed")
    queue = source.queue_for("victim") if isinstance(source, rmq.Topic) else source.name
    source.push("victim", priority=1)
    first = spawn(source, "--hang", "victim", "--lease-ms", 3000, "--concurrency", 2)
    wait_for(lambda: r.get("rmqtest:hanging") == str(first.pid).encode(), timeout=30,
             what="the handler to start")
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    # nothing extends the lease any more: its deadline is final
    (entry,) = r.execute_command("RMQ.PENDING", queue)
    body, deliveries, deadline = entry[0], entry[1], entry[2]
    assert (body, deliveries) == (b"victim", 1)
    second = spawn(source, "--lease-ms", 3000)
    wait_for(lambda: log_entries(r), timeout=30, what="the redelivery")
    ((body, deliveries, start_us, _end, pid),) = log_entries(r)
    assert (body, deliveries, pid) == (b"victim", 2, second.pid)
    assert start_us >= deadline * 1000, "redelivered before the lease ran out"
    os.kill(second.pid, signal.SIGTERM)
    assert second.wait(timeout=30) == 0
    assert rmq.Queue(r, queue).info()["inflight"] == 0


def test_a_group_is_never_handled_by_two_handlers_at_once(
        r: redis.Redis, kind: str, spawn: Callable) -> None:
    require(r, "group")
    source = make(r, kind, "grouped")
    procs = [spawn(source, "--concurrency", 4, "--sleep-ms", 5, 25) for _ in range(4)]
    groups, per_group = 12, 15
    expected = set()
    for g in range(groups):
        bodies = [f"g{g}:{i:03d}".encode() for i in range(per_group)]
        expected.update(bodies)
        source.push(*bodies, priority=1, group=f"g{g}")
    wait_for(lambda: r.llen("rmqtest:log") >= len(expected), timeout=120, interval=0.1,
             what="every message handled")
    for p in procs:
        os.kill(p.pid, signal.SIGTERM)
    for p in procs:
        assert p.wait(timeout=30) == 0
    entries = log_entries(r)
    assert sorted(e[0] for e in entries) == sorted(expected), "each message handled once"
    assert {e[1] for e in entries} == {1}
    by_group: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for body, _d, start, end, _pid in entries:
        by_group[body.split(b":")[0]].append((start, end))
    for group, spans in by_group.items():
        spans.sort()
        for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
            assert s2 >= e1, f"group {group!r}: [{s1}, {e1}] and [{s2}, {e2}] overlap"
    all_spans = sorted((s, e) for s, e in (x[2:4] for x in entries))
    assert any(s2 < e1 for (_s1, e1), (s2, _e2) in zip(all_spans, all_spans[1:])), \
        "different groups never ran in parallel: the test shows nothing"
    assert len({e[4] for e in entries}) >= 2, "only one process took messages"


def test_sigterm_stops_gracefully(r: redis.Redis, kind: str, spawn: Callable) -> None:
    source = make(r, kind, "term")
    source.push(*[f"t{i}" for i in range(20)], priority=1)
    p = spawn(source, "--concurrency", 2, "--sleep-ms", 300, 300)
    wait_for(lambda: r.llen("rmqtest:log") >= 2, timeout=30, what="two messages handled")
    os.kill(p.pid, signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "processed=" in out
    handled = len(log_entries(r))
    info = source.info()
    assert info["inflight"] == 0 and info["waiting"] == 20 - handled
