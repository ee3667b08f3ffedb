"""Latency without sch_netem (delay.py, issue #35): Lab.degrade holds every packet a node
sends for the given time, replication and Sentinel keep working (and keep the nodes' real
addresses) through it, and undegrade leaves no rule and no delayer process behind. Needs
root and network namespaces; skips with the reason otherwise.
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Optional

import pytest

import delay
from netlab import Lab, Node, available, wait_until
from sentinel_lab import PORT, SENTINEL_PORT, SentinelLab
from server_bin import server_binary
from server_support import module_path

REASON = available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

DELAY_MS = 50

# PING round trips in milliseconds, timed with time.monotonic inside the client's namespace
RTT = """
import json, sys, time, redis
r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]), socket_timeout=10)
r.ping()
out = []
for _ in range(15):
    t = time.monotonic(); r.ping(); out.append((time.monotonic() - t) * 1000)
print(json.dumps(out))
"""


def rtts(client: Node, server: Node, port: int = PORT) -> list:
    return json.loads(client.run(sys.executable, "-c", RTT, server.ip, str(port)).stdout)


def leftovers(lab: Lab, nodes: list) -> list:
    """Delay or loss rules, and delayer processes, still in place."""
    rules = [line for n in nodes for line in
             n.run("iptables", "-t", delay.TABLE, "-S", delay.CHAIN).stdout.splitlines()
             + n.run("iptables", "-S", "INPUT").stdout.splitlines()
             if "NFQUEUE" in line or "statistic" in line]
    return rules + list(lab.delayers.values())


@pytest.fixture
def sentinels():
    with Lab() as lab:
        s = SentinelLab(lab, server_binary(), module_path(), "async")
        s.start()
        yield s


def test_latency_per_sent_packet(sentinels: SentinelLab):
    s, lab = sentinels, sentinels.lab
    primary, client = s.data[0], s.clients[0]
    base = statistics.median(rtts(client, primary))

    lab.degrade([primary], 0, DELAY_MS)
    one = rtts(client, primary)
    lab.degrade([client], 0, DELAY_MS)
    both = rtts(client, primary)
    procs = list(lab.delayers.values())
    print(f"PING ms, median: none {base:.1f}, one end delayed {statistics.median(one):.1f}, "
          f"both {statistics.median(both):.1f}")
    # each direction crosses one delayed sender: the reply only when the primary alone is
    # degraded, request and reply when both ends are; upper bounds generous (a busy machine)
    assert base < DELAY_MS
    assert min(one) >= DELAY_MS - 2
    assert statistics.median(one) < 2 * DELAY_MS
    assert min(both) >= 2 * DELAY_MS - 2
    assert statistics.median(both) < 2 * DELAY_MS + 2000

    lab.undegrade([primary, client])
    assert leftovers(lab, [primary, client]) == []
    assert len(procs) == 2 and all(p.poll() is not None for p in procs)
    assert not any(p in lab.procs for p in procs), "stopped delayers are forgotten"
    assert statistics.median(rtts(client, primary)) < DELAY_MS


def test_replication_and_sentinel_through_the_delay(sentinels: SentinelLab):
    s, lab = sentinels, sentinels.lab
    nodes = s.data + s.clients
    lab.degrade(nodes, 0, DELAY_MS)
    old = s.primary()
    # a write through the delay reaches both replicas
    s.clients[0].run("redis-cli", "-h", old.ip, "-p", str(PORT), "SET", "k", "through the delay")
    for n in s.data[1:]:
        wait_until(lambda n=n: s.cli(n, "GET", "k").strip() == "through the delay", 30,
                   f"the write on {n}")
    # the primary and the Sentinels see the nodes' own addresses, not a proxy's
    info = s.info(old)
    assert sorted(v.split(",")[0] for k, v in info.items() if k.startswith("slave")) == [
        f"ip={n.ip}" for n in s.data[1:]]
    replicas = s.cli(s.data[1], "SENTINEL", "replicas", "rmq", port=SENTINEL_PORT).split()
    assert {n.ip for n in s.data[1:]} <= set(replicas)
    # a failover, coordinated by the Sentinels over delayed links, completes
    s.cli(s.data[1], "SENTINEL", "failover", "rmq", port=SENTINEL_PORT)

    def moved() -> Optional[str]:
        ip = s.converged()
        return ip if ip != old.ip else None
    new = wait_until(moved, 90, "a new primary")
    assert new in {n.ip for n in s.data[1:]}
    assert min(rtts(s.clients[0], next(n for n in s.data if n.ip == new))) >= 2 * DELAY_MS - 2

    lab.undegrade(nodes)
    assert leftovers(lab, nodes) == []


def test_one_delayer_per_namespace():
    """A second delayer cannot bind the node's queue: start() fails, saying why, and leaves
    neither its process nor a second rule."""
    with Lab() as lab:
        node = lab.add("n1")
        lab.degrade([node], 0, DELAY_MS)
        with pytest.raises(RuntimeError, match="did not start"):
            delay.start(node, DELAY_MS)
        assert list(lab.delayers) == ["n1"] and len(lab.procs) == 1
        rules = node.run("iptables", "-t", delay.TABLE, "-S", delay.CHAIN).stdout
        assert rules.count("NFQUEUE") == 1
        lab.undegrade([node])
        assert leftovers(lab, [node]) == [] and lab.procs == []
