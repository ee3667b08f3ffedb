package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The worker against one server: each test flushes it first. */
class WorkerTest extends OneServerTest {
    @BeforeEach
    void flush() {
        rmq.redis().call("FLUSHALL");
    }

    @Test
    void tenThousandMessagesEachProcessedExactlyOnceAtConcurrency8() throws Exception {
        Topic topic = rmq.topic("bulk", 16);
        List<Message> msgs = new ArrayList<>();
        for (int i = 0; i < 10_000; i++) {
            msgs.add(PriorityMessage.of("m" + i, i % 10));
        }
        for (int i = 0; i < msgs.size(); i += 1000) {
            assertEquals(1000, topic.push(msgs.subList(i, i + 1000)));
        }
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        AtomicInteger running = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        Worker w = rmq.worker(topic, m -> {
            most.accumulateAndGet(running.incrementAndGet(), Math::max);
            seen.computeIfAbsent(m.body(), k -> new AtomicInteger()).incrementAndGet();
            running.decrementAndGet();
        }, WorkerOptions.builder().concurrency(8).build());
        w.start();
        try {
            Wait.until("10,000 processed", Duration.ofMinutes(3), () -> w.stats().processed() == 10_000);
        } finally {
            w.close();
        }
        assertEquals(10_000, seen.size());
        assertTrue(seen.values().stream().allMatch(n -> n.get() == 1), "a message was handled twice");
        assertTrue(most.get() <= 8, "more than 8 handlers at once: " + most.get());
        Info info = topic.info();
        assertEquals(0, info.waiting());
        assertEquals(0, info.inflight());
        assertEquals(10_000L, info.get("acked"));
        assertEquals(new WorkerStats(10_000, 0, 0, 0, 0, 0, 0), w.stats());
    }

    @Test
    void neverTwoHandlersOnOneGroupAtOnceAcrossFourWorkerJvms() throws Exception {
        Topic topic = rmq.topic("jvms", 4);
        List<Message> msgs = new ArrayList<>();
        for (int g = 0; g < 8; g++) {
            for (int i = 0; i < 25; i++) {
                msgs.add(PriorityMessage.of("g" + g + ":" + i, 1).group("g" + g));
            }
        }
        List<Process> children = new ArrayList<>();
        try {
            for (int k = 0; k < 4; k++) {
                children.add(ChildWorker.spawn("groups", server.uri(), "jvms", "4"));
            }
            for (Process c : children) {
                assertEquals("ready", ChildWorker.readLine(c, Duration.ofSeconds(90)));
            }
            topic.push(msgs);
            Wait.until("200 acked", Duration.ofMinutes(2), () -> Long.valueOf(200).equals(topic.info().get("acked")));
        } finally {
            for (Process c : children) {
                c.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
            }
        }
        assertEquals(null, rmq.redis().call("GET", "overlaps"), "two handlers ran on one group at once");
        assertEquals(0, topic.info().inflight());
    }

    @Test
    void leaseIsExtendedWhileTheHandlerRuns() throws Exception {
        Queue q = rmq.queue("slow");
        q.push(PriorityMessage.of("long-job", 1));
        AtomicInteger calls = new AtomicInteger();
        AtomicLong deliveries = new AtomicLong();
        Worker w = rmq.worker(q, m -> {
            calls.incrementAndGet();
            deliveries.set(m.deliveries());
            Thread.sleep(3500);                 // 3.5 leases of 1 s
        }, WorkerOptions.builder().concurrency(2).lease(Duration.ofSeconds(1)).build()).start();
        try {
            Wait.until("the job done", Duration.ofSeconds(60), () -> w.stats().processed() == 1);
        } finally {
            w.close();
        }
        assertEquals(1, calls.get(), "the message was delivered again while its handler ran");
        assertEquals(1, deliveries.get());
        assertTrue(w.stats().extended() >= 2, "extended " + w.stats().extended());
        assertEquals(1L, q.info().get("acked"));
    }

    @Test
    void exceptionNacksAndDeadLetterSendsToDead() throws Exception {
        Queue q = rmq.queue("failing");
        // Retries enough that "boom", failing at once on every delivery, cannot also die
        // before the worker stops (with 5 it sometimes did: dead 2).
        q.policy().retries(1000).apply();
        q.push(PriorityMessage.of("boom", 1), PriorityMessage.of("poison", 1));
        List<Throwable> failures = new ArrayList<>();
        Worker w = rmq.worker(q, m -> {
            if (m.body().equals("poison")) {
                throw new DeadLetter("cannot be parsed");
            }
            throw new IllegalStateException("boom");
        }, WorkerOptions.builder().concurrency(2).listener(new WorkerListener() {
            @Override
            public void failed(Delivery message, Throwable error) {
                synchronized (failures) {
                    failures.add(error);
                }
            }
        }).build()).start();
        try {
            Wait.until("both failed", Duration.ofSeconds(30), () -> w.stats().failed() >= 1 && w.stats().dead() == 1);
        } finally {
            w.close();
        }
        Info info = q.info();
        assertEquals(1, info.dead());
        assertTrue((Long) info.get("nacked") >= 2);
        assertEquals(1L, info.get("died"));
        synchronized (failures) {
            assertTrue(failures.stream().anyMatch(e -> e instanceof DeadLetter));
            assertTrue(failures.stream().anyMatch(e -> e instanceof IllegalStateException));
        }
    }

