package dev.rmq;

import java.time.Duration;

/**
 * A message of a range-merge queue (RMQ.PUSH ... RANGE ms): due `range` after its first
 * push; pushes of the same body within that time merge into it and keep its due time.
 */
public final class RangeMergeMessage extends Message {
    private final Duration range;

    private RangeMergeMessage(byte[] body, Duration range, byte[] group, byte[] basis) {
        super(body, group, basis);
        if (range == null) {
            throw new IllegalArgumentException("range must not be null");
        }
        Checks.millis("range", range, "range");
        this.range = range;
    }

    public static RangeMergeMessage of(String body, Duration range) {
        return new RangeMergeMessage(Checks.utf8("body", body), range, null, null);
    }

    public static RangeMergeMessage of(byte[] body, Duration range) {
        return new RangeMergeMessage(body, range, null, null);
    }

    public Duration range() {
        return range;
    }

    @Override
    Object[] mode() {
        return new Object[] {"RANGE", range.toMillis()};
    }

    @Override
    RangeMergeMessage with(byte[] group, byte[] basis) {
        return new RangeMergeMessage(body, range, group, basis);
    }

    @Override
    public RangeMergeMessage group(String group) {
        return (RangeMergeMessage) super.group(group);
    }

    @Override
    public RangeMergeMessage basis(String basis) {
        return (RangeMergeMessage) super.basis(basis);
    }
}
