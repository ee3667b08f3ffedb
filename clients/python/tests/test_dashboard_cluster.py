"""The dashboard on a 3-primary Redis Cluster (1 replica each): every queue listed exactly
once, with the primary that holds it, /metrics labelled by node, a queue's page and an
action routed to its primary; after a failover the list follows the new primary."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

import rmq
from cluster_support import Cluster
from dashboard_support import Dashboard, csrf_token, http
from server_support import wait_for
from test_dashboard import get_json, scrape
from test_worker_cluster import fail_over


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    cl = Cluster(masters=3, replicas=1).start()
    yield cl
    cl.stop()


def test_every_queue_once_with_its_node(cluster: Cluster) -> None:
    cluster.wait_ok(timeout=30)
    rc = cluster.client()
    topic = rmq.Topic(rc, "spread", 32)
    for i in range(32):
        rmq.Queue(rc, f"spread_{i}").push(*[f"m{j}" for j in range(i + 1)], priority=1)
    owners = {f"spread_{i}": cluster.owner(f"spread_{i}") for i in range(32)}
    assert len({o.port for o in owners.values()}) == 3, "the topic spans the three primaries"
    d = Dashboard(cluster.alive()[0].port, "--cluster", "--writable").wait_ready()
    try:
        def listed() -> Any:
            rows = get_json(f"{d.url}/api/queues?match=spread_*&per_page=500")["queues"]
            return rows if len(rows) >= 32 else None
        rows = wait_for(listed, timeout=30, interval=0.3, what="the 32 queues listed")
        names = [r["name"] for r in rows]
        assert sorted(names) == sorted(owners) and len(names) == len(set(names))
        for r in rows:
            assert r["node"] == f"127.0.0.1:{owners[r['name']].port}"
            assert r["waiting"] == int(r["name"].split("_")[1]) + 1
        m = scrape(d.url + "/metrics")
        for name, owner in owners.items():
            key = ("rmq_queue_waiting", (("node", f"127.0.0.1:{owner.port}"), ("queue", name)))
            assert m[key] == int(name.split("_")[1]) + 1
        nodes = {dict(k[1])["node"] for k in m if k[0] == "rmq_pushed_total"}
        assert nodes == {f"127.0.0.1:{p.port}" for p, _id, _slots in cluster.primaries()}
        assert sum(v for k, v in m.items() if k[0] == "rmq_pushed_total") == \
            sum(range(1, 33))
        assert topic.info()["waiting"] == sum(range(1, 33))
        # a queue's page and an action reach the primary that holds the queue
        one = get_json(d.url + "/api/queues/spread_9")
        assert one["info"]["waiting"] == 10 and len(one["waiting"]) == 10
        _, page, _ = http("GET", d.url + "/queues/spread_9")
        status, _, _ = http("POST", d.url + "/queues/spread_9/pause",
                            {"csrf_token": csrf_token(page)}, {"Origin": d.url})
        assert status == 303 and rmq.Queue(rc, "spread_9").info()["paused"] == 1
    finally:
        d.stop()
        rc.close()


def test_the_list_follows_a_failover(cluster: Cluster) -> None:
    cluster.wait_ok(timeout=30)
    rc = cluster.client()
    names = [f"fo_{i}" for i in range(12)]
    for n in names:
        rmq.Queue(rc, n).push("a", "b", priority=1)
    d = Dashboard(cluster.alive()[0].port, "--cluster").wait_ready()
    try:
        def rows() -> dict[str, Any]:
            got = get_json(f"{d.url}/api/queues?match=fo_*&per_page=500")["queues"]
            return {r["name"]: r for r in got}
        wait_for(lambda: len(rows()) == 12, timeout=30, interval=0.3, what="the 12 queues")
        victim = cluster.owner(names[0])
        moved = [n for n in names if cluster.owner(n) is victim]
        new_primary = fail_over(cluster, victim)
        rmq.Queue(rc, moved[0]).push("c", priority=1)
        label = f"127.0.0.1:{new_primary.port}"

        def followed() -> Any:
            now = rows()
            ok = (sorted(now) == sorted(names)
                  and all(now[n]["node"] == label for n in moved)
                  and now[moved[0]]["waiting"] == 3)
            return now if ok else None
        wait_for(followed, timeout=60, interval=0.5,
                 what=f"{moved} on {label} in the list after the failover")
    finally:
        d.stop()
        rc.close()
