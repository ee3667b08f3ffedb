package dev.rmq;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** What Queue and Topic share: the queues they cover and the commands sent to each. */
public abstract class Target {
    final Redis redis;
    final List<String> queues;
    /** Durable mode of its pushes, pops and of the acks of messages taken from it (null: none). */
    final Durable durable;

    Target(Redis redis, List<String> queues, Durable durable) {
        this.redis = redis;
        this.queues = queues;
        this.durable = durable == null || durable.none() ? null : durable;
    }

    /** Its durable mode, or null. */
    public Durable durable() {
        return durable;
    }

    /** The durable mode of one call: its own (NONE: none), else this target's. */
    Durable durableFor(Durable call) {
        if (call == null) {
            return durable;
        }
        return call.none() ? null : call;
    }

    /** Where a pop goes: `link` (a worker's own connection) or the shared one, with its WAIT when durable. */
    Sender sender(Durable d, Redis.Link link) {
        if (d != null) {
            return cmd -> redis.callDurable(java.util.Collections.singletonList(cmd), d, link).get(0);
        }
        return link != null ? link::call : redis::call;
    }

    /** Where a pop is sent: the shared connection, or a worker's own. */
    interface Sender {
        Object call(Object... command);
    }

    /** A pop of up to `count` deliveries, sent `via` (Queue: RMQ.POP, Topic: RMQ.TPOP). */
    abstract List<Delivery> pop(int count, Duration lease, Duration block, Integer quantum, Sender via);

    /** The queue a message goes to. */
    abstract String queueOf(Message m);

    /** The queue names covered (one for a Queue, the slots' queues for a Topic). */
    public List<String> queues() {
        return queues;
    }

    /**
     * RMQ.PUSH the messages (each to its queue; those of one queue, mode and group in one
     * command). Returns how many were newly added (the others merged into a waiting copy).
     */
    public long push(Message... messages) {
        return push(Arrays.asList(messages));
    }

    public long push(List<? extends Message> messages) {
        return push(null, messages);
    }

    /** push in durable mode `durable` for this call (Durable.NONE: none); NotDurable when replicas do not confirm. */
    public long push(Durable durable, Message... messages) {
        return push(durable, Arrays.asList(messages));
    }

    public long push(Durable durable, List<? extends Message> messages) {
        if (messages == null || messages.isEmpty()) {
            throw new IllegalArgumentException("push needs at least one message");
        }
        // batches by queue, then mode and group, in the order first seen
        Map<String, List<List<Message>>> byQueue = new LinkedHashMap<>();
        for (Message m : messages) {
            if (m == null) {
                throw new IllegalArgumentException("a message must not be null");
            }
            List<List<Message>> batches = byQueue.computeIfAbsent(queueOf(m), q -> new ArrayList<>());
            List<Message> batch = batches.stream().filter(b -> b.get(0).sameBatch(m)).findFirst().orElse(null);
            if (batch == null) {
                batch = new ArrayList<>();
                batches.add(batch);
            }
            batch.add(m);
        }
        List<Object[]> commands = new ArrayList<>();
        byQueue.forEach((q, batches) -> batches.forEach(b -> commands.add(pushCommand(q, b))));
        long added = 0;
        for (Object reply : redis.callAll(commands, durableFor(durable))) {
            added += (Long) reply;
        }
        return added;
    }

    /** The RMQ.PUSH of one batch: `MESSAGES` ends the options, so every body is a message however it is spelt. */
    static Object[] pushCommand(String queue, List<Message> batch) {
        Message first = batch.get(0);
        List<Object> c = new ArrayList<>(List.of("RMQ.PUSH", queue));
        c.addAll(Arrays.asList(first.mode()));
        if (first.group != null) {
            c.add("GROUP");
            c.add(first.group);
        }
        c.add("MESSAGES");
        batch.forEach(m -> c.add(m.body));
        return c.toArray();
    }

    /** RMQ.INFO of each queue. */
    public Map<String, Info> infoByQueue() {
        List<Object> replies = redis.callAll(each("RMQ.INFO"));
        Map<String, Info> out = new LinkedHashMap<>();
        for (int i = 0; i < queues.size(); i++) {
            out.put(queues.get(i), new Info(Replies.map(replies.get(i))));
        }
        return out;
    }

    /** A policy to set on every queue: {@code policy().retries(5).backoff(Duration.ofSeconds(1)).apply()}. */
    public Policy policy() {
        return new Policy(this);
    }

    void setPolicy(List<Object> fieldArgs) {
        List<Object[]> commands = new ArrayList<>();
        for (String q : queues) {
            List<Object> c = new ArrayList<>(List.of("RMQ.POLICY", q, "SET"));
            c.addAll(fieldArgs);
            commands.add(c.toArray());
        }
        redis.callAll(commands);
    }

    /** RMQ.POLICY Q GET of each queue: every field's effective value (names with '_'). */
    public Map<String, Map<String, Object>> policies() {
        List<Object> replies = redis.callAll(each("RMQ.POLICY", "GET"));
        Map<String, Map<String, Object>> out = new LinkedHashMap<>();
        for (int i = 0; i < queues.size(); i++) {
            out.put(queues.get(i), Replies.map(replies.get(i)));
        }
        return out;
    }

    /** RMQ.POLICY Q RESET on every queue; returns how many had a policy. */
    public long resetPolicy() {
        return sum(redis.callAll(each("RMQ.POLICY", "RESET")));
    }

    /** Stop deliveries on every queue (pushes, acks and leases go on). */
    public void pause() {
        policy().paused(true).apply();
    }

