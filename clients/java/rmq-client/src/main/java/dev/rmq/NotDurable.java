package dev.rmq;

import java.util.List;

/**
 * The write is done on the primary, but fewer replicas than asked confirmed it in time: a
 * failover now could undo it. Retry: a retried push of the same content merges with the
 * stored copy; a retried ACK of an acked message answers false. A pop that is not
 * confirmed hands out nothing (the primary may be stale): its messages stay in flight there
 * until their leases run out. replies() holds the replies of the commands before the wait.
 */
public class NotDurable extends RuntimeException {
    private final long confirmed;
    private final int wanted;
    private final transient List<Object> replies;

    NotDurable(String what, long confirmed, Durable d, List<Object> replies) {
        super(what + " is done on the primary but only " + confirmed + " of " + d.replicas + " replicas "
                + (d.aof ? "wrote to their AOF" : "acknowledged") + " it within " + d.timeoutMs
                + " ms, so a failover now could undo it: " + advice(what));
        this.confirmed = confirmed;
        this.wanted = d.replicas;
        this.replies = replies;
    }

    private static String advice(String what) {
        switch (what) {
            case "RMQ.PUSH":
                return "retry (a retried push of the same content merges)";
            case "RMQ.POP":
            case "RMQ.TPOP":
                return "its messages are not handed out (this primary may be stale); they stay in "
                        + "flight here until their leases run out";
            default:
                return "retry";
        }
    }

    public long confirmed() {
        return confirmed;
    }

    public int wanted() {
        return wanted;
    }

    public List<Object> replies() {
        return replies;
    }
}
