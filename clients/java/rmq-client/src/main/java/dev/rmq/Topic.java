package dev.rmq;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32;

/**
 * A topic: `slots` queues named {@code <name>_<i>}, each message in the one its routing
 * basis (the basis, else the group, else the body) hashes to, as RMQ.ROUTE computes it.
 */
public final class Topic extends Target {
    private final String name;
    private final int slots;

    Topic(Redis redis, String name, int slots, Durable durable) {
        super(redis, names(Checks.queueName(name), Checks.slots(slots)), durable);
        this.name = name;
        this.slots = slots;
    }

    /** This topic in durable mode `durable` (its pushes, pops and acks wait for replicas). */
    public Topic durable(Durable durable) {
        return new Topic(redis, name, slots, durable);
    }

    private static List<String> names(String name, int slots) {
        List<String> out = new ArrayList<>(slots);
        for (int i = 0; i < slots; i++) {
            out.add(name + "_" + i);
        }
        return out;
    }

    public String name() {
        return name;
    }

    public int slots() {
        return slots;
    }

    /** The queue of this topic that `basis` goes to: {@code <name>_<crc32(basis) mod slots>}. */
    public String queueFor(String basis) {
        return queueFor(Checks.utf8("basis", basis));
    }

    public String queueFor(byte[] basis) {
        return route(name, slots, basis);
    }

    /** RMQ.ROUTE computed locally (CRC-32, zlib's, of the basis, modulo the slot count). */
    public static String route(String topic, int slots, byte[] basis) {
        Checks.slots(slots);
        CRC32 crc = new CRC32();
        crc.update(basis);
        return topic + "_" + (crc.getValue() % slots);
    }

    public static String route(String topic, int slots, String basis) {
        return route(topic, slots, basis.getBytes(StandardCharsets.UTF_8));
    }

    @Override
    String queueOf(Message m) {
        return queueFor(m.routingKey());
    }

    /** RMQ.TPOP COUNT n without waiting (on a server, not a cluster: a Worker covers clusters). */
    public List<Delivery> pop(int count) {
        return pop(count, null, null, null);
    }

    /**
     * RMQ.TPOP: up to `count` messages from the topic's queues in turn, `quantum` (null: 1)
     * per queue per turn, each under `lease` (null: its queue's lease-ms); with `block`,
     * waits for one. On a cluster TPOP runs per primary: use a Worker.
     */
    public List<Delivery> pop(int count, Duration lease, Duration block, Integer quantum) {
        if (redis.isCluster()) {
            throw new IllegalStateException("Topic.pop on a cluster: each primary holds some of the "
                    + "queues; a Worker takes from every primary");
        }
        return pop(count, lease, block, quantum, sender(durable, null));
    }

    @Override
    List<Delivery> pop(int count, Duration lease, Duration block, Integer quantum, Sender via) {
        List<Object> c = new ArrayList<>(List.of("RMQ.TPOP", name, slots, "COUNT",
                Checks.bounded("count", count, "count")));
        if (quantum != null) {
            c.add("QUANTUM");
            c.add(Checks.bounded("quantum", quantum, "quantum"));
        }
        return deliveries(leaseBlock(c, lease, block), lease, via, null);
    }

    /** RMQ.INFO summed over the slots' queues. */
    public Info info() {
        return Info.sum(infoByQueue().values());
    }

    @Override
    public String toString() {
        return "Topic(" + name + ", " + slots + ")";
    }
}
