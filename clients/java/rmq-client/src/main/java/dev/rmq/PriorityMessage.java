package dev.rmq;

/**
 * A message of a priority queue (RMQ.PUSH ... PRIORITY p): the highest priority is
 * delivered first; pushing a waiting duplicate sets its priority (merges).
 */
public final class PriorityMessage extends Message {
    private final long priority;

    private PriorityMessage(byte[] body, long priority, byte[] group, byte[] basis) {
        super(body, group, basis);
        this.priority = Checks.bounded("priority", priority, "priority");
    }

    public static PriorityMessage of(String body, long priority) {
        return new PriorityMessage(Checks.utf8("body", body), priority, null, null);
    }

    public static PriorityMessage of(byte[] body, long priority) {
        return new PriorityMessage(body, priority, null, null);
    }

    public long priority() {
        return priority;
    }

    @Override
    Object[] mode() {
        return new Object[] {"PRIORITY", priority};
    }

    @Override
    PriorityMessage with(byte[] group, byte[] basis) {
        return new PriorityMessage(body, priority, group, basis);
    }

    @Override
    public PriorityMessage group(String group) {
        return (PriorityMessage) super.group(group);
    }

    @Override
    public PriorityMessage basis(String basis) {
        return (PriorityMessage) super.basis(basis);
    }
}