    public void resume() {
        policy().paused(false).apply();
    }

    /** RMQ.REPLAY: every dead message back to waiting; returns how many. */
    public long replay() {
        return sum(redis.callAll(each("RMQ.REPLAY")));
    }

    /** RMQ.REPLAY ... COUNT: at most `count` dead messages per queue back to waiting. */
    public long replay(long count) {
        Checks.bounded("count", count, "replay_count");
        return sum(redis.callAll(each("RMQ.REPLAY", "COUNT", count)));
    }

    /** RMQ.PURGE: every waiting and in-flight message goes; policy, schedules, sequence
     *  and deduplication stay. Returns how many messages were removed. */
    public long purge() {
        return purge(false);
    }

    /** RMQ.PURGE ... DEAD when `dead`: the dead messages go too. */
    public long purge(boolean dead) {
        return sum(redis.callAll(dead ? each("RMQ.PURGE", "DEAD") : each("RMQ.PURGE")));
    }

    /** RMQ.DROP: each queue goes with every key the module keeps for it (messages,
     *  policy, schedules, sequence, deduplication, journal); returns how many existed. */
    public long drop() {
        return sum(redis.callAll(each("RMQ.DROP")));
    }

    /** RMQ.SCHEDULE Q LIST of every queue, by queue then name. */
    public List<ScheduleEntry> schedules() {
        List<Object> replies = redis.callAll(each("RMQ.SCHEDULE", "LIST"));
        List<ScheduleEntry> out = new ArrayList<>();
        for (int i = 0; i < queues.size(); i++) {
            for (Object e : (List<?>) replies.get(i)) {
                List<?> f = (List<?>) e;
                out.add(new ScheduleEntry(queues.get(i), Replies.text(f.get(0)), Replies.text(f.get(1)),
                        instant(f.get(2)), (Long) f.get(3), instant(f.get(4))));
            }
        }
        return out;
    }

    /**
     * RMQ.SCHEDULE Q SET: the server pushes `message` as `when` says, with the message's
     * mode (priority, range, or a FixedTimeMessage.after delay) and group. Returns the first
     * firing time.
     */
    public Instant schedule(String name, Schedule when, Message message) {
        byte[] n = Checks.bytes("name", Checks.utf8("name", name), "schedule_name_bytes");
        if (when == null || message == null) {
            throw new IllegalArgumentException("schedule needs a Schedule and a message");
        }
        Object[] mode = message.mode();
        if (mode[0].equals("AT")) {
            throw new IllegalArgumentException("schedule needs exactly one of range, priority, delay "
                    + "(a FixedTimeMessage.at has a fixed time; use FixedTimeMessage.after)");
        }
        List<Object> c = new ArrayList<>(List.of("RMQ.SCHEDULE", queueOf(message), "SET", n));
        c.addAll(when.args());
        c.addAll(Arrays.asList(mode));
        if (message.group != null) {
            c.add("GROUP");
            c.add(message.group);
        }
        c.add("MESSAGES");
        c.add(message.body);
        return Instant.ofEpochMilli((Long) redis.call(c.toArray()));
    }

    /** RMQ.SCHEDULE Q DEL on every queue; returns how many schedules existed. */
    public long unschedule(String... names) {
        if (names.length == 0) {
            throw new IllegalArgumentException("unschedule needs at least one name");
        }
        List<Object[]> commands = new ArrayList<>();
        for (String q : queues) {
            List<Object> c = new ArrayList<>(List.of("RMQ.SCHEDULE", q, "DEL"));
            c.addAll(Arrays.asList(names));
            commands.add(c.toArray());
        }
        return sum(redis.callAll(commands));
    }

    List<Object[]> each(Object... rest) {
        List<Object[]> out = new ArrayList<>();
        for (String q : queues) {
            Object[] c = new Object[rest.length + 1];
            c[0] = rest[0];
            c[1] = q;
            System.arraycopy(rest, 1, c, 2, rest.length - 1);
            out.add(c);
        }
        return out;
    }

    static long sum(List<Object> replies) {
        long n = 0;
        for (Object r : replies) {
            n += (Long) r;
        }
        return n;
    }

    static Instant instant(Object ms) {
        return ms == null ? null : Instant.ofEpochMilli((Long) ms);
    }

    static Object[] leaseBlock(List<Object> c, Duration lease, Duration block) {
        if (lease != null) {
            c.add("LEASE");
            c.add(Checks.millis("lease", lease, "lease_ms"));
        }
        if (block != null) {
            c.add("BLOCK");
            c.add(Checks.millis("block", block, "block_ms"));
        }
        return c.toArray();
    }

    static long leaseEnd(long start, Duration lease) {
        return lease == null ? 0 : start + lease.toNanos();
    }

    /**
     * Sends a POP or TPOP and reads its entries: `[message, deliveries]` of `queue`, or, with
     * `queue` null (TPOP), `[queue, message, deliveries]`.
     */
    List<Delivery> deliveries(Object[] cmd, Duration lease, Sender via, String queue) {
        long start = System.nanoTime();
        List<Delivery> out = new ArrayList<>();
        Object reply = via.call(cmd);
        if (reply != null) {
            int at = queue == null ? 1 : 0;
            for (Object e : (List<?>) reply) {
                List<?> f = (List<?>) e;
                String q = queue == null ? Replies.text(f.get(0)) : queue;
                out.add(new Delivery(redis, durable, q, (byte[]) f.get(at), (Long) f.get(at + 1), leaseEnd(start, lease)));
            }
        }
        return out;
    }
}
