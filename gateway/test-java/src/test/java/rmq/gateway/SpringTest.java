package rmq.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.awspring.cloud.sqs.annotation.SqsListener;
import io.awspring.cloud.sqs.operations.SqsTemplate;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.test.annotation.DirtiesContext;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/**
 * A Spring Boot 3 app with Spring Cloud AWS against the gateway: @SqsListener on a standard
 * and a FIFO queue (acknowledged on success, received again after the visibility timeout
 * when the handler throws), SqsTemplate sends. Spring's own SQS client is pointed at the
 * gateway with the properties a user would set.
 */
@ExtendWith(Servers.class)
@SpringBootTest(classes = SpringTest.App.class)
@DirtiesContext(classMode = DirtiesContext.ClassMode.AFTER_CLASS) // closed before the servers stop
class SpringTest {
    static final String STANDARD = "spring-standard";
    static final String FIFO = "spring-orders.fifo";

    @Configuration
    @EnableAutoConfiguration
    static class App {
        @Bean
        Listeners listeners() {
            return new Listeners();
        }
    }

    /** What the listeners saw: attempts per body (with when), the FIFO queue's order. */
    static class Listeners {
        final Map<String, List<Long>> attempts = new ConcurrentHashMap<>();
        final List<String> handled = new CopyOnWriteArrayList<>();
        final List<String> fifo = new CopyOnWriteArrayList<>();

        @SqsListener(STANDARD)
        void standard(String body) {
            List<Long> times = attempts.computeIfAbsent(body, k -> new CopyOnWriteArrayList<>());
            times.add(System.nanoTime());
            if (body.startsWith("fail-once") && times.size() == 1) {
                throw new IllegalStateException("the first attempt fails: " + body);
            }
            handled.add(body);
        }

        @SqsListener(FIFO)
        void orders(String body) {
            fifo.add(body);
        }
    }

    @DynamicPropertySource
    static void gateway(DynamicPropertyRegistry props) throws Exception {
        Servers servers = Servers.get();
        // The queues exist before the listeners start (a 2 s visibility timeout for redelivery).
        SqsClient sqs = servers.sqs();
        sqs.createQueue(b -> b.queueName(STANDARD).attributes(Map.of(QueueAttributeName.VISIBILITY_TIMEOUT, "2")));
        sqs.createQueue(b -> b.queueName(FIFO).attributes(Map.of(QueueAttributeName.FIFO_QUEUE, "true",
                QueueAttributeName.VISIBILITY_TIMEOUT, "2")));
        // README:spring begin
        props.add("spring.cloud.aws.sqs.endpoint", servers::url);
        props.add("spring.cloud.aws.region.static", () -> "us-east-1");
        props.add("spring.cloud.aws.credentials.access-key", () -> "local");
        props.add("spring.cloud.aws.credentials.secret-key", () -> "local");
        // README:spring end
        // Short polls, so that the listeners stop quickly when the context closes.
        props.add("spring.cloud.aws.sqs.listener.poll-timeout", () -> "2s");
    }

    @Autowired
    SqsTemplate template;

    @Autowired
    Listeners listeners;

    static void await(BooleanSupplier done, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(50);
        }
    }

    static boolean empty(String queue) {
        try {
            SqsClient sqs = Servers.get().sqs();
            String url = sqs.getQueueUrl(b -> b.queueName(queue)).queueUrl();
            Map<QueueAttributeName, String> a = sqs.getQueueAttributes(b -> b.queueUrl(url)
                    .attributeNames(QueueAttributeName.ALL)).attributes();
            return a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES).equals("0")
                    && a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE).equals("0");
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** The README's application.properties are the properties set above. */
    @Test
    void readmeProperties() throws Exception {
        Pattern add = Pattern.compile("props\\.add\\(\"([^\"]+)\", (?:servers::url|\\(\\) -> \"([^\"]*)\")\\);");
        List<String> want = new ArrayList<>();
        for (String line : Readme.snippet("spring", Path.of("src/test/java/rmq/gateway/SpringTest.java"))) {
            Matcher m = add.matcher(line);
            assertTrue(m.matches(), line);
            want.add(m.group(1) + "=" + (m.group(2) == null ? "http://127.0.0.1:9324" : m.group(2)));
        }
        String readme = Files.readString(Path.of(System.getProperty("rmq.repo", "../..")).resolve("docs/gateway.md"));
        assertTrue(readme.contains(String.join("\n", want) + "\n"), "docs/gateway.md lacks " + want);
    }

    @Test
    void listenerAcknowledgesOnSuccessAndRedeliversAfterAnException() throws Exception {
        template.send(STANDARD, "ok-1");
        template.send(to -> to.queue(STANDARD).payload("fail-once-1"));
        await(() -> listeners.handled.containsAll(List.of("ok-1", "fail-once-1")), "both messages handled");
        assertEquals(1, listeners.attempts.get("ok-1").size());
        List<Long> failing = listeners.attempts.get("fail-once-1");
        assertEquals(2, failing.size());
        // Not acknowledged after the exception: received again once its 2 s visibility ran out.
        long gapMs = TimeUnit.NANOSECONDS.toMillis(failing.get(1) - failing.get(0));
        assertTrue(gapMs >= 1500, "redelivered after " + gapMs + " ms");
        // Both acknowledged (deleted) once handled: the queue empties and stays so.
        await(() -> empty(STANDARD), "the standard queue to empty");
        Thread.sleep(2500);
        assertEquals(1, listeners.attempts.get("ok-1").size());
        assertEquals(2, listeners.attempts.get("fail-once-1").size());
    }

    @Test
    void fifoListenerGetsEachGroupInOrder() throws Exception {
        for (int i = 0; i < 6; i++) {
            int n = i;
            template.send(to -> to.queue(FIFO).payload("order-" + n).messageGroupId("customer-" + (n % 2))
                    .messageDeduplicationId("d" + n));
        }
        // A duplicate (same deduplication id) is accepted and not delivered.
        template.send(to -> to.queue(FIFO).payload("order-0 again").messageGroupId("customer-0")
                .messageDeduplicationId("d0"));
        await(() -> listeners.fifo.size() >= 6, "six FIFO messages");
        assertEquals(List.of("order-0", "order-2", "order-4"),
                listeners.fifo.stream().filter(s -> List.of("order-0", "order-2", "order-4").contains(s)).toList());
        assertEquals(List.of("order-1", "order-3", "order-5"),
                listeners.fifo.stream().filter(s -> List.of("order-1", "order-3", "order-5").contains(s)).toList());
        await(() -> empty(FIFO), "the FIFO queue to empty");
        assertEquals(6, listeners.fifo.size());
    }
}
