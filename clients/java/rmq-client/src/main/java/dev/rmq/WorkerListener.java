package dev.rmq;

import java.time.Duration;

/** Told what a worker did; called on the worker's threads, so keep it quick. */
public interface WorkerListener {
    /** The handler returned and the delivery was acked (or the handler settled it itself). */
    default void completed(Delivery message, Duration took) {}

    /** The handler threw (or ran past max runtime) and the delivery was nacked or sent to dead. */
    default void failed(Delivery message, Throwable error) {}

    /** The worker could not reach the server (it retries with backoff), or an ack/nack was lost. */
    default void error(Throwable error) {}
}
