package dev.rmq;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** Polling waits with generous windows (a stalled 2-core machine). */
final class Wait {
    private Wait() {}

    static void until(String what, Duration timeout, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout + " waiting for " + what);
            }
            Thread.sleep(20);
        }
    }
}
