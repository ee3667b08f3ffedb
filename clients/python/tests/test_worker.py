"""rmq.Worker in this process: exactly once, lease extension, max_runtime_ms, graceful stop,
handler errors, connection loss, counters and metrics.

Each test runs against a Queue (RMQ.POP) and, once the module has RMQ.TPOP, a Topic. Every
wait is bounded; time windows leave room for a stalled 2-core machine."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
import urllib.request
from collections import Counter
from typing import Any, Callable, Iterator, Optional, Union

import pytest
import redis

import rmq
from conftest import require
from server_support import free_port, info_section, wait_for

Source = Union[rmq.Queue, rmq.Topic]


@pytest.fixture(params=["queue", "topic"])
def make_source(request: Any, r: redis.Redis) -> Callable[..., Source]:
    """make_source(name, client=r): an rmq.Queue, or an rmq.Topic of 8 slots (needs TPOP)."""
    if request.param == "topic":
        require(r, "tpop")

    def make(name: str, client: Any = r) -> Source:
        return rmq.Queue(client, name) if request.param == "queue" else rmq.Topic(client, name, 8)
    return make


class Running:
    """A worker running on a thread; stop() stops it and waits for run() to return."""

    def __init__(self, worker: rmq.Worker) -> None:
        self.worker = worker
        self.error: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as e:  # surfaced by stop()
            self.error.append(e)

    def stop(self, timeout: float = 60) -> float:
        """Stop and wait; returns how long run() took to return."""
        t0 = time.monotonic()
        self.worker.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "run() did not return after stop()"
        assert not self.error, self.error
        return time.monotonic() - t0


@pytest.fixture
def start_worker() -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def start(*args: Any, **kwargs: Any) -> Running:
        kwargs.setdefault("block_ms", 500)
        w = Running(rmq.Worker(*args, **kwargs))
        running.append(w)
        return w
    yield start
    for w in running:
        w.worker.stop()
        w.thread.join(30)


def counts(source: Source) -> dict[str, int]:
    info = source.info()
    return {k: info[k] for k in ("waiting", "inflight", "dead")}


def test_exactly_once_10000_messages_8_handlers(r: redis.Redis, make_source: Callable,
                                                start_worker: Callable) -> None:
    source = make_source("once")
    msgs = [b"msg-%05d" % i for i in range(10_000)]
    for i in range(0, len(msgs), 1000):
        assert source.push(*msgs[i:i + 1000], priority=1) == 1000
    seen: Counter = Counter()
    deliveries: Counter = Counter()
    lock = threading.Lock()
    running = [0, 0]                                   # now, peak

    def handle(m: rmq.Message) -> None:
        with lock:
            running[0] += 1
            running[1] = max(running)
        time.sleep(0.0005)
        with lock:
            seen[m.body] += 1
            deliveries[m.deliveries] += 1
            running[0] -= 1

    w = start_worker(source, handle, concurrency=8, lease_ms=60_000)
    wait_for(lambda: sum(seen.values()) >= len(msgs), timeout=120, interval=0.1,
             what="10,000 messages handled")
    w.stop()
    assert set(seen) == set(msgs) and set(seen.values()) == {1}
    assert deliveries == {1: len(msgs)}
    assert 2 <= running[1] <= 8
    assert w.worker.stats.processed == len(msgs) and w.worker.stats.failed == 0
    assert counts(source) == {"waiting": 0, "inflight": 0, "dead": 0}


def test_leases_are_extended_while_a_handler_runs_3x_the_lease(
        r: redis.Redis, make_source: Callable, start_worker: Callable) -> None:
    source = make_source("slow")
    source.push("slow", priority=1)
    calls: list[int] = []
    expired_before = info_section(r, "rmq")["rmq_expired"]

    def handle(m: rmq.Message) -> None:
        calls.append(m.deliveries)
        time.sleep(9.0)                                 # 3 leases of 3 s

    # extended every ~1 s to 3 s ahead: a stall of up to ~2 s is tolerated
    w = start_worker(source, handle, concurrency=2, lease_ms=3000)
    wait_for(lambda: w.worker.stats.processed == 1, timeout=30, what="the slow handler to end")
    w.stop()
    assert calls == [1], "delivered again while its handler was running"
    assert w.worker.stats.extended >= 4
    assert info_section(r, "rmq")["rmq_expired"] == expired_before
    assert counts(source) == {"waiting": 0, "inflight": 0, "dead": 0}


def test_a_handler_past_max_runtime_is_nacked_and_its_late_return_ignored(
        r: redis.Redis, make_source: Callable, start_worker: Callable) -> None:
    source = make_source("hang")
    source.push("stuck", priority=1)
    release_first, second_started, release_second = (threading.Event() for _ in range(3))
    seen: list[int] = []

    def handle(m: rmq.Message) -> None:
        seen.append(m.deliveries)
        if m.deliveries == 1:
            release_first.wait(30)                      # hangs past max_runtime_ms
        else:
            second_started.set()
            release_second.wait(30)

    w = start_worker(source, handle, concurrency=1, lease_ms=5000, max_runtime_ms=1000)
    assert second_started.wait(30), "the hung delivery was not given up on and redelivered"
    release_first.set()                                 # the first handler returns late...
    time.sleep(0.5)
    assert source.info()["inflight"] == 1, "...and its return must not ack the redelivery"
    release_second.set()
    wait_for(lambda: w.worker.stats.processed == 1, timeout=30, what="the redelivery to be acked")
    w.stop()
    stats = w.worker.stats
    assert seen == [1, 2]
    assert (stats.timed_out, stats.failed, stats.processed) == (1, 1, 1)
    assert counts(source) == {"waiting": 0, "inflight": 0, "dead": 0}


def test_graceful_stop_lets_handlers_finish_and_leaves_nothing_in_flight(
        r: redis.Redis, make_source: Callable, start_worker: Callable) -> None:
    source = make_source("grace")
    source.push(*[f"g{i}" for i in range(40)], priority=1)
    started = threading.Semaphore(0)
    done: list[bytes] = []

    def handle(m: rmq.Message) -> None:
        started.release()
        time.sleep(0.4)
        done.append(m.body)

    w = start_worker(source, handle, concurrency=4, lease_ms=30_000, grace_ms=20_000)
    for _ in range(4):
        assert started.acquire(timeout=30)
    took = w.stop()
    stats = w.worker.stats
    assert stats.processed == len(done) >= 4 and stats.released == 0
    left = counts(source)
    assert left["inflight"] == 0 and left["waiting"] == 40 - len(done)
    assert took < 20


def test_a_signal_takes_no_lock(r: redis.Redis) -> None:
    """SIGTERM's handler runs on the main thread between two bytecodes, possibly inside
    run()'s wait on the stop event, holding that event's lock: a handler that sets the
    event (or takes any lock the main thread may hold) never returns, and the worker process
    never exits. Here the lock is held while the handler runs on another thread."""
    worker = rmq.Worker(rmq.Queue(r, "sig"), lambda m: None)
    lock = worker._stopping._cond  # type: ignore[attr-defined]
    with lock:
        t = threading.Thread(target=worker._on_signal, args=(signal.SIGTERM, None),
                             daemon=True)
        t.start()
        t.join(30)
        assert not t.is_alive(), "the signal handler waited for the stop event's lock"
    assert worker._stop_asked == f"signal {int(signal.SIGTERM)}"


def test_stop_from_the_main_thread_and_signals_stop_run(
        r: redis.Redis, start_worker: Callable) -> None:
    """stop() on the main thread and a signal both only ask; run() stops within its 0.1 s
    poll of the request (a generous bound here for a stalled machine)."""
    for ask in ("stop", "signal"):
        w = start_worker(rmq.Queue(r, f"ask-{ask}"), lambda m: None)
        wait_for(lambda: w.worker._loop_threads, timeout=30, what="the worker to start")
        t0 = time.monotonic()
        if ask == "stop":
            w.worker.stop()
        else:
            w.worker._on_signal(signal.SIGTERM, None)
        w.thread.join(60)
        assert not w.thread.is_alive() and not w.error
        assert time.monotonic() - t0 < 30


def test_close_stops_and_waits_for_run_and_stop_stays(r: redis.Redis) -> None:
    """close() (the Node worker's and BullMQ's verb) returns once run() has: the handler it
    waited for has finished and been acked. stop() is kept; a worker that never ran closes
    at once."""
    q = rmq.Queue(r, "close")
    q.push("slow", priority=1)
    entered = threading.Event()

    def handle(m: rmq.Message) -> None:
        entered.set()
        time.sleep(0.5)

    worker = rmq.Worker(q, handle, concurrency=1, block_ms=200, grace_ms=20_000)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    assert entered.wait(30)
    assert worker.close(timeout=60) is True
    assert not thread.is_alive(), "close() returned before run() had"
    assert worker.in_flight == 0 and worker.stats.processed == 1
    assert counts(q) == {"waiting": 0, "inflight": 0, "dead": 0}
    assert worker.close() is True               # again: at once
    assert rmq.Worker(q, handle).close(timeout=0) is True
    assert callable(rmq.Worker.stop)


def test_close_from_a_handler_only_asks(r: redis.Redis) -> None:
    """Waiting in a handler for run() to return would wait on itself (run() waits for the
    handler): close() there asks, returns False at once, and run() then ends."""
    q = rmq.Queue(r, "close-inner")
    q.push("x", priority=1)
    answers: list[tuple[bool, float]] = []
    worker: rmq.Worker

    def handle(m: rmq.Message) -> None:
        t0 = time.monotonic()
        answers.append((worker.close(timeout=60), time.monotonic() - t0))

    worker = rmq.Worker(q, handle, concurrency=1, block_ms=200)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "close() from a handler did not stop run()"
    assert len(answers) == 1 and answers[0][0] is False
    assert answers[0][1] < 30, "it waited for run() from inside a handler"
    assert worker.stats.processed == 1


def test_stop_nacks_handlers_still_running_after_grace(
        r: redis.Redis, make_source: Callable, start_worker: Callable) -> None:
    source = make_source("grace2")
    source.push("long", priority=1)
    started, release = threading.Event(), threading.Event()

    def handle(m: rmq.Message) -> None:
        started.set()
        release.wait(30)

    w = start_worker(source, handle, concurrency=2, lease_ms=30_000, grace_ms=500)
    assert started.wait(30)
    w.stop()
    release.set()
    assert w.worker.stats.released == 1 and w.worker.stats.processed == 0
    assert counts(source) == {"waiting": 1, "inflight": 0, "dead": 0}
    (m,) = source.pop(lease_ms=5000)
    assert (m.body, m.deliveries) == (b"long", 2)      # due again at once
    m.ack()


def test_messages_released_at_a_stop_skip_the_retry_backoff(
        r: redis.Redis, make_source: Callable, start_worker: Callable) -> None:
    require(r, "policy")
    source = make_source("grace3")
    source.set_policy(backoff_ms=3_600_000)
    source.push("long", priority=1)
    started, release = threading.Event(), threading.Event()

    def handle(m: rmq.Message) -> None:
        started.set()
        release.wait(30)

    w = start_worker(source, handle, concurrency=1, grace_ms=200)
    assert started.wait(30)
    w.stop()
    release.set()
    info = source.info()
    assert (info["waiting"], info["ready"], info["inflight"]) == (1, 1, 0)


def test_handler_errors_nack_log_and_dead(r: redis.Redis, make_source: Callable,
                                          start_worker: Callable, caplog: Any) -> None:
    r.config_set("rmq.retries", 1)
    source = make_source("errors")
    source.push("ok", "flaky", "poison", "bad", priority=1)

    def handle(m: rmq.Message) -> None:
        if m.body == b"flaky" and m.deliveries == 1:
            raise ValueError("first try fails")
        if m.body == b"poison":
            raise rmq.Dead("cannot be parsed")
        if m.body == b"bad":
            raise RuntimeError("always fails")

    with caplog.at_level(logging.WARNING, logger="rmq"):
        w = start_worker(source, handle, concurrency=2, lease_ms=10_000)
        wait_for(lambda: counts(source) == {"waiting": 0, "inflight": 0, "dead": 2},
                 timeout=30, what="ok and flaky acked, poison and bad dead")
        w.stop()
    stats = w.worker.stats
    assert (stats.processed, stats.failed, stats.dead) == (2, 2, 2)
    failures = [rec for rec in caplog.records if rec.name == "rmq" and rec.levelno == logging.ERROR
                and "handler failed" in rec.getMessage()]
    assert any(b"flaky" in rec.getMessage().encode() and "delivery 1" in rec.getMessage()
               for rec in failures)
    assert any("always fails" in rec.getMessage() and "delivery 2" in rec.getMessage()
               for rec in failures)
    assert all(rec.exc_info for rec in failures)


def test_handlers_may_settle_early_once(r: redis.Redis, make_source: Callable,
                                        start_worker: Callable) -> None:
    source = make_source("early")
    source.push("a", priority=1)
    errors: list[BaseException] = []

    def handle(m: rmq.Message) -> None:
        assert m.ack() is True
        try:
            m.nack()
        except rmq.AlreadySettled as e:
            errors.append(e)

    w = start_worker(source, handle, concurrency=1, lease_ms=10_000)
    wait_for(lambda: w.worker.stats.processed == 1, timeout=30, what="the handler")
    w.stop()
    assert len(errors) == 1 and w.worker.stats.lost == 0
    assert counts(source) == {"waiting": 0, "inflight": 0, "dead": 0}


def test_connection_loss_is_survived(start_server: Callable, make_source: Callable,
                                     start_worker: Callable) -> None:
    srv = start_server()
    c = srv.client(socket_timeout=5)
    source = make_source("survive", client=c)
    if isinstance(source, rmq.Topic):
        require(c, "tpop")
    seen: set[bytes] = set()
    source.push("before", priority=1)
    w = start_worker(source, lambda m: seen.add(m.body), concurrency=2, lease_ms=10_000)
    wait_for(lambda: b"before" in seen, timeout=30, what="the first message")
    srv.restart(graceful=False, downtime=1.5)           # the worker's connections break
    c2 = srv.client(socket_timeout=5)
    make_source("survive", client=c2).push("after", priority=1)
    wait_for(lambda: b"after" in seen, timeout=60, what="a message pushed after the restart")
    assert w.thread.is_alive()
    w.stop()


def test_worker_arguments_are_checked(r: redis.Redis, server: Any) -> None:
    q = rmq.Queue(r, "args")
    for kwargs in [{"concurrency": 0}, {"concurrency": 10_001}, {"lease_ms": 0},
                   {"lease_ms": 2 ** 52 + 1}, {"block_ms": 0}, {"max_runtime_ms": 0},
                   {"grace_ms": -1}]:
        with pytest.raises(ValueError):
            rmq.Worker(q, print, **kwargs)
    for kwargs in [{"max_runtime_ms": 1.5}, {"grace_ms": 0.5}, {"concurrency": True}]:
        with pytest.raises(TypeError):      # ms are integers, as everywhere in the client
            rmq.Worker(q, print, **kwargs)
    with pytest.raises(ValueError):
        rmq.Worker(rmq.Topic(r, "args", 2), print, quantum=0)
    with pytest.raises(TypeError):
        rmq.Worker(q, print, quantum=2)                 # TPOP only
    with pytest.raises(TypeError):
        rmq.Worker("args", print)
    short = rmq.Queue(server.client(socket_timeout=0.5), "args")
    with pytest.raises(ValueError, match="socket_timeout"):
        rmq.Worker(short, print, block_ms=1000)


def test_metrics_port_without_prometheus_client_is_a_clear_error(
        r: redis.Redis, monkeypatch: Any) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)   # import fails
    with pytest.raises(RuntimeError, match="prometheus_client"):
        rmq.Worker(rmq.Queue(r, "m"), print, metrics_port=9100)


def test_metrics_endpoint(r: redis.Redis, start_worker: Callable) -> None:
    pytest.importorskip("prometheus_client")
    q = rmq.Queue(r, "metered")
    q.push("a", "b", "c", priority=1)
    port = free_port()
    w = start_worker(q, lambda m: None, concurrency=2, metrics_port=port, name="metered")
    wait_for(lambda: w.worker.stats.processed == 3, timeout=30, what="3 messages")
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'rmq_worker_processed_total{worker="metered"} 3.0' in text
    assert 'rmq_worker_in_flight{worker="metered"} 0.0' in text
    w.stop()


def test_quantum_goes_to_every_tpop(r: redis.Redis, start_worker: Callable) -> None:
    require(r, "tpop")
    topic = rmq.Topic(r, "quant", 4)
    topic.push(*[f"q{i}" for i in range(40)], delay=0)
    quanta: list[Optional[int]] = []
    pop = topic.pop

    def spy(*args: Any, **kwargs: Any) -> list[rmq.Message]:
        quanta.append(kwargs.get("quantum"))
        return pop(*args, **kwargs)
    topic.pop = spy  # type: ignore[method-assign]
    seen: set[bytes] = set()
    w = start_worker(topic, lambda m: seen.add(m.body), concurrency=8, quantum=4)
    wait_for(lambda: len(seen) == 40, timeout=30, what="40 messages")
    w.stop()
    assert quanta and set(quanta) == {4}
    assert counts(topic) == {"waiting": 0, "inflight": 0, "dead": 0}
