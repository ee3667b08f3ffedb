package dev.rmq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** RMQ.POLICY SET fields, checked as they are given, set on every queue by apply(). */
public final class Policy {
    private final Target target;
    private final Map<String, Long> fields = new LinkedHashMap<>();

    Policy(Target target) {
        this.target = target;
    }

    private Policy set(String field, long value) {
        long[] b = Protocol.POLICY_FIELDS.get(field);
        fields.put(field, Checks.within(field, value, b[0], b[1]));
        return this;
    }

    private Policy setMillis(String field, Duration d) {
        if (d == null || d.isNegative() || d.getNano() % 1_000_000 != 0) {
            throw new IllegalArgumentException(field + " must be whole milliseconds, got " + d);
        }
        long ms;
        try {
            ms = d.toMillis();
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException(field + " is too long: " + d);
        }
        return set(field, ms);
    }

    /** Deliveries before a message goes to dead (0 to 1000). */
    public Policy retries(long retries) {
        return set("retries", retries);
    }

    /** The default lease of a pop that names none. */
    public Policy lease(Duration lease) {
        return setMillis("lease_ms", lease);
    }

    /** Most messages waiting (0: no limit). */
    public Policy maxQueueLength(long n) {
        return set("max_queue_length", n);
    }

    /** The delay of a NACK that names none: backoff × 2^(deliveries-1), at most backoffMax. */
    public Policy backoff(Duration backoff) {
        return setMillis("backoff_ms", backoff);
    }

    public Policy backoffMax(Duration max) {
        return setMillis("backoff_max_ms", max);
    }

    /** At most `rate` deliveries per `window` (rate 0: no limit). */
    public Policy rate(long rate, Duration window) {
        set("rate", rate);
        return setMillis("rate_window_ms", window);
    }

    public Policy rate(long rate) {
        return set("rate", rate);
    }

    public Policy rateWindow(Duration window) {
        return setMillis("rate_window_ms", window);
    }

    public Policy paused(boolean paused) {
        return set("paused", paused ? 1 : 0);
    }

    /** Keep the last `events` events of each queue in its journal (0: none; RMQ.TRACE reads it). */
    public Policy journal(long events) {
        return set("journal", events);
    }

    /** Sets the fields on every queue of the queue or topic. */
    public void apply() {
        if (fields.isEmpty()) {
            throw new IllegalArgumentException("a policy needs at least one field");
        }
        List<Object> args = new ArrayList<>();
        fields.forEach((k, v) -> {
            args.add(k.replace('_', '-'));
            args.add(v);
        });
        target.setPolicy(args);
    }
}
