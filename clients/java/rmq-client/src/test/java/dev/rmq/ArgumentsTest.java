package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Every bad argument is refused with IllegalArgumentException before anything is sent. */
class ArgumentsTest extends OneServerTest {
    /** How many RMQ.* commands the server has run (INFO commandstats). */
    private static long rmqCalls() {
        String stats = Replies.text(rmq.redis().call("INFO", "commandstats"));
        long n = 0;
        for (String line : stats.split("\r\n")) {
            if (line.toLowerCase().startsWith("cmdstat_rmq.")) {
                String calls = line.substring(line.indexOf("calls=") + 6);
                n += Long.parseLong(calls.substring(0, calls.indexOf(',')));
            }
        }
        return n;
    }

    @Test
    void badArgumentsAreRefusedBeforeSending() {
        Queue q = rmq.queue("args");
        Topic t = rmq.topic("targs", 4);
        byte[] longGroup = new byte[1025];
        java.util.Arrays.fill(longGroup, (byte) 'g');
        Map<String, Executable> bad = new java.util.LinkedHashMap<>();
        bad.put("empty body", () -> PriorityMessage.of("", 1));
        bad.put("null body", () -> PriorityMessage.of((String) null, 1));
        bad.put("priority too high", () -> PriorityMessage.of("m", 9007199254740993L));
        bad.put("priority too low", () -> PriorityMessage.of("m", -9007199254740993L));
        bad.put("range 0", () -> RangeMergeMessage.of("m", Duration.ZERO));
        bad.put("range negative", () -> RangeMergeMessage.of("m", Duration.ofMillis(-1)));
        bad.put("range sub-ms", () -> RangeMergeMessage.of("m", Duration.ofNanos(1_500_000)));
        bad.put("range too long", () -> RangeMergeMessage.of("m", Duration.ofDays(365L * 200_000)));
        bad.put("at before 2000", () -> FixedTimeMessage.at(Instant.parse("1999-12-31T23:59:59Z"), "m"));
        bad.put("at null", () -> FixedTimeMessage.at(null, "m"));
        bad.put("delay negative", () -> FixedTimeMessage.after(Duration.ofMillis(-5), "m"));
        bad.put("group empty", () -> PriorityMessage.of("m", 1).group(""));
        bad.put("group too long", () -> PriorityMessage.of("m", 1).group(longGroup));
        bad.put("push nothing", () -> q.push());
        bad.put("push null", () -> q.push((Message) null));
        bad.put("pop count 0", () -> q.pop(0));
        bad.put("pop count 10001", () -> q.pop(10_001));
        bad.put("pop lease 0", () -> q.pop(1, Duration.ZERO, null));
        bad.put("pop block negative", () -> q.pop(1, null, Duration.ofMillis(-1)));
        bad.put("tpop quantum 0", () -> t.pop(1, null, null, 0));
        bad.put("replay count 0", () -> q.replay(0));
        bad.put("policy retries 1001", () -> q.policy().retries(1001));
        bad.put("policy lease 0", () -> q.policy().lease(Duration.ZERO));
        bad.put("policy rate negative", () -> q.policy().rate(-1));
        bad.put("policy empty", () -> q.policy().apply());
        bad.put("queue name with brace", () -> rmq.queue("a{b}"));
        bad.put("queue name empty", () -> rmq.queue(""));
        bad.put("slots 3", () -> rmq.topic("t", 3));
        bad.put("schedule every 0", () -> Schedule.every(Duration.ZERO));
        bad.put("schedule times 0", () -> Schedule.every(Duration.ofSeconds(1)).times(0));
        bad.put("schedule tz with every", () -> Schedule.every(Duration.ofSeconds(1)).zone(java.time.ZoneOffset.UTC));
        bad.put("schedule at message", () -> q.schedule("s", Schedule.every(Duration.ofSeconds(1)),
                FixedTimeMessage.at(Instant.now(), "m")));
        bad.put("schedule name empty", () -> q.schedule("", Schedule.every(Duration.ofSeconds(1)), PriorityMessage.of("m", 1)));
        bad.put("unschedule nothing", () -> q.unschedule());
        bad.put("durable 0", () -> Durable.replicas(0));
        bad.put("durable 1001", () -> Durable.replicas(1001));
        bad.put("durable timeout 0", () -> Durable.replicas(1).timeout(Duration.ZERO));
        bad.put("worker concurrency 0", () -> WorkerOptions.builder().concurrency(0));
        bad.put("worker lease 0", () -> WorkerOptions.builder().lease(Duration.ZERO));
        bad.put("worker block 0", () -> WorkerOptions.builder().block(Duration.ZERO));
        bad.put("worker block 61 s", () -> WorkerOptions.builder().block(Duration.ofSeconds(61)));
        bad.put("worker quantum on a queue", () -> rmq.worker(q, m -> { }, WorkerOptions.builder().quantum(2).build()));
        bad.put("extend 0", () -> new Delivery(rmq.redis(), null, "args", "m".getBytes(), 1, 0).extend(Duration.ZERO));
        rmq.redis().call("CONFIG", "RESETSTAT");
        List<String> accepted = new ArrayList<>();
        bad.forEach((what, call) -> {
            try {
                call.execute();
                accepted.add(what);
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage() != null && !e.getMessage().isEmpty(), what);
            } catch (Throwable e) {
                accepted.add(what + " (" + e + ")");
            }
        });
        assertEquals(List.of(), accepted, "accepted, or refused otherwise than by IllegalArgumentException");
        assertEquals(0, rmqCalls(), "a refused call reached the server");
    }

    @Test
    void messagesNameTheBound() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> PriorityMessage.of("m", 1L << 60));
        assertEquals("priority must be in [-9007199254740992, 9007199254740992], got 1152921504606846976", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> rmq.queue("q").pop(0));
        assertEquals("count must be in [1, 10000], got 0", e.getMessage());
    }

    /** Protocol.java is what clients/protocol.json says (gen_protocol.py wrote it). */
    @SuppressWarnings("unchecked")
    @Test
    void protocolIsGeneratedFromProtocolJson() throws Exception {
        Map<String, Object> doc = new ObjectMapper().readValue(
                new File(TestServer.repo().resolve("clients/protocol.json").toString()), Map.class);
        for (String table : List.of("bounds", "policy_fields")) {
            Map<String, long[]> mine = table.equals("bounds") ? Protocol.BOUNDS : Protocol.POLICY_FIELDS;
            Map<String, List<Number>> want = (Map<String, List<Number>>) doc.get(table);
            assertEquals(want.keySet(), mine.keySet(), table);
            want.forEach((k, v) -> {
                assertEquals(v.get(0).longValue(), mine.get(k)[0], k);
                assertEquals(v.get(1).longValue(), mine.get(k)[1], k);
            });
        }
    }
}
