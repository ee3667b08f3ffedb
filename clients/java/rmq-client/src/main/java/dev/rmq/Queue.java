package dev.rmq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** One queue, e.g. {@code rmq.queue("prices_3")}. */
public final class Queue extends Target {
    private final String name;

    Queue(Redis redis, String name, Durable durable) {
        super(redis, List.of(Checks.queueName(name)), durable);
        this.name = name;
    }

    /** This queue in durable mode `durable` (its pushes, pops and acks wait for replicas). */
    public Queue durable(Durable durable) {
        return new Queue(redis, name, durable);
    }

    public String name() {
        return name;
    }

    @Override
    String queueOf(Message m) {
        return name;
    }

    /** RMQ.POP COUNT n without waiting, under the queue's lease. */
    public List<Delivery> pop(int count) {
        return pop(count, null, null);
    }

    /**
     * RMQ.POP: up to `count` messages, each in flight under `lease` (null: the queue's
     * lease-ms); with `block`, waits that long for one (Duration.ZERO: forever).
     */
    public List<Delivery> pop(int count, Duration lease, Duration block) {
        return pop(count, lease, block, null, sender(durable, null));
    }

    /** pop in durable mode `durable` (NONE: none): NotDurable, handing out nothing, when replicas do not confirm. */
    public List<Delivery> pop(int count, Duration lease, Duration block, Durable durable) {
        return pop(count, lease, block, null, sender(durableFor(durable), null));
    }

    @Override
    List<Delivery> pop(int count, Duration lease, Duration block, Integer quantum, Sender via) {
        if (quantum != null) {
            throw new IllegalArgumentException("quantum is for a Topic (RMQ.TPOP)");
        }
        List<Object> c = new ArrayList<>(List.of("RMQ.POP", name, "COUNT",
                Checks.bounded("count", count, "count")));
        return deliveries(leaseBlock(c, lease, block), lease, via, name);
    }

    /** RMQ.INFO. */
    public Info info() {
        return infoByQueue().get(name);
    }

    /** RMQ.TRACE: what happened to `message`, newest first, at most 100 events. */
    public List<JournalEntry> trace(String message) {
        return trace(message, 100);
    }

    /**
     * RMQ.TRACE Q message COUNT count: the message's events from the queue's journal (kept
     * while its policy sets {@code journal}), newest first; empty without a journal.
     */
    public List<JournalEntry> trace(String message, int count) {
        byte[] m = Checks.utf8("message", message);
        Object reply = redis.call("RMQ.TRACE", name, m, "COUNT", Checks.within("count", count, 1, 1_000_000));
        List<JournalEntry> out = new ArrayList<>();
        for (Object e : (List<?>) reply) {
            List<?> pair = (List<?>) e;
            List<?> flat = (List<?>) pair.get(1);
            Map<String, byte[]> fields = new LinkedHashMap<>();
            for (int i = 0; i + 1 < flat.size(); i += 2) {
                fields.put(Replies.text(flat.get(i)), (byte[]) flat.get(i + 1));
            }
            out.add(new JournalEntry(Replies.text(pair.get(0)), fields));
        }
        return out;
    }

    /** RMQ.POLICY Q GET. */
    public Map<String, Object> currentPolicy() {
        return policies().get(name);
    }

    @Override
    public String toString() {
        return "Queue(" + name + ")";
    }
}
