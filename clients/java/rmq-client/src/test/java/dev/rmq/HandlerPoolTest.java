package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The worker's handler threads, without a server. */
class HandlerPoolTest {
    private static List<Runnable> times(int n, Runnable task) {
        List<Runnable> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(task);
        }
        return out;
    }

    @Test
    void handlersThatBlockEachGetAThreadUpToTheSize() throws Exception {
        HandlerPool pool = new HandlerPool(50, "t");
        CountDownLatch all = new CountDownLatch(50);
        AtomicInteger ran = new AtomicInteger();
        // each waits for all 50 to be running at once: fewer threads would never end
        pool.executeAll(times(50, () -> {
            all.countDown();
            try {
                if (all.await(30, TimeUnit.SECONDS)) {
                    ran.incrementAndGet();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        pool.shutdown();
        assertTrue(pool.awaitTermination(60_000));
        assertEquals(50, ran.get());
    }

    @Test
    void neverMoreHandlersAtOnceThanItsSize() throws Exception {
        HandlerPool pool = new HandlerPool(4, "t");
        AtomicInteger running = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        AtomicInteger ran = new AtomicInteger();
        pool.executeAll(times(40, () -> {
            most.accumulateAndGet(running.incrementAndGet(), Math::max);
            sleep(5);
            running.decrementAndGet();
            ran.incrementAndGet();
        }));
        pool.shutdown();
        assertTrue(pool.awaitTermination(60_000));
        assertEquals(40, ran.get());
        assertTrue(most.get() <= 4, "more than 4 at once: " + most.get());
    }

    @Test
    void growGivesTheNextTaskAThreadWhileAStuckOneKeepsItsOwn() throws Exception {
        HandlerPool pool = new HandlerPool(1, "t");
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch second = new CountDownLatch(1);
        pool.executeAll(List.of(() -> {
            try {
                release.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        pool.grow();
        pool.executeAll(List.of(second::countDown));
        assertTrue(second.await(30, TimeUnit.SECONDS), "the second task waited for the stuck one");
        release.countDown();
        pool.shutdown();
        assertTrue(pool.awaitTermination(60_000));
    }

    @Test
    void shutdownNowInterruptsWhatStillRunsAndDropsTheQueue() throws Exception {
        HandlerPool pool = new HandlerPool(1, "t");
        CountDownLatch started = new CountDownLatch(1);
        AtomicInteger interrupted = new AtomicInteger();
        AtomicInteger queuedRan = new AtomicInteger();
        pool.executeAll(List.of(() -> {
            started.countDown();
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                interrupted.incrementAndGet();
            }
        }, queuedRan::incrementAndGet));
        assertTrue(started.await(30, TimeUnit.SECONDS));
        pool.shutdown();
        assertFalse(pool.awaitTermination(200), "ended while a task still ran");
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(30_000));
        assertEquals(1, interrupted.get());
        assertEquals(0, queuedRan.get(), "the queued task ran after shutdownNow");
    }

    @Test
    void aTaskThatThrowsEndsItsThreadAndTheQueueGoesOnOnAnother() throws Exception {
        HandlerPool pool = new HandlerPool(1, "t");
        CountDownLatch after = new CountDownLatch(1);
        pool.executeAll(List.of(() -> {
            throw new IllegalStateException("a listener's error (expected in this test)");
        }, after::countDown));
        assertTrue(after.await(30, TimeUnit.SECONDS), "the task queued behind the failed one never ran");
        pool.shutdown();
        assertTrue(pool.awaitTermination(30_000));
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
