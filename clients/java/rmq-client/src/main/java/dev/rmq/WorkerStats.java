package dev.rmq;

/**
 * A worker's counters since it started: handlers that returned (`processed`), threw or
 * ran out of time (`failed`), deliveries sent to dead, automatic lease extensions, handlers
 * given up on after max runtime (`timedOut`), deliveries still running at the end of a
 * close's grace and nacked (`released`), acks/nacks too late or failing (`lost`).
 */
public record WorkerStats(long processed, long failed, long dead, long extended, long timedOut,
        long released, long lost) {}
