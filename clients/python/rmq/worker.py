"""Worker: consume a Queue or a Topic with concurrent handlers, leases kept alive."""

from __future__ import annotations

import dataclasses
import queue
import signal
import threading
import time
from typing import Any, Callable, Iterator, Optional, Union, cast

import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException

from ._protocol import BOUNDS
from ._util import MAX_MS, TRANSIENT, check_int, is_cluster, log, retrying, run_all
from .message import Dead, Message
from .queues import Queue, Topic

Handler = Callable[[Message], Any]
Fetch = Callable[[int, Optional[int]], "list[Message]"]

BACKOFF_MIN, BACKOFF_MAX = 0.1, 5.0     # s, between failed fetches
TOPOLOGY_EVERY = 5.0                    # s, cluster node list re-read at least this often
TOPOLOGY_MIN_GAP = 0.5                  # s, and at most this often
ACK_BATCH = 1000                        # most messages acked in one round trip


@dataclasses.dataclass
class WorkerStats:
    """Counters since the worker started."""

    processed: int = 0   #: handlers that returned (message then acked)
    failed: int = 0      #: handlers that raised or ran out of time (message back to waiting)
    dead: int = 0        #: messages sent to dead (rmq.Dead raised, or retries used up)
    extended: int = 0    #: automatic lease extensions (RMQ.EXTEND)
    timed_out: int = 0   #: handlers given up on after max_runtime_ms (also counted failed/dead)
    released: int = 0    #: deliveries still running at the end of a stop's grace, nacked
    lost: int = 0        #: acks/nacks too late (lease had run out) or failing: redelivered


@dataclasses.dataclass(eq=False)
class _Delivery:
    msg: Message
    state: str = "queued"            # queued -> running -> done, or -> abandoned
    started: float = 0.0             # time.monotonic() when the handler started


