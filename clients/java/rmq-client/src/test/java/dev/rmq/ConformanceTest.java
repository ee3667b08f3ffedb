package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * clients/conformance.json: every case against a real server (flushed first), each call
 * mapped to the Java API by the README's naming rule (snake_case call and option names in
 * camelCase, ms options as Durations, times as Instants).
 */
class ConformanceTest extends OneServerTest {
    @SuppressWarnings("unchecked")
    @TestFactory
    Stream<DynamicTest> cases() throws Exception {
        Map<String, Object> doc = new ObjectMapper().readValue(
                new File(TestServer.repo().resolve("clients/conformance.json").toString()), Map.class);
        List<Map<String, Object>> cases = (List<Map<String, Object>>) doc.get("cases");
        return cases.stream().map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> run(c)));
    }

    /** The deliveries of the latest pops, for ack / nack / extend by queue and body. */
    private final List<Delivery> popped = new ArrayList<>();

    @SuppressWarnings("unchecked")
    private void run(Map<String, Object> testCase) {
        rmq.redis().call("FLUSHALL");
        popped.clear();
        int i = 0;
        for (Map<String, Object> step : (List<Map<String, Object>>) testCase.get("steps")) {
            String where = "step " + i++ + " " + step;
            Object reply;
            try {
                reply = normalize(call(step));
            } catch (Exception e) {
                if (step.containsKey("expect_error")) {
                    String want = (String) step.get("expect_error");
                    assertTrue(String.valueOf(e.getMessage()).contains(want),
                            where + ": error " + e + " does not contain " + want);
                    continue;
                }
                throw new AssertionError(where + ": " + e, e);
            }
            if (step.containsKey("expect_error")) {
                fail(where + ": expected an error, got " + reply);
            }
            if (step.containsKey("expect")) {
                assertEquals(normalize(step.get("expect")), reply, where);
            }
            if (step.containsKey("expect_has")) {
                Map<String, Object> got = (Map<String, Object>) reply;
                ((Map<String, Object>) step.get("expect_has")).forEach((k, v) ->
                        assertEquals(normalize(v), got.get(k), where + ": field " + k + " of " + got));
                ((Map<String, Object>) step.get("expect_has")).keySet().forEach(k ->
                        assertTrue(got.containsKey(k), where + ": no field " + k));
            }
            if (step.containsKey("expect_type")) {
                assertInstanceOf(Long.class, reply, where);
            }
            if (step.containsKey("expect_len")) {
                List<Object> range = (List<Object>) step.get("expect_len");
                int n = ((List<Object>) reply).size();
                assertTrue(n >= ((Number) range.get(0)).intValue() && n <= ((Number) range.get(1)).intValue(),
                        where + ": " + n + " entries");
            }
            if (step.containsKey("expect_queues")) {
                Map<String, Object> counts = new LinkedHashMap<>();
                for (Object m : (List<Object>) reply) {
                    counts.merge((String) ((List<Object>) m).get(0), 1L, (a, b) -> (Long) a + (Long) b);
                }
                assertEquals(normalize(step.get("expect_queues")), counts, where);
            }
        }
    }

    @SuppressWarnings("unchecked")
    private Object call(Map<String, Object> step) throws Exception {
        String call = (String) step.get("call");
        List<Object> args = (List<Object>) step.getOrDefault("args", List.of());
        Map<String, Object> opt = (Map<String, Object>) step.getOrDefault("options", Map.of());
        if (call.equals("route")) {
            return Topic.route((String) args.get(0), ((Number) args.get(1)).intValue(), (String) args.get(2));
        }
        String[] on = ((String) step.get("on")).split(" ");
        Target target = on[0].equals("queue") ? rmq.queue(on[1]) : rmq.topic(on[1], Integer.parseInt(on[2]));
        switch (call) {
            case "push": {
                List<Message> msgs = new ArrayList<>();
                for (Object body : args) {
                    msgs.add(message((String) body, opt, List.of("range", "priority", "at", "delay")));
                }
                return durable(opt) == null ? target.push(msgs) : target.push(durable(opt), msgs);
            }
            case "pop": {
                int count = ((Number) opt.getOrDefault("count", 1)).intValue();
                Duration lease = ms(opt.get("lease_ms"));
                Duration block = ms(opt.get("block_ms"));
                Integer quantum = opt.containsKey("quantum") ? ((Number) opt.get("quantum")).intValue() : null;
                List<Delivery> got;
                if (durable(opt) != null) {
                    got = ((Queue) target).pop(count, lease, block, durable(opt));
                } else if (target instanceof Queue) {
                    got = ((Queue) target).pop(count, lease, block);
                } else {
                    got = ((Topic) target).pop(count, lease, block, quantum);
                }
                popped.addAll(0, got);
                List<Object> out = new ArrayList<>();
                got.forEach(d -> out.add(List.of(d.queue(), d.body(), d.deliveries())));
                return out;
            }
            case "ack":
                return durable(opt) == null ? delivery(target, args).ack() : delivery(target, args).ack(durable(opt));
            case "nack":
                if (Boolean.TRUE.equals(opt.get("dead"))) {
                    return delivery(target, args).dead();
                }
                return opt.containsKey("delay_ms") ? delivery(target, args).nack(ms(opt.get("delay_ms")))
                        : delivery(target, args).nack();
            case "extend": {
                Instant until = delivery(target, args).extend(ms(args.get(1)));
                return until == null ? null : until.toEpochMilli();
            }
            case "info":
                return target instanceof Queue ? ((Queue) target).info().fields() : ((Topic) target).info().fields();
            case "set_policy": {
                Policy p = target.policy();
                opt.forEach((k, v) -> {
                    long n = ((Number) v).longValue();
                    switch (k) {
                        case "retries": p.retries(n); break;
                        case "lease_ms": p.lease(Duration.ofMillis(n)); break;
                        case "max_queue_length": p.maxQueueLength(n); break;
                        case "backoff_ms": p.backoff(Duration.ofMillis(n)); break;
                        case "backoff_max_ms": p.backoffMax(Duration.ofMillis(n)); break;
                        case "rate": p.rate(n); break;
                        case "rate_window_ms": p.rateWindow(Duration.ofMillis(n)); break;
                        case "paused": p.paused(n != 0); break;
                        case "journal": p.journal(n); break;
                        default: throw new IllegalArgumentException("unknown policy field " + k);
                    }
                });
                p.apply();
                return null;
            }
            case "trace": {
                Queue q = (Queue) target;
                List<JournalEntry> entries = opt.containsKey("count")
                        ? q.trace((String) args.get(0), ((Number) opt.get("count")).intValue())
                        : q.trace((String) args.get(0));
                return entries;
            }
            case "policy":
                return target instanceof Queue ? ((Queue) target).currentPolicy() : target.policies();
            case "reset_policy":
                return target.resetPolicy();
            case "pause":
                target.pause();
                return null;
            case "resume":
                target.resume();
                return null;
            case "purge":
                return target.purge(Boolean.TRUE.equals(opt.get("dead")));
            case "drop":
                return target.drop();
            case "replay":
                return args.isEmpty() ? target.replay() : target.replay(((Number) args.get(0)).longValue());
            case "queue_for":
                return ((Topic) target).queueFor((String) args.get(0));
            case "schedule": {
                Schedule when = opt.containsKey("every") ? Schedule.every(ms(opt.get("every")))
                        : Schedule.cron((String) opt.get("cron"));
                if (opt.containsKey("tz")) {
                    when.zone(ZoneId.of((String) opt.get("tz")));
                }
                if (opt.containsKey("start")) {
                    when.start(Instant.ofEpochMilli(((Number) opt.get("start")).longValue()));
                }
                if (opt.containsKey("end")) {
                    when.end(Instant.ofEpochMilli(((Number) opt.get("end")).longValue()));
                }
                if (opt.containsKey("times")) {
                    when.times(((Number) opt.get("times")).longValue());
                }
                Message m = message((String) args.get(1), opt, List.of("range", "priority", "delay"));
                return target.schedule((String) args.get(0), when, m).toEpochMilli();
            }
            case "schedules": {
                List<Object> out = new ArrayList<>();
                for (ScheduleEntry e : target.schedules()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("queue", e.queue());
                    m.put("name", e.name());
                    m.put("spec", e.spec());
                    m.put("next", e.next() == null ? null : e.next().toEpochMilli());
                    m.put("fired", e.fired());
                    m.put("last", e.last() == null ? null : e.last().toEpochMilli());
                    out.add(m);
                }
                return out;
            }
            case "unschedule":
                return target.unschedule(args.toArray(new String[0]));
            default:
                throw new AssertionError("the Java client has no mapping for call " + call);
        }
    }

    /**
     * A message with the step's mode. The Java API takes the mode as the message's class,
     * so "no mode" or "two modes" cannot be written in Java; such steps are refused here with
     * the check's wording, as they would be by a client whose API could express them.
     */
    private static Message message(String body, Map<String, Object> opt, List<String> modes) {
        List<String> given = new ArrayList<>();
        for (String k : modes) {
            if (opt.containsKey(k)) {
                given.add(k);
            }
        }
        if (given.size() != 1) {
            throw new IllegalArgumentException("needs exactly one of " + String.join(", ", modes));
        }
        long v = ((Number) opt.get(given.get(0))).longValue();
        Message m;
        switch (given.get(0)) {
            case "range": m = RangeMergeMessage.of(body, Duration.ofMillis(v)); break;
            case "priority": m = PriorityMessage.of(body, v); break;
            case "at": m = FixedTimeMessage.at(Instant.ofEpochMilli(v), body); break;
            default: m = FixedTimeMessage.after(Duration.ofMillis(v), body); break;
        }
        if (opt.containsKey("group")) {
            m = m.group((String) opt.get("group"));
        }
        if (opt.containsKey("basis")) {
            m = m.basis((String) opt.get("basis"));
        }
        return m;
    }

    /** The step's durable option: null when absent; 0 is "none" (Durable.NONE). */
    private static Durable durable(Map<String, Object> opt) {
        if (!opt.containsKey("durable")) {
            return null;
        }
        int n = ((Number) opt.get("durable")).intValue();
        return n == 0 ? Durable.NONE : Durable.replicas(n);
    }

    private Delivery delivery(Target target, List<Object> args) {
        String body = (String) args.get(0);
        for (Delivery d : popped) {
            if (d.body().equals(body) && target.queues().contains(d.queue())) {
                return d;
            }
        }
        throw new AssertionError("no popped delivery " + body);
    }

    private static Duration ms(Object v) {
        return v == null ? null : Duration.ofMillis(((Number) v).longValue());
    }

    /** JSON-like values: numbers as Long, bytes as text, lists and maps element by element. */
    @SuppressWarnings("unchecked")
    static Object normalize(Object v) {
        if (v instanceof Number) {
            return ((Number) v).longValue();
        }
        if (v instanceof byte[]) {
            return Replies.text(v);
        }
        if (v instanceof List) {
            List<Object> out = new ArrayList<>();
            ((List<Object>) v).forEach(x -> out.add(normalize(x)));
            return out;
        }
        if (v instanceof Map) {
            Map<String, Object> out = new LinkedHashMap<>();
            ((Map<String, Object>) v).forEach((k, x) -> out.put(k, normalize(x)));
            return out;
        }
        return v;
    }
}
