package dev.rmq;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One delivery of a message, taken by RMQ.POP or RMQ.TPOP and now in flight under a lease.
 * Settle it once: ack(), nack() or dead() (under a Worker the worker does this: ACK when the
 * handler returns, NACK when it throws); a second settle throws IllegalStateException.
 */
public final class Delivery {
    private final Redis redis;
    private final Durable durable;
    private final String queue;
    private final byte[] body;
    private final long deliveries;
    private final AtomicBoolean settled = new AtomicBoolean();
    /** System.nanoTime() by which the lease runs out, as far as this process knows (0: unknown). */
    volatile long leaseEnd;

    Delivery(Redis redis, Durable durable, String queue, byte[] body, long deliveries, long leaseEnd) {
        this.redis = redis;
        this.durable = durable;
        this.queue = queue;
        this.body = body;
        this.deliveries = deliveries;
        this.leaseEnd = leaseEnd;
    }

    /** The body as UTF-8 text. */
    public String body() {
        return new String(body, StandardCharsets.UTF_8);
    }

    public byte[] bytes() {
        return body.clone();
    }

    byte[] rawBody() {
        return body;
    }

    /** The queue it came from (on a topic: its slot's queue). */
    public String queue() {
        return queue;
    }

    /** 1 on the first delivery, counting redeliveries after a NACK or an expired lease. */
    public long deliveries() {
        return deliveries;
    }

    public boolean settled() {
        return settled.get();
    }

    /**
     * RMQ.EXTEND: the lease now ends `lease` from now. Returns the new deadline, or null if
     * the message is no longer in flight (its lease ran out).
     */
    public Instant extend(Duration lease) {
        long ms = Checks.millis("extend", lease, "extend_ms");
        long start = System.nanoTime();
        Object reply = redis.call("RMQ.EXTEND", queue, body, ms);
        if (reply == null) {
            return null;
        }
        leaseEnd = start + ms * 1_000_000L;
        return Instant.ofEpochMilli((Long) reply);
    }

    /**
     * RMQ.ACK: true if it was still in flight, false if the ack came too late. In durable
     * mode (its queue's) NotDurable when replicas do not confirm it.
     */
    public boolean ack() {
        claimOrThrow();
        return sendAck(durable);
    }

    /** ack in durable mode `durable` (Durable.NONE: none). */
    public boolean ack(Durable durable) {
        claimOrThrow();
        return sendAck(durable.none() ? null : durable);
    }

    Durable durable() {
        return durable;
    }

    /** RMQ.NACK: back to waiting after the queue's retry backoff (or dead once retries are used up). */
    public String nack() {
        claimOrThrow();
        return sendNack(null, false);
    }

    /** RMQ.NACK ... DELAY: back to waiting after `delay`. Returns "requeued", "dead" or null. */
    public String nack(Duration delay) {
        long ms = Checks.millis("nack delay", delay, "delay");
        claimOrThrow();
        return sendNack(ms, false);
    }

    /** RMQ.NACK ... DEAD: straight to dead. */
    public String dead() {
        claimOrThrow();
        return sendNack(null, true);
    }

    boolean claim() {
        return settled.compareAndSet(false, true);
    }

    private void claimOrThrow() {
        if (!claim()) {
            throw new IllegalStateException(this + " was already acked or nacked");
        }
    }

    boolean sendAck(Durable d) {
        List<Object[]> cmd = List.<Object[]>of(new Object[] {"RMQ.ACK", queue, body});
        return Retry.run(() -> (Long) redis.callAll(cmd, d).get(0), "ACK on " + queue) > 0;
    }

    String sendNack(Long delayMs, boolean dead) {
        Object[] cmd = delayMs == null
                ? (dead ? new Object[] {"RMQ.NACK", queue, body, "DEAD"} : new Object[] {"RMQ.NACK", queue, body})
                : (dead ? new Object[] {"RMQ.NACK", queue, body, "DELAY", delayMs, "DEAD"}
                        : new Object[] {"RMQ.NACK", queue, body, "DELAY", delayMs});
        Object reply = Retry.run(() -> redis.call(cmd), "NACK on " + queue);
        return reply == null ? null : Replies.text(reply);
    }

    @Override
    public String toString() {
        String b = body();
        return "Delivery(queue=" + queue + ", body=" + (b.length() > 80 ? b.substring(0, 77) + "..." : b)
                + ", deliveries=" + deliveries + ")";
    }
}
