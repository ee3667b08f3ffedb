"""The short slice of `make partitions` (issue #35) that runs in `make test`: a primary cut
off from its replicas and the Sentinels' majority while clients keep writing to it, twice,
with durable pushes and ACKs and without; and once on a 3-primary cluster, durable.

Durable: no acknowledged push lost and no delivery after a confirmed ACK. Async: the losses
are counted (reported, and expected: the old primary's writes vanish when it rejoins) but
not asserted, since a short run may happen to lose nothing. Needs root and network
namespaces; skips with the reason otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_lab import ClusterLab
from netlab import Lab, available
from sentinel_lab import SentinelLab, run_scenario
from server_bin import server_binary
from server_support import module_path

REASON = available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.mark.parametrize("topology, mode, cycles", [
    (SentinelLab, "durable 1", 2), (SentinelLab, "async", 2), (ClusterLab, "durable 1", 1)])
def test_isolated_primary(topology, mode, cycles, tmp_path: Path):
    with Lab() as lab:
        s = topology(lab, server_binary(), module_path(), mode)
        s.start()
        r = run_scenario(s, "isolated primary", cycles=cycles, run_dir=tmp_path)
    print(f"{mode}: acknowledged {r['acknowledged']}, lost {r['lost']}, after ack "
          f"{r['after_ack']}, duplicates {r['duplicates']}, recovery {r['recovery_s']}")
    assert r["finals"] == 2, "both consumers drained the queue and read its keys"
    assert r["acknowledged"] > 100, "the producers made progress"
    assert all(t is not None for t in r["recovery_s"]), "pushes acknowledged after each heal"
    if mode.startswith("durable"):
        assert r["lost"] == 0, f"acknowledged durable pushes lost: {r['lost_sample']}"
        assert r["after_ack"] == 0
