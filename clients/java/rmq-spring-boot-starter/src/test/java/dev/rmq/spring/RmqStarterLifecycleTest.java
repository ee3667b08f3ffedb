package dev.rmq.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rmq.Info;
import dev.rmq.MessageListener;
import dev.rmq.PriorityMessage;
import dev.rmq.RmqClient;
import dev.rmq.TestServer;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

/** Closing the application context stops its workers gracefully: nothing left in flight. */
class RmqStarterLifecycleTest {
    static final AtomicInteger HANDLED = new AtomicInteger();

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class StopApp {
        @Bean
        MessageListener slowListener() {
            return m -> {
                Thread.sleep(50);
                HANDLED.incrementAndGet();
            };
        }
    }

    @Test
    void theWorkersStopWithTheContext() throws Exception {
        try (TestServer server = TestServer.start(); RmqClient rmq = RmqClient.create(server.uri())) {
            for (int i = 0; i < 100; i++) {
                rmq.topic("stopping", 4).push(PriorityMessage.of("job-" + i, 1));
            }
            ConfigurableApplicationContext ctx = new SpringApplicationBuilder(StopApp.class)
                    .properties("rmq.redis-url=" + server.uri(), "rmq.topic=stopping", "rmq.slots=4",
                            "rmq.concurrency=4", "rmq.grace=20s")
                    .run();
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (HANDLED.get() < 10 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertTrue(HANDLED.get() >= 10, "consumed " + HANDLED.get());
            ctx.close();
            Info info = rmq.topic("stopping", 4).info();
            assertEquals(0, info.inflight(), "nothing left in flight");
            assertEquals((long) HANDLED.get(), info.get("acked"), "every handled message acked");
            assertEquals(100 - HANDLED.get(), info.waiting());
            int handled = HANDLED.get();
            Thread.sleep(1500);
            assertEquals(handled, HANDLED.get(), "consumed after the close");
        }
    }
}
