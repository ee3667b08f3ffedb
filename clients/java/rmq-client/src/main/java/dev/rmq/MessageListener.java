package dev.rmq;

/**
 * A worker's handler: returning acks the delivery; throwing nacks it (back to waiting after
 * the queue's retry backoff, dead once its retries are used up); throwing {@link DeadLetter}
 * sends it straight to dead.
 */
@FunctionalInterface
public interface MessageListener {
    void onMessage(Delivery message) throws Exception;
}
