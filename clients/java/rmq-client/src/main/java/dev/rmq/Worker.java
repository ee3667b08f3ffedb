package dev.rmq;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Consumes a Queue or a Topic with up to `concurrency` handlers at once.
 *
 * <p>Messages are taken (RMQ.POP, or RMQ.TPOP per primary of a cluster, following its
 * topology) only as many as there are free handlers, under a lease that is extended every
 * third of a lease while the handler runs. The handler returning acks the message (ACKs
 * batched, one RMQ.ACK per queue); throwing nacks it; throwing {@link DeadLetter} sends it
 * to dead; running past maxRuntime nacks it and interrupts the handler. close() stops
 * taking messages, gives running handlers the grace period, and nacks the rest (due again
 * at once): nothing is left in flight. Connection errors are retried with backoff (100 ms
 * doubling to 5 s). Delivery is at least once.
 */
public final class Worker implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger("dev.rmq");
    private static final long BACKOFF_MIN_MS = 100;
    private static final long BACKOFF_MAX_MS = 5000;
    private static final long TOPOLOGY_EVERY_MS = 5000;
    private static final int ACK_BATCH = 1000;
    /** How long a fetch loop waits for more free handlers before a pop (see fetchLoop). */
    private static final long POP_LINGER_NS = TimeUnit.MILLISECONDS.toNanos(1);
    /**
     * How long the acker waits for the handlers still running before it sends what it has:
     * handlers finish one thread at a time, so without it a batch of 100 popped together
     * went out as dozens of ACKs of one message (half the hand-written loop's rate).
     */
    private static final long ACK_LINGER_NS = TimeUnit.MILLISECONDS.toNanos(2);

    private enum State { QUEUED, RUNNING, DONE, ABANDONED }

    private static final class Running {
        final Delivery msg;
        State state = State.QUEUED;
        long started;
        Thread thread;

        Running(Delivery msg) {
            this.msg = msg;
        }
    }

    private static final class Loop {
        final RedisClusterNode node;
        volatile boolean done;
        Thread thread;

        Loop(RedisClusterNode node) {
            this.node = node;
        }
    }

    private final Redis redis;
    private final Target source;
    private final MessageListener handler;
    private final WorkerOptions options;
    private final Object lock = new Object();
    private final Set<Running> inflight = ConcurrentHashMap.newKeySet();
    private final HandlerSlots<Running> slots;
    private final Map<String, Loop> loops = new LinkedHashMap<>();
    private final List<Thread> loopThreads = new ArrayList<>();
    private final HandlerPool handlers;
    private final AtomicLong processed = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong dead = new AtomicLong();
    private final AtomicLong extended = new AtomicLong();
    private final AtomicLong timedOut = new AtomicLong();
    private final AtomicLong released = new AtomicLong();
    private final AtomicLong lost = new AtomicLong();
    private volatile boolean stopping;
    private volatile boolean topologyStale;
    private volatile Throwable fatal;
    private boolean started;
    private boolean closed;
    private Thread acker;
    private Thread keeper;
    private Thread supervisor;

    Worker(Redis redis, Target source, MessageListener handler, WorkerOptions options) {
        if (source == null || handler == null || options == null) {
            throw new IllegalArgumentException("a worker needs a source, a listener and options");
        }
        if (options.quantum != null && !(source instanceof Topic)) {
            throw new IllegalArgumentException("quantum is for a Topic (RMQ.TPOP)");
        }
        this.redis = redis;
        this.source = source;
        this.handler = handler;
        this.options = options;
        this.slots = new HandlerSlots<>(options.concurrency);
        this.handlers = new HandlerPool(options.concurrency, options.name);
    }

    /** Starts consuming on threads of its own; returns at once. */
    public synchronized Worker start() {
        if (started) {
            throw new IllegalStateException("a Worker starts once; make a new one");
        }
        started = true;
        acker = daemon(this::ackLoop, options.name + "-acker");
        keeper = daemon(this::keep, options.name + "-keeper");
        acker.start();
        keeper.start();
        if (redis.isCluster() && source instanceof Topic) {
            syncLoops();
            supervisor = daemon(this::supervise, options.name + "-topology");
            supervisor.start();
        } else {
            startLoop("server", null);
        }
        return this;
    }

    public WorkerStats stats() {
        return new WorkerStats(processed.get(), failed.get(), dead.get(), extended.get(), timedOut.get(),
                released.get(), lost.get());
    }

    /** Deliveries taken and not yet acked or nacked by this worker. */
    public int inFlight() {
        return inflight.size();
    }

    /** Whether the worker is taking messages (started, not closed, no fatal error). */
    public boolean running() {
        return started && !stopping;
    }

    /** The error that stopped the worker by itself (e.g. the module lacks RMQ.TPOP), or null. */
    public Throwable fatalError() {
        return fatal;
    }

    /**
     * Graceful stop: no more messages are taken, running handlers get the grace period, the
     * rest are nacked (due again at once), pending acks are sent. Nothing is left in flight.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        stopping = true;
        long joinMs = options.block.toMillis() + 10_000;
        for (Thread t : snapshotLoopThreads()) {
            join(t, joinMs);
        }
        if (supervisor != null) {
            join(supervisor, 5000);
        }
        long deadline = System.nanoTime() + options.grace.toNanos();
        synchronized (lock) {
            while (!inflight.isEmpty() && System.nanoTime() < deadline) {
                try {
                    lock.wait(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        }
        for (Running r : List.copyOf(inflight)) {
            abandon(r, true);
        }
        slots.end();
        if (acker != null) {
            join(acker, 15_000);
        }
        if (keeper != null) {
            keeper.interrupt();
            join(keeper, 5000);
        }
        handlers.shutdown();
        try {
            if (!handlers.awaitTermination(2000)) {
                handlers.shutdownNow();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        LOG.info(options.name + ": stopped, " + stats());
    }

    // -- taking messages -----------------------------------------------------------

    private List<Thread> snapshotLoopThreads() {
        synchronized (loops) {
            return new ArrayList<>(loopThreads);
        }
    }

    private void startLoop(String id, RedisClusterNode node) {
        Loop loop = new Loop(node);
        loop.thread = daemon(() -> fetchLoop(id, loop), options.name + "-fetch-" + id);
        synchronized (loops) {
            loops.put(id, loop);
            loopThreads.add(loop.thread);
        }
        loop.thread.start();
    }

    /** One fetch loop per primary: new primaries get one, nodes no longer primaries lose theirs. */
    private void syncLoops() {
        Map<String, RedisClusterNode> primaries = new LinkedHashMap<>();
        for (RedisClusterNode n : redis.primaries()) {
            primaries.put(n.getNodeId(), n);
        }
        synchronized (loops) {
            loops.entrySet().removeIf(e -> {
                boolean gone = !primaries.containsKey(e.getKey()) || !e.getValue().thread.isAlive();
                if (gone) {
                    e.getValue().done = true;
                }
                return gone;
            });
        }
        for (Map.Entry<String, RedisClusterNode> e : primaries.entrySet()) {
            boolean have;
            synchronized (loops) {
                have = loops.containsKey(e.getKey());
            }
            if (!have && !stopping) {
                startLoop(e.getKey(), e.getValue());
            }
        }
    }

    private void supervise() {
        long last = System.nanoTime();
        while (!stopping) {
            sleep(200);
            long since = (System.nanoTime() - last) / 1_000_000;
            if (stopping || !(topologyStale && since >= 500 || since >= TOPOLOGY_EVERY_MS)) {
                continue;
            }
            last = System.nanoTime();
            try {
                if (topologyStale) {
                    topologyStale = false;
                    redis.refreshTopology();
                }
                syncLoops();
            } catch (RuntimeException e) {
                topologyStale = true;
                LOG.warning(options.name + ": cannot read the cluster's nodes: " + e);
            }
        }
    }

    /**
     * Takes as many messages as there are free handlers: first without blocking, and if
     * none, blocks for one (holding a single handler while blocked, so other nodes' loops
     * keep the rest).
     */
    private void fetchLoop(String where, Loop loop) {
        long backoff = BACKOFF_MIN_MS;
        Redis.Link link = null;
        try {
            while (!stopping && !loop.done) {
                int n;
                try {
                    n = slots.take(1, TimeUnit.MILLISECONDS.toNanos(200));
                } catch (InterruptedException e) {
                    return;
                }
                if (n == 0) {
                    continue;
                }
                // handlers finish one at a time: wait a moment for the others before popping (at
                // half of them the pop went when the first 50 of 100 quick ones were done, so
                // it took half a batch, twice the TPOPs of the hand-written loop)
                if (n < options.concurrency && !stopping) {
                    try {
                        n += slots.take(options.concurrency - n, POP_LINGER_NS);
                    } catch (InterruptedException e) {
                        slots.give(n);
                        return;
                    }
                }
                List<Delivery> msgs = List.of();
                RuntimeException error = null;
                try {
                    if (link == null) {
                        link = openLink(loop);
                    }
                    Target.Sender via = source.sender(source.durable, link);
                    msgs = source.pop(n, options.lease, null, options.quantum, via);
                    if (msgs.isEmpty() && !stopping) {
                        slots.give(n - 1);
                        n = 1;
                        msgs = source.pop(1, options.lease, options.block, options.quantum, via);
                    }
                } catch (RuntimeException e) {
                    error = e;
                    if (link != null) {
                        link.close();
                        link = null;
                    }
                }
                slots.give(n - msgs.size());
                List<Runnable> tasks = new ArrayList<>(msgs.size());
                for (Delivery d : msgs) {
                    Running r = new Running(d);
                    inflight.add(r);
                    tasks.add(() -> serve(r));
                }
                handlers.executeAll(tasks);
                if (error == null) {
                    backoff = BACKOFF_MIN_MS;
                } else if (error instanceof RedisCommandExecutionException
                        && String.valueOf(error.getMessage()).toLowerCase().contains("unknown command")) {
                    LOG.severe(options.name + ": " + where + " cannot serve this worker: " + error);
                    fatal = error;
                    stopping = true;
                    tellError(error);
                } else {
                    LOG.warning(options.name + ": fetching from " + where + " failed: " + error
                            + "; retrying in " + backoff + " ms");
                    tellError(error);
                    topologyStale = true;
                    sleep(backoff);
                    backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
                }
            }
        } finally {
            if (link != null) {
                link.close();
            }
        }
    }

    /**
     * The loop's own connection: to its primary (a topic on a cluster), to the node that owns
     * the queue's slot (a queue on a cluster: its blocking pops must not hold the shared
     * connection), or to the server.
     */
    private Redis.Link openLink(Loop loop) {
        if (loop.node != null || !redis.isCluster()) {
            return redis.open(loop.node);
        }
        redis.refreshTopology();             // after an error this may be another node now
        return redis.open(redis.ownerOf(Checks.utf8("queue", source.queues().get(0))));
    }

    // -- running handlers -------------------------------------------------------------

    private void serve(Running r) {
        synchronized (lock) {
            if (r.state != State.QUEUED) {
                return;
            }
            r.state = State.RUNNING;
            r.started = System.nanoTime();
            r.thread = Thread.currentThread();
        }
        Throwable error = null;
        try {
            handler.onMessage(r.msg);
        } catch (Throwable e) {
            error = e;
        }
        synchronized (lock) {
            r.thread = null;
            Thread.interrupted();            // an interrupt meant for this delivery ends with it
            if (r.state == State.ABANDONED) {
                LOG.warning(options.name + ": handler for " + r.msg + " returned after it was given up on");
                return;
            }
            r.state = State.DONE;
        }
        long took = System.nanoTime() - r.started;
        if (error == null && r.msg.claim()) {
            slots.done(r);                   // acked in a batch by the acker thread
            return;
        }
        slots.give(1);
        if (error == null) {                 // the handler settled it itself
            processed.incrementAndGet();
            tellCompleted(r.msg, took);
        } else {
            failedWith(r.msg, error);
        }
        finish(r);
    }

    private void failedWith(Delivery msg, Throwable error) {
        boolean toDead = error instanceof DeadLetter;
        if (toDead) {
            LOG.warning(options.name + ": " + msg + " sent to dead by its handler: " + error.getMessage());
        } else {
            LOG.log(Level.WARNING, options.name + ": handler failed on " + msg, error);
        }
        tellFailed(msg, error);
        if (!msg.claim()) {
            (toDead ? dead : failed).incrementAndGet();
            return;
        }
        try {
            nacked(msg, msg.sendNack(null, toDead));
        } catch (RuntimeException e) {
            lost.incrementAndGet();
            tellError(e);
        }
    }

    private void nacked(Delivery msg, String reply) {
        if (reply == null) {
            lost.incrementAndGet();
            LOG.warning(options.name + ": nack of " + msg + " came too late: its lease had run out");
        } else {
            ("dead".equals(reply) ? dead : failed).incrementAndGet();
        }
    }

    private void ackLoop() {
        while (true) {
            List<Running> batch;
            try {
                batch = slots.takeDone(ACK_BATCH, ACK_LINGER_NS);
            } catch (InterruptedException e) {
                return;
            }
            if (batch.isEmpty()) {
                return;                      // closed, and every ack sent
            }
            ack(batch);
            batch.forEach(this::finish);
        }
    }

    private void ack(List<Running> done) {
        Map<String, List<Running>> byQueue = new LinkedHashMap<>();
        for (Running r : done) {
            byQueue.computeIfAbsent(r.msg.queue(), q -> new ArrayList<>()).add(r);
        }
        List<Object[]> commands = new ArrayList<>();
        byQueue.forEach((q, rs) -> {
            Object[] c = new Object[rs.size() + 2];
            c[0] = "RMQ.ACK";
            c[1] = q;
            for (int i = 0; i < rs.size(); i++) {
                c[i + 2] = rs.get(i).msg.rawBody();
            }
            commands.add(c);
        });
        List<Object> replies;
        try {
            replies = Retry.run(() -> redis.callAll(commands, source.durable), "ACK");
        } catch (RuntimeException e) {
            lost.addAndGet(done.size());
            LOG.severe(options.name + ": could not ack " + done.size() + " messages: " + e
                    + "; their leases will run out and they will be delivered again");
            tellError(e);
            return;
        }
        processed.addAndGet(done.size());
        int i = 0;
        for (Map.Entry<String, List<Running>> e : byQueue.entrySet()) {
            long acked = (Long) replies.get(i++);
            if (acked < e.getValue().size()) {
                lost.addAndGet(e.getValue().size() - acked);
                LOG.warning(options.name + ": " + (e.getValue().size() - acked) + " acks on " + e.getKey()
                        + " came too late (leases had run out): delivered again");
            }
        }
        long now = System.nanoTime();
        for (Running r : done) {
            tellCompleted(r.msg, now - r.started);
        }
    }

    private void finish(Running r) {
        inflight.remove(r);
        if (stopping) {
            synchronized (lock) {
                lock.notifyAll();
            }
        }
    }

    /** Gives up on a delivery: at a close (nacked, due again now) or past maxRuntime (nacked as failed). */
    private void abandon(Running r, boolean closing) {
        Thread stuck;
        synchronized (lock) {
            if (r.state != State.QUEUED && r.state != State.RUNNING) {
                return;
            }
            stuck = r.thread;
            r.state = State.ABANDONED;
        }
        Delivery msg = r.msg;
        (closing ? released : timedOut).incrementAndGet();
        if (closing) {
            LOG.warning(options.name + ": " + msg + " still running at the end of the grace period; nacked");
        } else {
            LOG.severe(options.name + ": handler for " + msg + " ran longer than maxRuntime " + options.maxRuntime);
            tellFailed(msg, new java.util.concurrent.TimeoutException("ran longer than " + options.maxRuntime));
        }
        if (msg.claim()) {
            try {
                if (closing) {
                    msg.sendNack(0L, false);     // not the message's fault: due again at once
                } else {
                    nacked(msg, msg.sendNack(null, false));
                }
            } catch (RuntimeException e) {
                lost.incrementAndGet();
                tellError(e);
            }
        }
        if (stuck != null) {
            handlers.grow();
        }
        finish(r);
        slots.give(1);
        if (stuck != null) {
            stuck.interrupt();
        }
    }

    // -- leases --------------------------------------------------------------------

    /** Extends each lease a third of a lease after its last extension; gives up on handlers past maxRuntime. */
    private void keep() {
        long leaseNs = options.lease.toNanos();
        long tick = Math.max(1, Math.min(250, options.lease.toMillis() / 6));
        Long maxNs = options.maxRuntime == null ? null : options.maxRuntime.toNanos();
        while (!Thread.currentThread().isInterrupted()) {
            try {
                Thread.sleep(tick);
            } catch (InterruptedException e) {
                return;
            }
            long now = System.nanoTime();
            for (Running r : List.copyOf(inflight)) {
                State s;
                long started;
                synchronized (lock) {
                    s = r.state;
                    started = r.started;
                }
                if (s != State.QUEUED && s != State.RUNNING) {
                    continue;
                }
                if (maxNs != null && s == State.RUNNING && now - started > maxNs) {
                    abandon(r, false);
                } else if (r.msg.leaseEnd != 0 && !r.msg.settled() && now >= r.msg.leaseEnd - leaseNs * 2 / 3) {
                    extend(r.msg);
                }
            }
        }
    }

    private void extend(Delivery msg) {
        try {
            if (msg.extend(options.lease) == null) {
                msg.leaseEnd = 0;            // no longer in flight: nothing to extend
                if (!msg.settled()) {
                    LOG.warning(options.name + ": lease of " + msg + " ran out before it was extended");
                }
            } else {
                extended.incrementAndGet();
            }
        } catch (RuntimeException e) {
            LOG.warning(options.name + ": extending the lease of " + msg + " failed: " + e);
        }
    }

    // -- listeners and threads -----------------------------------------------------

    private void tellCompleted(Delivery msg, long tookNs) {
        for (WorkerListener l : options.listeners) {
            try {
                l.completed(msg, Duration.ofNanos(tookNs));
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "a worker listener failed", e);
            }
        }
    }

    private void tellFailed(Delivery msg, Throwable error) {
        for (WorkerListener l : options.listeners) {
            try {
                l.failed(msg, error);
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "a worker listener failed", e);
            }
        }
    }

    private void tellError(Throwable error) {
        for (WorkerListener l : options.listeners) {
            try {
                l.error(error);
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "a worker listener failed", e);
            }
        }
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        return t;
    }

    private static void join(Thread t, long ms) {
        try {
            t.join(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (t.isAlive()) {
            LOG.warning(t.getName() + " did not stop");
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
