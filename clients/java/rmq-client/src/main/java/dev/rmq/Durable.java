package dev.rmq;

import java.time.Duration;
import java.util.List;

/**
 * Durable mode: a write (push, pop, ack) answers only once `replicas` replicas hold it
 * (WAIT on the connection that wrote it, to the node that owns the queue's slot), or, with
 * aof(), once the primary and those replicas wrote it to their AOF (WAITAOF). Fewer in
 * time throws {@link NotDurable}. {@code Durable.replicas(1)}; {@code Durable.NONE} turns
 * a queue's durable mode off for one call.
 */
public final class Durable {
    /** Most replicas one can wait for. */
    static final int MAX_REPLICAS = 1000;
    /** Longest wait; 0, which WAIT reads as forever, is refused so a call always ends. */
    static final long MAX_TIMEOUT_MS = 1L << 31;

    public static final Durable NONE = new Durable(0, 0, false);

    final int replicas;
    final long timeoutMs;
    final boolean aof;

    private Durable(int replicas, long timeoutMs, boolean aof) {
        this.replicas = replicas;
        this.timeoutMs = timeoutMs;
        this.aof = aof;
    }

    /** `replicas` replicas (1 to 1000) within 1 s. */
    public static Durable replicas(int replicas) {
        if (replicas < 1 || replicas > MAX_REPLICAS) {
            throw new IllegalArgumentException("durable replicas must be an integer from 1 to "
                    + MAX_REPLICAS + ", got " + replicas);
        }
        return new Durable(replicas, 1000, false);
    }

    public Durable timeout(Duration timeout) {
        requireSome();
        long ms = timeout == null || timeout.isNegative() ? -1 : timeout.toMillis();
        if (ms < 1 || ms > MAX_TIMEOUT_MS) {
            throw new IllegalArgumentException("durable timeout must be from 1 ms to " + MAX_TIMEOUT_MS
                    + " ms, got " + timeout);
        }
        return new Durable(replicas, ms, aof);
    }

    /** Also written to the AOF of the primary and the replicas (WAITAOF; Redis 7.2+, appendonly on). */
    public Durable aof() {
        requireSome();
        return new Durable(replicas, timeoutMs, true);
    }

    private void requireSome() {
        if (replicas == 0) {
            throw new IllegalArgumentException("Durable.NONE waits for nothing");
        }
    }

    boolean none() {
        return replicas == 0;
    }

    Object[] command() {
        return aof ? new Object[] {"WAITAOF", 1, replicas, timeoutMs} : new Object[] {"WAIT", replicas, timeoutMs};
    }

    /** Throws NotDurable unless the WAIT / WAITAOF reply confirms enough copies. */
    void check(Object reply, String what, List<Object> replies) {
        long confirmed;
        if (aof) {
            List<?> r = (List<?>) reply;
            confirmed = (Long) r.get(0) < 1 ? 0 : (Long) r.get(1);
        } else {
            confirmed = (Long) reply;
        }
        if (confirmed < replicas) {
            throw new NotDurable(what, confirmed, this, replies);
        }
    }

    @Override
    public String toString() {
        return none() ? "Durable.NONE" : "Durable(" + replicas + " replicas, " + timeoutMs + " ms" + (aof ? ", aof" : "") + ")";
    }
}
