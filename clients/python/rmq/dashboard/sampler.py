"""A background thread that reads a Snapshot every `interval` seconds and keeps what the
pages show: each queue's row with its rates (averaged over the last minute), the totals of
the last minutes for the charts, the /metrics text, and since when the servers have been
unreachable."""

from __future__ import annotations

import fnmatch
import gzip
import logging
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from .metrics import exposition
from .source import Snapshot, Source, error_text
from .text import show

log = logging.getLogger("rmq.dashboard")

#: Per-second rates shown per queue: (column, RMQ.INFO counter).
RATES = (("pushed_rate", "pushed"), ("acked_rate", "acked"), ("died_rate", "died"))
#: The charts' throughput series, from INFO rmq's server-wide counters (every queue counted,
#: also those past `stats-queues`).
THROUGHPUT = (("pushed", "rmq_pushed"), ("acked", "rmq_acked"), ("died", "rmq_dead"))
BACKLOG = ("waiting", "inflight", "dead")
#: The pause between two samples is at least this many times the last one's duration.
BUSY_FACTOR = 4
#: Columns the queue list sorts by.
SORT_KEYS = ("name", "node", "kind", "waiting", "ready", "inflight", "dead", "lag_ms", "paused",
             "pushed_rate", "acked_rate", "died_rate")
#: Rates are averaged over this many seconds (one sample's delta jumps with every burst);
#: the counters are kept every RATE_WINDOW / ANCHORS seconds, so the average spans between
#: RATE_WINDOW and RATE_WINDOW * (1 + 1 / ANCHORS) seconds once the dashboard has run
#: that long, and the time it has run before.
RATE_WINDOW = 60.0
ANCHORS = 6

Counters = tuple[Optional[int], ...]


def counters(info: dict[str, Any]) -> Counters:
    return tuple(info.get(c) for _, c in RATES)


@dataclass(frozen=True)
class Anchor:
    """The counters of one past sample that rates are measured from."""
    taken: float
    queues: dict[str, Counters]
    servers: Counters


def _rate(now: Optional[int], before: Optional[int], seconds: float) -> Optional[float]:
    """A counter's rate; None when unknown or when it went back (a restart, a failover)."""
    if now is None or before is None or now < before or seconds <= 0:
        return None
    return (now - before) / seconds


def _first_rate(now: Optional[int], before: Sequence[tuple[Optional[int], float]]
                ) -> Optional[float]:
    """The rate against the first base that gives one: the minute's anchor, else (the
    counter went back meanwhile) the previous sample."""
    for value, seconds in before:
        rate = _rate(now, value, seconds)
        if rate is not None:
            return rate
    return None


def row(name: str, node: Optional[str], info: dict[str, Any],
        before: Sequence[tuple[Optional[Counters], float]] = (),
        error: Optional[str] = None) -> dict[str, Any]:
    """A queue's line in the list: its INFO fields, its rates against the `before`
    counters (each with the seconds since), its name as shown (what the filter matches)
    and the error its server gave instead of its INFO, if any."""
    out = {"name": name, "label": show(name), "node": node, **info, "error": error}
    now = counters(info)
    for i, (column, _) in enumerate(RATES):
        out[column] = _first_rate(now[i], [(b[i], s) for b, s in before if b is not None])
    return out


def matches(name: str, pattern: str) -> bool:
    """A glob when the filter has one of * ? [, else a substring (both case-insensitive)."""
    pattern = pattern.lower()
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name.lower(), pattern)
    return pattern in name.lower()


_DIGITS = re.compile(r"([0-9]+)")


def natural_key(name: str) -> tuple:
    """Names in natural order: runs of digits compare as numbers (orders_2 before
    orders_10), letters without case; the name itself breaks ties."""
    parts = _DIGITS.split(name)
    return (tuple(int(p) if i % 2 else p.lower() for i, p in enumerate(parts)), name)


def _sort_key(column: str):
    def key(r: dict[str, Any]) -> tuple:
        v = r.get(column)
        return (v is None, v if v is not None else 0)
    return key


