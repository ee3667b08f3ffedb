"""python -m rmq stats: the topic's queues as a table with a total row."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import redis

import rmq
from conftest import subprocess_env
from rmq.cli import stats_table


def rows(out: str) -> dict[str, list[int]]:
    lines = [l.split() for l in out.splitlines() if l and not l.startswith("-")]
    assert lines[0] == ["queue", "waiting", "ready", "inflight", "dead"]
    return {l[0]: [int(x) for x in l[1:]] for l in lines[1:]}


def test_stats_table() -> None:
    per_queue = {
        "t_0": {"kind": "priority", "waiting": 12, "ready": 10, "inflight": 3, "dead": 1},
        "t_1": {"kind": None, "waiting": 0, "ready": 0, "inflight": 0, "dead": 0},
        "t_2": {"kind": "priority", "waiting": 1005, "ready": 1005, "inflight": 0, "dead": 0},
    }
    out = stats_table(per_queue)
    assert rows(out) == {"t_0": [12, 10, 3, 1], "t_1": [0, 0, 0, 0], "t_2": [1005, 1005, 0, 0],
                         "total": [1017, 1015, 3, 1]}
    lines = out.splitlines()
    assert len({len(l) for l in lines}) == 1, "columns are aligned"
    assert set(lines[-2]) == {"-"}
    assert "t_1" not in rows(stats_table(per_queue, nonempty=True))


def run_cli(*args: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmq", *map(str, args)], capture_output=True,
                          text=True, timeout=60, env=subprocess_env())


def test_cli_stats_against_a_server(server: Any, r: redis.Redis) -> None:
    t = rmq.Topic(r, "orders", 4)
    t.push(*[f"o{i}" for i in range(20)], priority=1)
    taken = t.queue_for("o1")
    q = rmq.Queue(r, taken)
    a, b = q.pop(count=2, lease_ms=60_000)
    b.nack(dead=True)
    p = run_cli("stats", "orders", 4, "--port", server.port)
    assert p.returncode == 0, p.stderr
    got = rows(p.stdout)
    assert list(got) == [f"orders_{i}" for i in range(4)] + ["total"]
    for name, info in t.info_by_queue().items():
        assert got[name] == [info["waiting"], info["ready"], info["inflight"], info["dead"]]
    assert got["total"] == [18, 18, 1, 1]
    a.ack()


def test_cli_errors_are_reported(server: Any) -> None:
    p = run_cli("stats", "orders", 12, "--port", server.port)
    assert p.returncode == 1 and "power of two" in p.stderr
