package dev.rmq;

import java.time.Duration;
import java.time.Instant;

/**
 * A message due at a fixed time (RMQ.PUSH ... AT unix-ms, or DELAY ms from now): delivered
 * once due, the oldest due first; pushing a waiting duplicate moves its due time (latest wins).
 */
public final class FixedTimeMessage extends Message {
    private final Instant at;
    private final Duration delay;

    private FixedTimeMessage(byte[] body, Instant at, Duration delay, byte[] group, byte[] basis) {
        super(body, group, basis);
        if (at != null) {
            Checks.unixMillis("at", at, "at");
        } else {
            Checks.millis("delay", delay, "delay");
        }
        this.at = at;
        this.delay = delay;
    }

    /** Due at `at` (whole milliseconds count; an instant in the past is due at once). */
    public static FixedTimeMessage at(Instant at, String body) {
        return new FixedTimeMessage(Checks.utf8("body", body), nonNull("at", at), null, null, null);
    }

    public static FixedTimeMessage at(Instant at, byte[] body) {
        return new FixedTimeMessage(body, nonNull("at", at), null, null, null);
    }

    /** Due `delay` from when the server receives the push (the server's clock). */
    public static FixedTimeMessage after(Duration delay, String body) {
        return new FixedTimeMessage(Checks.utf8("body", body), null, nonNull("delay", delay), null, null);
    }

    public static FixedTimeMessage after(Duration delay, byte[] body) {
        return new FixedTimeMessage(body, null, nonNull("delay", delay), null, null);
    }

    private static <T> T nonNull(String name, T value) {
        if (value == null) {
            throw new IllegalArgumentException(name + " must not be null");
        }
        return value;
    }

    @Override
    Object[] mode() {
        return at != null
                ? new Object[] {"AT", at.toEpochMilli()}
                : new Object[] {"DELAY", delay.toMillis()};
    }

    @Override
    FixedTimeMessage with(byte[] group, byte[] basis) {
        return new FixedTimeMessage(body, at, delay, group, basis);
    }

    @Override
    public FixedTimeMessage group(String group) {
        return (FixedTimeMessage) super.group(group);
    }

    @Override
    public FixedTimeMessage basis(String basis) {
        return (FixedTimeMessage) super.basis(basis);
    }
}