class Sampler:
    def __init__(self, source: Source, interval: float = 2.0, keep_seconds: float = 900) -> None:
        self.source = source
        self.interval = interval
        self.pause = interval
        self.history: deque[dict[str, Any]] = deque(maxlen=max(2, int(keep_seconds / interval)))
        self.rows: list[dict[str, Any]] = []
        self.taken: Optional[float] = None
        self.error: Optional[str] = None
        self.metrics: Optional[bytes] = None
        self.metrics_gzip: Optional[bytes] = None
        #: When reading the servers started failing (None while they answer).
        self.failing_since: Optional[float] = None
        self._last: Optional[Snapshot] = None
        self._anchors: deque[Anchor] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def sample(self) -> None:
        """Read one snapshot and fold it in; an error is kept for the page to show."""
        start, began = time.monotonic(), time.time()
        try:
            self._fold(self.source.snapshot())
        except Exception as e:  # shown on the page; the next sample tries again
            log.warning("reading the queues failed: %s", e)
            self.mark_failing(error_text(e), began)
        finally:
            # reading and rendering stay a bounded share of this process's and the servers'
            # time, however many queues there are
            self.pause = max(self.interval, BUSY_FACTOR * (time.monotonic() - start))

    def mark_failing(self, error: str, began: float) -> None:
        """The servers did not answer a read that began at `began` (a sample, or a page's
        own read; the client retries for seconds before it gives up): the pages say since
        when their figures are old."""
        with self._lock:
            self.error = error
            if self.failing_since is None:
                self.failing_since = began

    def outage(self) -> tuple[Optional[float], Optional[str]]:
        """Since when the servers have not answered, and their last error (None, None while
        they answer)."""
        with self._lock:
            return self.failing_since, self.error if self.failing_since else None

    def _base(self, taken: float) -> Optional[Anchor]:
        """The anchor rates are measured from: the newest at least RATE_WINDOW old, else
        the oldest (older ones are dropped)."""
        while len(self._anchors) > 1 and self._anchors[1].taken <= taken - RATE_WINDOW:
            self._anchors.popleft()
        return self._anchors[0] if self._anchors else None

    def _fold(self, snap: Snapshot) -> None:
        prev = self._last
        base = self._base(snap.taken)
        seconds = snap.taken - prev.taken if prev else 0.0
        since = snap.taken - base.taken if base else 0.0
        rows = [row(q.name, q.node, q.info,
                    [(base.queues.get(q.name) if base else None, since),
                     (counters(prev.queues[q.name].info)
                      if prev and q.name in prev.queues else None, seconds)],
                    q.error)
                for q in snap.queues.values()]
        # the natural order by name, once per sample: every other sort is stable on it
        rows.sort(key=lambda r: natural_key(r["label"]))
        sums = tuple(_sum(snap.servers, field) for _, field in THROUGHPUT)
        prev_sums = tuple(_sum(prev.servers, field) for _, field in THROUGHPUT) if prev \
            else (None,) * len(THROUGHPUT)
        point: dict[str, Any] = {"t": snap.taken}
        for i, (series, _) in enumerate(THROUGHPUT):
            point[series] = _first_rate(sums[i], [(base.servers[i] if base else None, since),
                                                  (prev_sums[i], seconds)])
        for series in BACKLOG:
            point[series] = sum(q.info.get(series) or 0 for q in snap.queues.values())
        if not self._anchors or snap.taken - self._anchors[-1].taken >= RATE_WINDOW / ANCHORS:
            self._anchors.append(Anchor(snap.taken, {q.name: counters(q.info)
                                                     for q in snap.queues.values()}, sums))
        text = exposition(snap)
        # compressed once here, not per scrape: Prometheus asks for gzip, and a text a tenth
        # the size is sent in a tenth of the writes, each of which may wait for this thread
        packed = gzip.compress(text, compresslevel=1, mtime=0)
        with self._lock:
            self._last = snap
            self.rows = rows
            self.taken = snap.taken
            self.error = None
            self.failing_since = None
            self.metrics = text
            self.metrics_gzip = packed
            self.history.append(point)

    def start(self) -> "Sampler":
        self.sample()
        self._thread = threading.Thread(target=self._run, name="rmq-dashboard-sampler",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.pause):
            self.sample()

    def page(self, match: str = "", sort: str = "name", desc: bool = False, page: int = 1,
             per_page: int = 50) -> dict[str, Any]:
        """One page of the queue list, filtered and sorted here on the server."""
        with self._lock:
            rows, taken, error, failing = self.rows, self.taken, self.error, self.failing_since
        if sort not in SORT_KEYS:
            sort = "name"
        chosen = [r for r in rows if matches(r["label"], match)] if match else list(rows)
        if sort == "name":  # the rows come in this order
            if desc:
                chosen.reverse()
        else:  # stable: equal values stay in the names' natural order
            chosen.sort(key=_sort_key(sort), reverse=desc)
            if desc:  # unknown values stay last
                chosen.sort(key=lambda r: r.get(sort) is None)
        pages = max(1, -(-len(chosen) // per_page))
        page = min(max(1, page), pages)
        start = (page - 1) * per_page
        totals = {c: sum(r.get(c) or 0 for r in chosen) for c in ("waiting", "ready", "inflight",
                                                                  "dead")}
        return {"queues": chosen[start:start + per_page], "total": len(chosen),
                "all": len(rows), "page": page, "pages": pages, "per_page": per_page,
                "sort": sort, "desc": desc, "match": match, "taken": taken, "error": error,
                "failing_since": failing, "totals": totals}

    def scrape(self, compressed: bool = False) -> tuple[Optional[bytes], Optional[str]]:
        """The last sample's /metrics text (gzip-compressed if asked), and the last sample's
        error (the text is then older than one interval)."""
        with self._lock:
            return (self.metrics_gzip if compressed else self.metrics), self.error

    def series(self) -> dict[str, list]:
        """The charts' data, one list per series, aligned on `t` (Unix s)."""
        with self._lock:
            points = list(self.history)
        keys = ("t", *(s for s, _ in THROUGHPUT), *BACKLOG)
        return {k: [p[k] for p in points] for k in keys}


def _sum(servers: dict[Optional[str], dict[str, Any]], field: str) -> Optional[int]:
    values = [s.get(field) for s in servers.values()]
    if not values or any(not isinstance(v, int) for v in values):
        return None
    return sum(values)
