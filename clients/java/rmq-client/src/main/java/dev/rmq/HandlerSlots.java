package dev.rmq;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A worker's handler slots (its concurrency): the free ones, which the fetch loops take for
 * a pop of as many messages, and the deliveries whose handlers returned and gave their slot
 * back, waiting for the acker's batched RMQ.ACK. Each side is woken when what it waits for
 * is there (k free slots; a full batch, or no slot taken), not at every handler's end: on
 * one core a wake-up per message cost more than a no-op handler.
 */
final class HandlerSlots<T> {
    private final int capacity;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition freed = lock.newCondition();
    private final Condition acksReady = lock.newCondition();
    private final List<T> done = new ArrayList<>();
    private int free;
    /** The fewest free slots a waiting fetch loop wants (MAX_VALUE: none waits). */
    private int wanted = Integer.MAX_VALUE;
    /** The acker waits: for a first delivery (FIRST) or for its batch to fill (BATCH). */
    private int ackerWaits;
    private int batch;
    private boolean ended;

    private static final int FIRST = 1;
    private static final int BATCH = 2;

    HandlerSlots(int capacity) {
        this.capacity = capacity;
        this.free = capacity;
    }

    /**
     * Waits up to `timeoutNs` for `atLeast` free slots, then takes every free one: how many
     * (maybe fewer than `atLeast` at the timeout, maybe 0).
     */
    int take(int atLeast, long timeoutNs) throws InterruptedException {
        lock.lock();
        try {
            long left = timeoutNs;
            while (free < atLeast && left > 0) {
                wanted = Math.min(wanted, atLeast);
                left = freed.awaitNanos(left);
            }
            int n = free;
            free = 0;
            return n;
        } finally {
            lock.unlock();
        }
    }

    /** Gives `n` slots back (a pop that got fewer, a delivery settled otherwise than by the acker). */
    void give(int n) {
        lock.lock();
        try {
            release(n);
        } finally {
            lock.unlock();
        }
    }

    /** A handler returned: its slot is free, its delivery waits for its ACK. */
    void done(T delivery) {
        lock.lock();
        try {
            release(1);
            done.add(delivery);
            if (ackerWaits == FIRST || ackerWaits == BATCH && done.size() >= batch) {
                acksReady.signal();
            }
        } finally {
            lock.unlock();
        }
    }

    private void release(int n) {
        free += n;
        if (free >= wanted) {
            wanted = Integer.MAX_VALUE;      // each waiting loop sets it again if it still wants more
            freed.signalAll();
        }
        if (free == capacity && ackerWaits == BATCH) {
            acksReady.signal();              // no handler left to wait for
        }
    }

    /**
     * The acker's next batch: waits for a first done delivery, then up to `lingerNs` while
     * slots are taken (their handlers may return yet) and fewer than `max` are done. Empty
     * once end() was called and every done delivery was taken.
     */
    List<T> takeDone(int max, long lingerNs) throws InterruptedException {
        lock.lock();
        try {
            while (done.isEmpty() && !ended) {
                ackerWaits = FIRST;
                acksReady.await();
            }
            long left = lingerNs;
            batch = max;
            while (!ended && done.size() < max && free < capacity && left > 0) {
                ackerWaits = BATCH;
                left = acksReady.awaitNanos(left);
            }
            List<T> out = new ArrayList<>(done.subList(0, Math.min(max, done.size())));
            done.subList(0, out.size()).clear();
            return out;
        } finally {
            ackerWaits = 0;
            lock.unlock();
        }
    }

    /** The worker stops: the acker takes what is done, then gets an empty batch. */
    void end() {
        lock.lock();
        try {
            ended = true;
            acksReady.signal();
        } finally {
            lock.unlock();
        }
    }
}
