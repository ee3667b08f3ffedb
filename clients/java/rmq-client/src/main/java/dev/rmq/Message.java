package dev.rmq;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A message to push: its body, its kind's push mode (PriorityMessage, FixedTimeMessage,
 * RangeMergeMessage), and optionally a group (one delivery of a group in flight at a time)
 * and a routing basis (which queue of a topic it goes to: the basis, else the group, else
 * the body). Immutable: group() and basis() return a copy.
 */
public abstract class Message {
    final byte[] body;
    final byte[] group;
    final byte[] basis;

    Message(byte[] body, byte[] group, byte[] basis) {
        this.body = Checks.body(body).clone();
        this.group = group == null ? null : Checks.bytes("group", group, "group_bytes").clone();
        this.basis = basis == null ? null : basis.clone();
    }

    /** The push mode: {"PRIORITY", p}, {"AT", unix-ms}, {"DELAY", ms} or {"RANGE", ms}. */
    abstract Object[] mode();

    abstract Message with(byte[] group, byte[] basis);

    /** This message in group `group` (1 to 1024 bytes). */
    public Message group(String group) {
        return with(Checks.utf8("group", group), basis);
    }

    public Message group(byte[] group) {
        return with(group, basis);
    }

    /** This message routed by `basis` on a topic (instead of its group or body). */
    public Message basis(String basis) {
        return with(group, Checks.utf8("basis", basis));
    }

    public byte[] body() {
        return body.clone();
    }

    public String bodyText() {
        return new String(body, StandardCharsets.UTF_8);
    }

    /** The bytes a topic routes this message by. */
    byte[] routingKey() {
        return basis != null ? basis : group != null ? group : body;
    }

    /** Pushed in one RMQ.PUSH with `other`: same mode and group. */
    boolean sameBatch(Message other) {
        return Arrays.equals(mode(), other.mode()) && Arrays.equals(group, other.group);
    }

    @Override
    public String toString() {
        String b = bodyText();
        return getClass().getSimpleName() + "(" + (b.length() > 80 ? b.substring(0, 77) + "..." : b)
                + ", " + mode()[0] + " " + mode()[1]
                + (group == null ? "" : ", group " + new String(group, StandardCharsets.UTF_8)) + ")";
    }
}