class _Slots:
    """The count of free handler slots."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._cond = threading.Condition()

    def take_all(self, timeout: float) -> int:
        """Wait up to `timeout` s for a free slot; take every free slot, return how many."""
        with self._cond:
            if not self._free:
                self._cond.wait(timeout)
            n, self._free = self._free, 0
            return n

    def give(self, n: int = 1) -> None:
        if n:
            with self._cond:
                self._free += n
                self._cond.notify_all()


class Worker:
    """Consumes `source` (an rmq.Queue or rmq.Topic), calling `handler(msg)` for each
    message on up to `concurrency` threads at once.

    The handler returning acks the message; raising nacks it (back to waiting after the
    queue's retry backoff, or dead once its retries are used up); raising rmq.Dead sends it
    straight to dead. Each message is taken under a lease of `lease_ms`, extended
    (RMQ.EXTEND) every third of a lease while its handler runs. A handler still running
    after `max_runtime_ms` is nacked and its outcome ignored; its thread is replaced (a
    Python thread cannot be killed). `run()` blocks until `stop()` (or `close()`, which also
    waits for run() to return), SIGINT or SIGTERM; then
    the worker stops taking messages, gives running handlers `grace_ms`, and nacks those
    still running (nothing is left in flight). Messages are taken with BLOCK `block_ms` (so
    a stop is noticed within it) and only as many as there are free handlers; from a Topic,
    `quantum` messages per queue per turn (RMQ.TPOP QUANTUM, default 1). With
    `metrics_port`, the counters are served for Prometheus (needs prometheus_client).
    ACKs are sent by one thread, for all the handlers that finished meanwhile (one RMQ.ACK
    per queue, pipelined). Delivery is at least once: an ACK or NACK that cannot reach the
    server is retried a few times, after which the lease runs out and the message is
    delivered again.
    """

    def __init__(self, source: Union[Queue, Topic], handler: Handler, *, concurrency: int = 8,
                 lease_ms: int = 30_000, max_runtime_ms: Optional[int] = None,
                 grace_ms: int = 30_000, block_ms: int = 1000, quantum: Optional[int] = None,
                 metrics_port: Optional[int] = None, name: str = "rmq") -> None:
        if not isinstance(source, (Queue, Topic)):
            raise TypeError(f"source must be an rmq.Queue or rmq.Topic, got {source!r}")
        check_int("concurrency", concurrency, *BOUNDS["count"])
        check_int("lease_ms", lease_ms, *BOUNDS["lease_ms"])
        check_int("block_ms", block_ms, 1, MAX_MS)          # 0 would block forever: no stop
        check_int("grace_ms", grace_ms, 0, MAX_MS)
        if max_runtime_ms is not None:
            check_int("max_runtime_ms", max_runtime_ms, 1, MAX_MS)
        if quantum is not None:
            if not isinstance(source, Topic):
                raise TypeError("quantum is for a Topic (RMQ.TPOP)")
            check_int("quantum", quantum, *BOUNDS["quantum"])
        timeout = _socket_timeout(source.client)
        if timeout is not None and timeout <= block_ms / 1000:
            raise ValueError(f"the client's socket_timeout ({timeout}s) must be longer than "
                             f"block_ms ({block_ms} ms), or blocking pops time out")
        self.source, self.handler, self.name = source, handler, name
        self.concurrency, self.lease_ms, self.block_ms = concurrency, lease_ms, block_ms
        self.max_runtime_ms, self.grace_ms, self.quantum = max_runtime_ms, grace_ms, quantum
        self.metrics_port = metrics_port
        if metrics_port is not None:
            _prometheus()                            # fail now, not in run()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)   # a delivery left _inflight
        self._stats = WorkerStats()
        self._inflight: set[_Delivery] = set()   # taken and not yet finished by the worker
        self._slots = _Slots(concurrency)
        self._inbox: "queue.SimpleQueue[Optional[_Delivery]]" = queue.SimpleQueue()
        self._acks: "queue.SimpleQueue[Optional[_Delivery]]" = queue.SimpleQueue()
        self._stopping = threading.Event()
        # A stop asked on the main thread (where signal handlers run): a plain store, which
        # _supervise turns into _stopping within 0.1 s. A handler that interrupts the main
        # thread inside _stopping.wait() holds the event's lock, so Event.set() there would
        # deadlock (the process then never exits).
        self._stop_asked: Optional[str] = None
        self._keeper_done = threading.Event()
        self._topology = threading.Event()       # a fetch failed: re-read the cluster nodes
        self._handlers: list[threading.Thread] = []
        self._loops: dict[str, tuple[threading.Thread, threading.Event]] = {}   # by node
        self._loop_threads: list[threading.Thread] = []     # every fetch loop ever started
        self._keeper: Optional[threading.Thread] = None
        self._acker: Optional[threading.Thread] = None
        self._metrics_server: Any = None
        self._fatal: Optional[BaseException] = None
        self._ran = False
        self._run_thread: Optional[threading.Thread] = None
        self._finished = threading.Event()       # run() has returned (close() waits on it)

    # -- public --------------------------------------------------------------------
    @property
    def stats(self) -> WorkerStats:
        """A snapshot of the counters."""
        with self._lock:
            return dataclasses.replace(self._stats)

    @property
    def in_flight(self) -> int:
        """Messages taken and not yet acked or nacked by this worker."""
        with self._lock:
            return len(self._inflight)

    def stop(self) -> None:
        """Ask run() to stop gracefully (safe from any thread and from signal handlers);
        returns at once."""
        self._stop_asked = "stop()"
        if threading.current_thread() is not threading.main_thread():
            self._stopping.set()

    def close(self, timeout: Optional[float] = None) -> bool:
        """Stop gracefully, as stop(), and wait (up to `timeout` seconds, default no limit)
        until run() has returned: the Node worker's and BullMQ's close(). Called from
        run()'s own thread or from a handler it only asks (waiting there would wait on
        itself). Returns whether run() has finished (True too if it never ran)."""
        self.stop()
        me = threading.current_thread()
        with self._lock:
            waiting_on_itself = me is self._run_thread or me in self._handlers
        if not self._ran or waiting_on_itself:
            return not self._ran or self._finished.is_set()
        return self._finished.wait(timeout)

    def run(self) -> None:
        """Consume until stop() or close() (or SIGINT/SIGTERM when called on the main
        thread), then stop gracefully and return. Raises if the server cannot serve the
        worker at all (e.g. the module lacks RMQ.TPOP)."""
        if self._ran:
            raise RuntimeError("a Worker runs once; make a new one")
        self._run_thread = threading.current_thread()
        self._ran = True
        restore = self._install_signals()
        try:
            self._start()
            self._supervise()
        finally:
            try:
                self._shutdown()
            finally:
                restore()
                self._finished.set()
        if self._fatal is not None:
            raise self._fatal

    # -- start and stop ------------------------------------------------------------
    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return restore

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._stop_asked = f"signal {signum}"     # no lock, no logging: see _stop_asked

    def _start(self) -> None:
        log.info("%s: consuming %r with %d handlers, lease %d ms", self.name, self.source,
                 self.concurrency, self.lease_ms)
        if self.metrics_port is not None:
            self._metrics_server = _serve_metrics(self, self.metrics_port)
        for _ in range(self.concurrency):
            self._spawn_handler()
        self._keeper = _thread(self._keep, "rmq-keeper")
        self._acker = _thread(self._ack_loop, "rmq-acker")
        if isinstance(self.source, Topic) and is_cluster(self.source.client):
            self._sync_loops()
        else:
            self._start_loop("server", lambda n, block: self._pop(n, block))

    def _supervise(self) -> None:
        """Wait for stop; on a cluster, follow the topology (failovers, new primaries)."""
        cluster, last = is_cluster(self.source.client), time.monotonic()
        while not self._stopping.wait(0.1):
            if self._stop_asked is not None:
                log.info("%s: %s, stopping", self.name, self._stop_asked)
                break
            since = time.monotonic() - last
            if cluster and since >= TOPOLOGY_MIN_GAP and (self._topology.is_set()
                                                          or since >= TOPOLOGY_EVERY):
                self._topology.clear()
                last = time.monotonic()
                try:
                    cast(RedisCluster, self.source.client).nodes_manager.initialize()
                except (RedisClusterException, *TRANSIENT) as e:
                    log.warning("%s: cannot read the cluster's nodes: %s", self.name, e)
                    self._topology.set()
                if isinstance(self.source, Topic):
                    self._sync_loops()

    def _shutdown(self) -> None:
        self._stopping.set()
        for thread in self._loop_threads:
            thread.join(self.block_ms / 1000 + 10)
            if thread.is_alive():
                log.warning("%s: %s did not stop", self.name, thread.name)
        deadline = time.monotonic() + self.grace_ms / 1000
        with self._lock:
            while self._inflight and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            rest = list(self._inflight)
        for d in rest:
            self._abandon(d, stopping=True)
        with self._lock:
            handlers = list(self._handlers)
        for _ in handlers:
            self._inbox.put(None)
        end = time.monotonic() + 2.0         # threads stuck in abandoned handlers stay
        for t in handlers:
            t.join(max(0.0, end - time.monotonic()))
        self._acks.put(None)                 # after the handlers: their last acks go out
        self._keeper_done.set()
        for helper in (self._acker, self._keeper):
            if helper is not None:
                helper.join(15.0)
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        log.info("%s: stopped, %s", self.name, self.stats)

    # -- taking messages ------------------------------------------------------------
    def _sync_loops(self) -> None:
        """One fetch loop per primary of the cluster: start loops for new primaries, end
        those of nodes that are no longer primaries."""
        topic = self.source
        assert isinstance(topic, Topic)
        client = cast(RedisCluster, topic.client)
        primaries = {n.name for n in client.get_primaries()}
        for name, (thread, done) in list(self._loops.items()):
            if name not in primaries or not thread.is_alive():
                done.set()
                del self._loops[name]
        for name in primaries - set(self._loops):
            def fetch(n: int, block: Optional[int], name: str = name) -> list[Message]:
                node = client.get_node(node_name=name)
                if node is None:
                    raise redis.ConnectionError(f"node {name} left the cluster")
                return self._pop(n, block, node)
            self._start_loop(name, fetch)

    def _pop(self, n: int, block_ms: Optional[int], node: Any = None) -> list[Message]:
        if isinstance(self.source, Topic):
            return self.source.pop(n, self.lease_ms, block_ms, node=node, quantum=self.quantum)
        return self.source.pop(n, self.lease_ms, block_ms)

    def _start_loop(self, name: str, fetch: Fetch) -> None:
        done = threading.Event()
        thread = _thread(lambda: self._fetch_loop(name, fetch, done), f"rmq-fetch-{name}")
        self._loops[name] = (thread, done)
        self._loop_threads.append(thread)

    def _fetch_loop(self, where: str, fetch: Fetch, done: threading.Event) -> None:
        """Take as many messages as there are free handlers: first without blocking, and if
        there is nothing, block for one (holding a single slot while blocked, so the loops
        of other nodes keep the rest)."""
        backoff = BACKOFF_MIN
        while not (self._stopping.is_set() or done.is_set()):
            n = self._slots.take_all(timeout=0.2)
            if not n:
                continue
            msgs: list[Message] = []
            error: Optional[Exception] = None
            try:
                msgs = fetch(n, None)
                if not msgs and not self._stopping.is_set():
                    self._slots.give(n - 1)
                    n = 1
                    msgs = fetch(1, self.block_ms)
            except Exception as e:  # never let a fetch error end the loop
                error = e
            self._slots.give(n - len(msgs))
            deliveries = [_Delivery(m) for m in msgs]
            with self._lock:
                self._inflight.update(deliveries)
            for d in deliveries:
                self._inbox.put(d)
            if error is None:
                backoff = BACKOFF_MIN
            elif _fatal(error):
                log.error("%s: %s cannot serve this worker: %s", self.name, where, error)
                self._fatal = error
                self.stop()
            else:
                log.warning("%s: fetching from %s failed: %s; retrying in %.1fs",
                            self.name, where, error, backoff)
                self._topology.set()
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    # -- running handlers -----------------------------------------------------------
    def _spawn_handler(self) -> None:
        """Start a handler thread (none once stopping: a stop needs no replacements)."""
        with self._lock:
            if not self._stopping.is_set():
                self._handlers.append(_thread(self._serve, f"rmq-handler-{len(self._handlers)}"))

    def _serve(self) -> None:
        while True:
            d = self._inbox.get()
            if d is None:
                return
            with self._lock:
                if d.state != "queued":      # given up on at a stop before it started
                    continue
                d.state, d.started = "running", time.monotonic()
            try:
                self.handler(d.msg)
                error: Optional[BaseException] = None
            except Exception as e:
                error = e
            with self._lock:
                if d.state == "abandoned":   # ran out of time: a new thread took this slot
                    log.warning("%s: handler for %r returned after it was given up on; "
                                "outcome ignored", self.name, d.msg)
                    return
                d.state = "done"
            self._slots.give(1)              # free for the next message while this settles
            if error is None and d.msg._claim():
                self._acks.put(d)            # acked in a batch by the acker thread
                continue
            if error is None:                # the handler acked or nacked it itself
                self._count("processed")
            else:
                self._failed(d.msg, error)
            self._finish([d])

    def _failed(self, msg: Message, error: BaseException) -> None:
        """NACK after a handler raised (DEAD for rmq.Dead), unless it settled the message
        itself."""
        if isinstance(error, Dead):
            log.warning("%s: %r sent to dead by its handler: %s", self.name, msg, error)
        else:
            log.error("%s: handler failed on %r (delivery %d): %r", self.name, msg,
                      msg.deliveries, error, exc_info=error)
        if not msg._claim():
            self._count("dead" if isinstance(error, Dead) else "failed")
            return
        try:
            self._nacked(msg, msg._send_nack(None, isinstance(error, Dead)))
        except Exception as e:
            self._count("lost")
            log.error("%s: could not nack %r: %s; its lease will run out and it will be "
                      "delivered again", self.name, msg, e)

    def _ack_loop(self) -> None:
        """ACK what the handlers finished: everything waiting at once, one RMQ.ACK per queue
        in one pipeline. Ends at the None that _shutdown() sends after the handlers end."""
        while True:
            batch = [self._acks.get()]
            while len(batch) < ACK_BATCH and batch[-1] is not None:
                try:
                    batch.append(self._acks.get_nowait())
                except queue.Empty:
                    break
            done = [d for d in batch if d is not None]
            if done:
                self._ack(done)
                self._finish(done)
            if len(done) < len(batch):
                return

    def _ack(self, done: list[_Delivery]) -> None:
        self._count("processed", len(done))
        by_queue: dict[str, list[Message]] = {}
        for d in done:
            by_queue.setdefault(d.msg.queue, []).append(d.msg)
        commands = [("RMQ.ACK", q, *(m.body for m in msgs)) for q, msgs in by_queue.items()]
        try:
            replies = retrying(lambda: run_all(self.source.client, commands, self.source.durable),
                               "ACK")
        except Exception as e:
            self._count("lost", len(done))
            log.error("%s: could not ack %d messages: %s; their leases will run out and they "
                      "will be delivered again", self.name, len(done), e)
            return
        for (queue_name, msgs), acked in zip(by_queue.items(), replies):
            if acked < len(msgs):
                self._count("lost", len(msgs) - acked)
                log.warning("%s: %d acks on %s came too late (leases had run out): those "
                            "messages will be delivered again", self.name,
                            len(msgs) - acked, queue_name)

    def _nacked(self, msg: Message, reply: Optional[str]) -> None:
        if reply is None:
            self._count("lost")
            log.warning("%s: nack of %r came too late: its lease had run out", self.name, msg)
        else:
            self._count("dead" if reply == "dead" else "failed")

    def _finish(self, done: list[_Delivery]) -> None:
        """The worker is done with these deliveries (acked, nacked or given up on)."""
        with self._lock:
            self._inflight.difference_update(done)
            if self._stopping.is_set():      # only a stop waits for this
                self._changed.notify_all()

    def _abandon(self, d: _Delivery, stopping: bool) -> None:
        """Give up on a delivery: at a stop (nack it, due again now) or after max_runtime_ms
        (nack it as failed, start a thread in place of the one still stuck in it)."""
        with self._lock:
            if d.state not in ("queued", "running"):
                return
            was_running, d.state = d.state == "running", "abandoned"
        msg = d.msg
        self._count("released" if stopping else "timed_out")
        if stopping:
            log.warning("%s: %r still running at the end of the grace period; nacked",
                        self.name, msg)
        else:
            log.error("%s: handler for %r ran longer than max_runtime_ms (%d ms); nacked",
                      self.name, msg, self.max_runtime_ms)
        if msg._claim():
            try:
                if stopping:                 # not the message's fault: due again at once
                    msg._send_nack(0, False)
                else:
                    self._nacked(msg, msg._send_nack(None, False))
            except Exception as e:
                self._count("lost")
                log.error("%s: could not nack %r: %s; its lease will run out", self.name, msg, e)
        self._finish([d])
        self._slots.give(1)
        if was_running:
            self._spawn_handler()

    # -- leases ---------------------------------------------------------------------
    def _keep(self) -> None:
        """Extend the lease of every delivery a third of a lease after its last extension;
        give up on handlers past max_runtime_ms."""
        lease_s = self.lease_ms / 1000
        max_runtime = None if self.max_runtime_ms is None else self.max_runtime_ms / 1000
        while not self._keeper_done.wait(min(0.25, lease_s / 6)):
            now = time.monotonic()
            with self._lock:
                pending = [d for d in self._inflight if d.state in ("queued", "running")]
            for d in pending:
                if (max_runtime is not None and d.state == "running"
                        and now - d.started > max_runtime):
                    self._abandon(d, stopping=False)
                elif (d.msg._lease_end is not None and not d.msg.settled
                      and now >= d.msg._lease_end - lease_s * 2 / 3):
                    self._extend(d.msg)

    def _extend(self, msg: Message) -> None:
        try:
            if msg.extend(self.lease_ms) is None:
                msg._lease_end = None        # no longer in flight: nothing to extend
                if not msg.settled:
                    log.warning("%s: lease of %r ran out before it was extended; it will be "
                                "delivered again", self.name, msg)
            else:
                self._count("extended")
        except Exception as e:
            log.warning("%s: extending the lease of %r failed: %s", self.name, msg, e)

    def _count(self, field: str, n: int = 1) -> None:
        with self._lock:
            setattr(self._stats, field, getattr(self._stats, field) + n)


def _fatal(e: Exception) -> bool:
    """Errors that retrying cannot fix (the module lacks the command)."""
    return isinstance(e, redis.ResponseError) and "unknown command" in str(e).lower()


def _thread(target: Callable[[], None], name: str) -> threading.Thread:
    t = threading.Thread(target=target, name=name, daemon=True)
    t.start()
    return t


def _socket_timeout(client: Any) -> Optional[float]:
    kwargs = (client.nodes_manager.connection_kwargs if is_cluster(client)
              else client.connection_pool.connection_kwargs)
    return kwargs.get("socket_timeout")


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError as e:
        raise RuntimeError("metrics_port needs the prometheus_client package "
                           "(pip install prometheus_client)") from e
    return prometheus_client


def _serve_metrics(worker: Worker, port: int) -> Any:
    """Serve the worker's counters on http://0.0.0.0:<port>/metrics; returns the server."""
    prom = _prometheus()
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class Collector:
        def collect(self) -> Iterator[Any]:
            stats = worker.stats
            for f in dataclasses.fields(stats):
                c = CounterMetricFamily(f"rmq_worker_{f.name}", f"RMQ worker: {f.name}",
                                        labels=["worker"])
                c.add_metric([worker.name], getattr(stats, f.name))
                yield c
            g = GaugeMetricFamily("rmq_worker_in_flight", "RMQ worker: messages in flight",
                                  labels=["worker"])
            g.add_metric([worker.name], worker.in_flight)
            yield g

    registry = prom.CollectorRegistry()
    registry.register(Collector())
    # prometheus_client >= 0.20 returns (server, thread); older ones, None (their daemon
    # thread then serves until the process exits)
    started = prom.start_http_server(port, registry=registry)
    return started[0] if isinstance(started, tuple) else None
