package dev.rmq;

import java.util.ArrayDeque;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * A worker's handler threads, fed from one queue, one thread per handler slot. Only one idle
 * thread is being woken at a time: the thread woken takes a delivery and, if more are
 * waiting, wakes the next. So a batch of quick handlers runs on the few threads the CPU gets
 * to instead of waking a thread per delivery (on one core each wake-up cost more than a
 * no-op handler), while handlers that block still get a thread each, one wake-up after the
 * other. Threads start as needed, up to the size; idle ones end after a minute.
 */
final class HandlerPool {
    private static final long IDLE_NS = TimeUnit.SECONDS.toNanos(60);

    private final String name;
    private final ArrayDeque<Runnable> queue = new ArrayDeque<>();
    private final Set<Thread> threads = new HashSet<>();
    private int size;
    private int idle;
    private int started;
    /** A thread was woken (or started) and has not taken a task yet. */
    private boolean waking;
    private boolean shut;

    HandlerPool(int size, String name) {
        this.size = size;
        this.name = name;
    }

    synchronized void executeAll(List<Runnable> tasks) {
        queue.addAll(tasks);
        wakeOne();
    }

    /** One thread more: a handler given up on keeps its thread, its slot's next delivery gets another. */
    synchronized void grow() {
        size++;
    }

    /** No more tasks; the queued ones still run, then the threads end. */
    synchronized void shutdown() {
        shut = true;
        notifyAll();
    }

    /** Whether every thread ended within `ms`. */
    synchronized boolean awaitTermination(long ms) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (!threads.isEmpty()) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            TimeUnit.NANOSECONDS.timedWait(this, left);
        }
        return true;
    }

    /** Interrupts the threads still running (handlers past the close's wait) and drops the queue. */
    synchronized void shutdownNow() {
        shut = true;
        queue.clear();
        threads.forEach(Thread::interrupt);
        notifyAll();
    }

    /** Under the lock: wakes or starts a thread for the queue's head, unless one is on its way. */
    private void wakeOne() {
        if (waking || queue.isEmpty()) {
            return;
        }
        if (idle > 0) {
            waking = true;
            notify();
        } else if (threads.size() < size) {
            waking = true;
            Thread t = new Thread(this::work, name + "-handler-" + ++started);
            t.setDaemon(true);
            threads.add(t);
            t.start();
        }
    }

    private void work() {
        try {
            synchronized (this) {
                waking = false;              // this is the thread started for the queue's head
            }
            while (true) {
                Runnable task;
                synchronized (this) {
                    long until = System.nanoTime() + IDLE_NS;
                    while (queue.isEmpty() && !shut) {
                        long left = until - System.nanoTime();
                        if (left <= 0) {
                            return;
                        }
                        idle++;
                        try {
                            TimeUnit.NANOSECONDS.timedWait(this, left);
                        } catch (InterruptedException e) {
                            if (shut) {
                                return;      // shutdownNow
                            }                // else one meant for a handler that had returned
                        } finally {
                            idle--;
                            // whether notified or not, this thread is awake now and looks at the
                            // queue: the next task may wake another
                            waking = false;
                        }
                    }
                    task = queue.poll();
                    if (task == null) {      // shut, nothing left
                        return;
                    }
                    wakeOne();
                }
                task.run();
            }
        } finally {
            synchronized (this) {
                threads.remove(Thread.currentThread());
                wakeOne();                   // a task that threw leaves the queue to the others
                notifyAll();                 // awaitTermination
            }
        }
    }
}
