"""Prometheus metrics of a Snapshot, rendered once per sample by the Sampler's thread: a
scrape serves the last sample's text and costs the Redis servers nothing."""

from __future__ import annotations

from typing import Any, Iterator, Optional

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from .source import Snapshot
from .text import label

#: Per-queue gauges: (metric, RMQ.INFO field, scale, help).
QUEUE_GAUGES = (
    ("rmq_queue_waiting", "waiting", 1, "Waiting messages (store and held back)"),
    ("rmq_queue_ready", "ready", 1, "Waiting messages that are due"),
    ("rmq_queue_inflight", "inflight", 1, "Deliveries in flight (under a lease)"),
    ("rmq_queue_dead", "dead", 1, "Dead letters"),
    ("rmq_queue_lag_seconds", "lag_ms", 0.001,
     "How late the earliest ready message is (range and fixed queues)"),
    ("rmq_queue_paused", "paused", 1, "1 while the queue is paused (RMQ.POLICY paused)"),
)
#: Per-queue counters: (metric without _total, RMQ.INFO field).
QUEUE_COUNTERS = (
    ("rmq_queue_pushed", "pushed"), ("rmq_queue_popped", "popped"),
    ("rmq_queue_acked", "acked"), ("rmq_queue_nacked", "nacked"),
    ("rmq_queue_expired", "expired"), ("rmq_queue_died", "died"),
)
#: INFO rmq fields that are counters since start (the contract, Observability); the others are gauges.
SERVER_COUNTERS = ("pushed", "merged", "popped", "acked", "nacked", "expired", "dead",
                   "replayed", "cancelled", "group_waits", "rate_limited", "schedule_fired",
                   "schedule_skipped")


class SnapshotCollector:
    """Collects one Snapshot's metrics: every queue's and each server's INFO rmq; labels
    `queue`, and `node` (host:port of the primary) under Cluster."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        return iter(metrics(self.snap))


def exposition(snap: Snapshot) -> bytes:
    """The snapshot in Prometheus's text format, as a scrape serves it."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(SnapshotCollector(snap))
    return generate_latest(reg)


def metrics(snap: Snapshot) -> list[Metric]:
    cluster = any(label is not None for label in snap.servers)
    qlabels = ["queue", "node"] if cluster else ["queue"]
    out: list[Metric] = []
    for name, field, scale, text in QUEUE_GAUGES:
        g = GaugeMetricFamily(name, text, labels=qlabels)
        for q in snap.queues.values():
            v = q.info.get(field)
            if isinstance(v, int):
                g.add_metric(_labels(q.name, q.node, cluster), v * scale)
        out.append(g)
    for name, field in QUEUE_COUNTERS:
        c = CounterMetricFamily(name, f"RMQ.INFO {field} of the queue since the module loaded",
                                labels=qlabels)
        for q in snap.queues.values():
            v = q.info.get(field)
            if isinstance(v, int):  # nil past `stats-queues`: no sample
                c.add_metric(_labels(q.name, q.node, cluster), v)
        out.append(c)
    failed = GaugeMetricFamily("rmq_queue_read_error",
                               "1 when the queue's server refused its RMQ.INFO (a key of the "
                               "wrong type); its other metrics are then missing",
                               labels=qlabels)
    for q in snap.queues.values():
        if q.error is not None:
            failed.add_metric(_labels(q.name, q.node, cluster), 1)
    out.append(failed)
    out.append(GaugeMetricFamily("rmq_dashboard_sample_time_seconds",
                                 "When the servers were read for these metrics (Unix time)",
                                 value=snap.taken))
    out += _server_metrics(snap.servers, cluster)
    return out


def _labels(queue: str, node: Optional[str], cluster: bool) -> list[str]:
    shown = label(queue)
    return [shown, node or ""] if cluster else [shown]


def _server_metrics(servers: dict[Optional[str], dict[str, Any]], cluster: bool) -> list[Metric]:
    labels = ["node"] if cluster else []
    families: dict[str, Metric] = {}
    for node, info in servers.items():
        for key, value in sorted(info.items()):
            if not key.startswith("rmq_") or not isinstance(value, (int, float)):
                continue
            name = key[len("rmq_"):]
            if name not in families:
                families[name] = (CounterMetricFamily if name in SERVER_COUNTERS
                                  else GaugeMetricFamily)(
                    f"rmq_{name}", f"INFO rmq {name}", labels=labels)
            families[name].add_metric([node or ""] if cluster else [], value)
    return list(families.values())

