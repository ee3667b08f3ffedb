package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The three kinds' merge rules through the Java types, read back from the server. */
class MergeRulesTest extends OneServerTest {
    @BeforeEach
    void flush() {
        rmq.redis().call("FLUSHALL");
    }

    private static List<String> bodies(List<Delivery> ds) {
        return ds.stream().map(Delivery::body).collect(Collectors.toList());
    }

    @Test
    void priorityDuplicateTakesTheNewPriority() {
        Queue q = rmq.queue("prio");
        assertEquals(2, q.push(PriorityMessage.of("a", 1), PriorityMessage.of("b", 5)));
        assertEquals(0, q.push(PriorityMessage.of("a", 9)));
        assertEquals(1L, q.info().get("merged"));
        assertEquals("priority", q.info().kind());
        assertEquals(List.of("a", "b"), bodies(q.pop(10, Duration.ofMinutes(1), null)));
    }

    @Test
    void rangeDuplicateMergesAndKeepsItsDueTime() {
        Queue q = rmq.queue("rng");
        assertEquals(1, q.push(RangeMergeMessage.of("sku:1", Duration.ofSeconds(60))));
        Instant due = q.info().nextDue();
        assertEquals(0, q.push(RangeMergeMessage.of("sku:1", Duration.ofSeconds(600))));
        assertEquals(due, q.info().nextDue(), "a merge keeps the first push's due time");
        assertEquals(1, q.info().waiting());
        assertEquals(0, q.info().ready());
        assertEquals("range", q.info().kind());
    }

    @Test
    void fixedDuplicateTakesTheLatestTime() {
        Queue q = rmq.queue("fix");
        Instant later = Instant.parse("2100-01-01T00:00:00Z");
        Instant sooner = Instant.parse("2090-01-01T00:00:00Z");
        assertEquals(1, q.push(FixedTimeMessage.at(later, "job")));
        assertEquals(later, q.info().nextDue());
        assertEquals(0, q.push(FixedTimeMessage.at(sooner, "job")));
        assertEquals(sooner, q.info().nextDue(), "the latest push's time wins");
        assertEquals(0, q.push(FixedTimeMessage.after(Duration.ZERO, "job")));
        assertEquals(1, q.info().ready());
        assertEquals("fixed", q.info().kind());
        assertEquals(List.of("job"), bodies(q.pop(1)));
    }

    @Test
    void aQueueKeepsItsKind() {
        Queue q = rmq.queue("kind");
        q.push(RangeMergeMessage.of("x", Duration.ofSeconds(1)));
        RuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class,
                () -> q.push(PriorityMessage.of("y", 1)));
        assertTrue(e.getMessage().contains("kind"), e.getMessage());
    }
}
