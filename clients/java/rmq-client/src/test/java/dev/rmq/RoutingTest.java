package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** queueFor is computed locally; it must name the queue RMQ.ROUTE names, for any bytes. */
class RoutingTest extends OneServerTest {
    @Test
    void queueForMatchesRoute() {
        Random random = new Random(43);
        for (int slots : new int[] {1, 2, 8, 16, 1024, 16384}) {
            Topic t = rmq.topic("t", slots);
            for (int i = 0; i < 200; i++) {
                byte[] basis = new byte[1 + random.nextInt(40)];
                random.nextBytes(basis);
                Object routed = rmq.redis().call("RMQ.ROUTE", "t", slots, basis);
                assertEquals(Replies.text(routed), t.queueFor(basis), "slots " + slots);
            }
        }
        assertEquals("orders_13", rmq.topic("orders", 16).queueFor("item:42"));
    }

    @Test
    void pushGoesWhereQueueForSays() {
        Topic t = rmq.topic("where", 8);
        t.push(PriorityMessage.of("a-body", 1), PriorityMessage.of("g-body", 1).group("grp"),
                PriorityMessage.of("b-body", 1).basis("bss"));
        java.util.Map<String, String> queueOf = new java.util.HashMap<>();
        for (String q : t.queues()) {
            rmq.queue(q).pop(10, java.time.Duration.ofMinutes(1), null).forEach(d -> queueOf.put(d.body(), q));
        }
        assertEquals(java.util.Map.of("a-body", t.queueFor("a-body"), "g-body", t.queueFor("grp"),
                "b-body", t.queueFor("bss")), queueOf);
    }

    @Test
    void slotsMustBeAPowerOfTwo() {
        assertThrows(IllegalArgumentException.class, () -> rmq.topic("t", 3));
        assertThrows(IllegalArgumentException.class, () -> rmq.topic("t", 0));
        assertThrows(IllegalArgumentException.class, () -> rmq.topic("t", 32768));
    }
}
