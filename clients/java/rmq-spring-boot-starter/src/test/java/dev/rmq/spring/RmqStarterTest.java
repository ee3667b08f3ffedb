package dev.rmq.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rmq.Delivery;
import dev.rmq.MessageListener;
import dev.rmq.PriorityMessage;
import dev.rmq.RmqClient;
import dev.rmq.TestServer;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.actuate.health.Status;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** An application whose listener method and MessageListener bean consume, with health and metrics. */
@SpringBootTest(classes = RmqStarterTest.App.class, properties = {
    "rmq.topic=beans", "rmq.slots=4", "rmq.concurrency=4", "rmq.lease=10s", "rmq.grace=20s"})
@DirtiesContext
class RmqStarterTest {
    static final TestServer SERVER = start();

    static TestServer start() {
        try {
            return TestServer.start();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry registry) {
        registry.add("rmq.redis-url", SERVER::uri);
    }

    @AfterAll
    static void stopServer() {
        SERVER.close();
    }

    static final Set<String> ANNOTATED = ConcurrentHashMap.newKeySet();
    static final Set<String> BEAN = ConcurrentHashMap.newKeySet();

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class App {
        @Bean
        MeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }

        @Bean
        Orders orders() {
            return new Orders();
        }

        @Bean
        MessageListener beanListener() {
            return m -> {
                Thread.sleep(5);
                BEAN.add(m.body());
            };
        }
    }

    static class Orders {
        @RmqListener(topic = "orders", slots = 16, concurrency = 8)
        void onOrder(String body) {
            ANNOTATED.add(body);
        }

        @RmqListener(queue = "audit")
        void onAudit(Delivery d) throws Exception {
            throw new dev.rmq.DeadLetter("audit records are refused: " + d.body());
        }
    }

    @Autowired
    RmqClient rmq;
    @Autowired
    RmqWorkers workers;
    @Autowired
    RmqHealthIndicator health;
    @Autowired
    MeterRegistry meters;

    @Test
    void listenersConsumeWithHealthAndMetrics() throws Exception {
        assertEquals(3, workers.workers().size());
        for (int i = 0; i < 200; i++) {
            rmq.topic("orders", 16).push(PriorityMessage.of("order-" + i, 1));
            rmq.topic("beans", 4).push(PriorityMessage.of("bean-" + i, 1));
        }
        rmq.queue("audit").push(PriorityMessage.of("a1", 1));
        long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
        while ((ANNOTATED.size() < 200 || BEAN.size() < 100 || rmq.queue("audit").info().dead() < 1)
                && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(200, ANNOTATED.size());
        assertTrue(BEAN.size() >= 100);
        assertEquals(1, rmq.queue("audit").info().dead());
        assertEquals(Status.UP, health.health().getStatus());
        assertEquals(200, meters.get("rmq.worker.completed").tag("worker", "Orders.onOrder").timer().count());
        assertEquals(1.0, meters.get("rmq.worker.failed").tag("worker", "Orders.onAudit").counter().count());
    }
}
