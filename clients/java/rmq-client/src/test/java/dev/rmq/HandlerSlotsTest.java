package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The worker's slot accounting between its fetch loops, handlers and acker, without a server. */
class HandlerSlotsTest {
    private static final long LONG_NS = TimeUnit.SECONDS.toNanos(30);

    private static <T> CompletableFuture<T> async(Call<T> call) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return call.run();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
    }

    private interface Call<T> {
        T run() throws InterruptedException;
    }

    @Test
    void takeWaitsForAtLeastAsManyFreeThenTakesEveryFreeOne() throws Exception {
        HandlerSlots<String> slots = new HandlerSlots<>(10);
        assertEquals(10, slots.take(1, 0));
        assertEquals(0, slots.take(1, TimeUnit.MILLISECONDS.toNanos(50)), "nothing free: 0 at the timeout");
        CompletableFuture<Integer> five = async(() -> slots.take(5, LONG_NS));
        slots.give(2);
        Thread.sleep(100);
        assertFalse(five.isDone(), "took 2 while waiting for 5");
        slots.give(4);
        assertEquals(6, five.get(30, TimeUnit.SECONDS));
    }

    @Test
    void takeAtItsTimeoutTakesTheFewerThereAre() throws Exception {
        HandlerSlots<String> slots = new HandlerSlots<>(4);
        slots.take(4, 0);
        slots.give(1);
        assertEquals(1, slots.take(3, TimeUnit.MILLISECONDS.toNanos(50)));
    }

    @Test
    void theAckerWaitsForTheHandlersStillRunningThenTakesTheBatch() throws Exception {
        HandlerSlots<String> slots = new HandlerSlots<>(2);
        slots.take(2, 0);
        slots.done("a");
        CompletableFuture<List<String>> batch = async(() -> slots.takeDone(10, LONG_NS));
        Thread.sleep(100);
        assertFalse(batch.isDone(), "sent while a handler still ran");
        slots.done("b");                     // no slot taken now: the batch goes at once
        assertEquals(List.of("a", "b"), batch.get(30, TimeUnit.SECONDS));
    }

    @Test
    void aFullBatchGoesAtOnceAndTheLingerBoundsTheWait() throws Exception {
        HandlerSlots<String> slots = new HandlerSlots<>(5);
        slots.take(5, 0);
        slots.done("a");
        slots.done("b");
        slots.done("c");
        assertEquals(List.of("a", "b"), slots.takeDone(2, LONG_NS));
        long t0 = System.nanoTime();
        assertEquals(List.of("c"), slots.takeDone(10, TimeUnit.MILLISECONDS.toNanos(50)));
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(20), "waited past the linger");
    }

    @Test
    void afterEndTheAckerTakesWhatIsDoneThenAnEmptyBatch() throws Exception {
        HandlerSlots<String> slots = new HandlerSlots<>(3);
        slots.take(3, 0);
        CompletableFuture<List<String>> waiting = async(() -> slots.takeDone(10, TimeUnit.MILLISECONDS.toNanos(50)));
        slots.done("a");
        assertEquals(List.of("a"), waiting.get(30, TimeUnit.SECONDS), "the first done one, after the linger");
        slots.done("b");
        slots.end();
        assertEquals(List.of("b"), slots.takeDone(10, LONG_NS));
        assertEquals(List.of(), slots.takeDone(10, LONG_NS));
    }
}
