package dev.rmq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** A worker's options: {@code WorkerOptions.builder().concurrency(8).lease(Duration.ofSeconds(30)).build()}. */
public final class WorkerOptions {
    /** Longest block of a pop: a close waits for the blocked pops to return. */
    static final Duration MAX_BLOCK = Duration.ofSeconds(60);

    final int concurrency;
    final Duration lease;
    final Duration maxRuntime;
    final Duration grace;
    final Duration block;
    final Integer quantum;
    final String name;
    final List<WorkerListener> listeners;

    private WorkerOptions(Builder b) {
        concurrency = b.concurrency;
        lease = b.lease;
        maxRuntime = b.maxRuntime;
        grace = b.grace;
        block = b.block;
        quantum = b.quantum;
        name = b.name;
        listeners = List.copyOf(b.listeners);
    }

    public static Builder builder() {
        return new Builder();
    }

    public int concurrency() {
        return concurrency;
    }

    public Duration lease() {
        return lease;
    }

    public static final class Builder {
        private int concurrency = 8;
        private Duration lease = Duration.ofSeconds(30);
        private Duration maxRuntime;
        private Duration grace = Duration.ofSeconds(30);
        private Duration block = Duration.ofSeconds(1);
        private Integer quantum;
        private String name = "rmq";
        private final List<WorkerListener> listeners = new ArrayList<>();

        /** Handlers running at once (1 to 10000); default 8. */
        public Builder concurrency(int concurrency) {
            this.concurrency = (int) Checks.bounded("concurrency", concurrency, "count");
            return this;
        }

        /** Each delivery's lease, extended every third of it while its handler runs; default 30 s. */
        public Builder lease(Duration lease) {
            Checks.millis("lease", lease, "lease_ms");
            this.lease = lease;
            return this;
        }

        /** A handler running longer is given up on: its delivery nacked, its thread interrupted. */
        public Builder maxRuntime(Duration maxRuntime) {
            Checks.millis("maxRuntime", maxRuntime, "lease_ms");
            this.maxRuntime = maxRuntime;
            return this;
        }

        /** How long close() waits for running handlers before it nacks them; default 30 s. */
        public Builder grace(Duration grace) {
            Checks.millis("grace", grace, "delay");
            this.grace = grace;
            return this;
        }

        /** How long a pop waits for a message (1 ms to 60 s; a close is noticed within it); default 1 s. */
        public Builder block(Duration block) {
            long ms = Checks.millis("block", block, "block_ms");
            Checks.within("block ms", ms, 1, MAX_BLOCK.toMillis());
            this.block = block;
            return this;
        }

        /** RMQ.TPOP QUANTUM: messages per queue per turn on a topic (1 to 10000). */
        public Builder quantum(int quantum) {
            this.quantum = (int) Checks.bounded("quantum", quantum, "quantum");
            return this;
        }

        /** The worker's name, in its threads' names and logs. */
        public Builder name(String name) {
            if (name == null || name.isEmpty()) {
                throw new IllegalArgumentException("a worker's name must not be empty");
            }
            this.name = name;
            return this;
        }

        public Builder listener(WorkerListener listener) {
            if (listener == null) {
                throw new IllegalArgumentException("listener must not be null");
            }
            listeners.add(listener);
            return this;
        }

        public WorkerOptions build() {
            return new WorkerOptions(this);
        }
    }
}
