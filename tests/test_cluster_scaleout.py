"""Resharding and failover under load: a short slice of `make bench-cluster`, run by the same
code (scripts/bench_cluster.py, load from bench/driver's cluster mode, built by `make test`).

Every message the driver pushes is unique and checked: nothing a PUSH reply acknowledged may
be lost, and nothing may be delivered twice unless its delivery count shows a lease ran out
(or its PUSH was sent again after a lost reply, which the driver lists as uncertain).
"""

import argparse
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_cluster", REPO / "scripts" / "bench_cluster.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.fixture(scope="module")
def load():
    if not bench.DRIVER.exists():
        pytest.fail(f"{bench.DRIVER} missing: `make bench-driver` builds it (make test does)",
                    pytrace=False)
    # Light load, short phases: bounded on a 2-core machine.
    return argparse.Namespace(producers=1, consumers=1, quantum=100, backlog=5000, block_ms=0,
                              reshard_primaries=3, event_at=2.0, event_after=2.0,
                              lease_ms=2000, node_timeout_ms=1000)


def assert_nothing_lost_or_doubled(r):
    ck = r["check"]
    assert ck["acknowledged"] > 0
    assert ck["lost"] == 0, ck
    assert ck["dup_uncounted"] == 0, ck
    assert ck["unknown_delivered"] == 0 and ck["foreign"] == 0, ck
    assert ck["delivered"] == ck["acknowledged"], ck
    assert r["left"] == [], f"keys left after every message was acked: {r['left']}"


def test_resharding_a_quarter_of_the_slots_under_load(load):
    r = bench.reshard_run(load)
    assert r["dst_slots_after"] - r["dst_slots_before"] == bench.HASH_SLOTS // 4
    assert r["redirects"] > 0, "traffic to the moved slots was redirected"
    assert_nothing_lost_or_doubled(r)


def test_failover_with_appendfsync_always_under_load(load):
    r = bench.failover_run(load, "always")
    assert r["secs_to_serve"] < 30
    assert_nothing_lost_or_doubled(r)
