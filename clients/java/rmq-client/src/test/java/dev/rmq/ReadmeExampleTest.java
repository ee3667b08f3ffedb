package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;

/** The README's example, as written there (the URI is this test's server). */
class ReadmeExampleTest {
    @Test
    void theReadmeExampleRuns() throws Exception {
        try (TestServer server = TestServer.start()) {
            // --- README example: begin (README.md and clients/java/README.md; tests/test_doc_examples.py compares)
            Map<String, Long> handled = new ConcurrentHashMap<>();
            RmqClient rmq = RmqClient.create(server.uri());       // or rediss://, or a cluster URI list
            Topic orders = rmq.topic("orders", 16);
            orders.push(PriorityMessage.of("order-1001:paid", 5).group("order-1001"));
            orders.push(FixedTimeMessage.at(Instant.now().plus(Duration.ofMinutes(15)), "order-1002:timeout"));
            orders.push(RangeMergeMessage.of("sku:1001", Duration.ofSeconds(5)));
            orders.policy().retries(5).backoff(Duration.ofSeconds(1)).apply();
            Worker w = rmq.worker(orders, msg -> {
                handled.put(msg.body(), msg.deliveries());       // msg.body(), msg.queue(), msg.deliveries(), msg.extend(Duration)
            }, WorkerOptions.builder().concurrency(8).lease(Duration.ofSeconds(30)).build());
            w.start();   // w.close(): graceful stop, nothing left in flight
            // --- README example: end
            try {
                Wait.until("the paid order and the merged sku", Duration.ofSeconds(60),
                        () -> handled.containsKey("order-1001:paid") && handled.containsKey("sku:1001"));
            } finally {
                w.close();
            }
            assertEquals(Map.of("order-1001:paid", 1L, "sku:1001", 1L), handled, "the timeout is 15 minutes away");
            Info info = orders.info();
            assertEquals(1, info.waiting());
            assertEquals(0, info.inflight());
            assertTrue(orders.policies().values().stream().allMatch(p -> p.get("retries").equals(5L)));
            rmq.close();
        }
    }
}