    @Test
    void gracefulCloseLetsRunningHandlersFinishAndLeavesNothingInFlight() throws Exception {
        Queue q = rmq.queue("graceful");
        for (int i = 0; i < 20; i++) {
            q.push(PriorityMessage.of("job" + i, 1));
        }
        AtomicInteger started = new AtomicInteger();
        AtomicInteger finished = new AtomicInteger();
        Worker w = rmq.worker(q, m -> {
            started.incrementAndGet();
            Thread.sleep(500);
            finished.incrementAndGet();
        }, WorkerOptions.builder().concurrency(4).build()).start();
        Wait.until("handlers running", Duration.ofSeconds(30), () -> started.get() >= 4);
        w.close();
        assertEquals(started.get(), finished.get(), "a handler was cut off");
        assertEquals(0, w.inFlight());
        Info info = q.info();
        assertEquals(0, info.inflight());
        assertEquals((long) finished.get(), info.get("acked"));
        assertEquals(20 - finished.get(), info.waiting());
        int before = started.get();
        Thread.sleep(300);
        assertEquals(before, started.get(), "a handler started after close");
    }

    @Test
    void closeAfterTheGraceNacksWhatStillRunsDueAgainAtOnce() throws Exception {
        Queue q = rmq.queue("stuck");
        q.push(PriorityMessage.of("forever", 1));
        CountDownLatch running = new CountDownLatch(1);
        Worker w = rmq.worker(q, m -> {
            running.countDown();
            Thread.sleep(60_000);
        }, WorkerOptions.builder().concurrency(1).grace(Duration.ofMillis(200)).build()).start();
        assertTrue(running.await(30, TimeUnit.SECONDS));
        w.close();
        assertEquals(1, w.stats().released());
        Info info = q.info();
        assertEquals(0, info.inflight());
        assertEquals(1, info.ready(), "the released message is due again at once");
        List<Delivery> again = q.pop(1);
        assertEquals(2, again.get(0).deliveries());
    }

    @Test
    void aHandlerPastMaxRuntimeIsInterruptedAndNacked() throws Exception {
        Queue q = rmq.queue("runaway");
        q.policy().backoff(Duration.ofMinutes(10)).apply();
        q.push(PriorityMessage.of("spin", 1));
        AtomicInteger interrupted = new AtomicInteger();
        Worker w = rmq.worker(q, m -> {
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                interrupted.incrementAndGet();
            }
        }, WorkerOptions.builder().concurrency(1).maxRuntime(Duration.ofMillis(300)).build()).start();
        try {
            Wait.until("timed out", Duration.ofSeconds(30), () -> w.stats().timedOut() == 1 && interrupted.get() == 1);
        } finally {
            w.close();
        }
        Info info = q.info();
        assertEquals(0, info.inflight());
        assertEquals(1L, info.get("nacked"));
        assertEquals(1, w.stats().failed());
    }

    @Test
    void aWorkerKilledMidMessageIsRedeliveredAfterItsLease() throws Exception {
        Queue q = rmq.queue("crash");
        q.push(PriorityMessage.of("survivor", 1));
        Process child = ChildWorker.spawn("hang", server.uri(), "crash", "2000");
        try {
            assertEquals("started survivor 1", ChildWorker.readLine(child, Duration.ofSeconds(60)));
            child.destroyForcibly();            // SIGKILL, by the child's own pid
            assertTrue(child.waitFor(30, TimeUnit.SECONDS));
        } finally {
            child.destroyForcibly();
        }
        assertEquals(1, q.info().inflight(), "the killed worker's delivery is still leased");
        List<Delivery> got = new ArrayList<>();
        Worker w = rmq.worker(q, m -> {
            synchronized (got) {
                got.add(m);
            }
        }, WorkerOptions.builder().concurrency(1).build()).start();
        try {
            Wait.until("redelivery after the lease", Duration.ofSeconds(60), () -> w.stats().processed() == 1);
        } finally {
            w.close();
        }
        assertEquals("survivor", got.get(0).body());
        assertEquals(2, got.get(0).deliveries());
        assertEquals(0, q.info().inflight());
    }
}
