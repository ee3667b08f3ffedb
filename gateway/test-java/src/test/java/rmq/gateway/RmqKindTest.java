package rmq.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.Message;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchRequestEntry;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchResponse;
import software.amazon.awssdk.services.sqs.model.SendMessageResponse;
import software.amazon.awssdk.services.sqs.model.SqsException;

/**
 * RMQ's own semantics through the AWS SDK for Java v2, which checks the MD5s of every send
 * and receive: the CreateQueue tag rmq:kind, the message attributes rmq.priority, rmq.range
 * and rmq.at (in the send's MD5, which covers what the SDK sent; not received, so not in the
 * receive's), merging by body, and the refusals.
 */
@ExtendWith(Servers.class)
class RmqKindTest {
    static Servers servers;
    static SqsClient sqs;

    @BeforeAll
    static void setUp() throws Exception {
        servers = Servers.get();
        sqs = servers.sqs();
    }

    static String queue(String prefix, String kind) {
        String name = SdkTest.name(prefix);
        return sqs.createQueue(b -> b.queueName(name).tags(Map.of("rmq:kind", kind))).queueUrl();
    }

    static MessageAttributeValue num(long v) {
        return MessageAttributeValue.builder().dataType("Number").stringValue(Long.toString(v)).build();
    }

    static MessageAttributeValue text(String v) {
        return MessageAttributeValue.builder().dataType("String").stringValue(v).build();
    }

    static List<Message> receive(String url, int wait) {
        return sqs.receiveMessage(b -> b.queueUrl(url).maxNumberOfMessages(10).waitTimeSeconds(wait)
                .messageAttributeNames("All")).messages();
    }

    static long serverMs() throws Exception {
        String[] t = servers.redis("TIME").replaceAll("[\\[\\] ]", "").split(",");
        return Long.parseLong(t[0]) * 1000 + Long.parseLong(t[1]) / 1000;
    }

    static String attribute(String url, QueueAttributeName name) {
        return sqs.getQueueAttributes(b -> b.queueUrl(url).attributeNames(name)).attributes().get(name);
    }

    @Test
    void priorityQueueServesHighestFirstAndMergesByBody() {
        String url = queue("prio", "priority");
        assertEquals("priority", sqs.getQueueAttributes(b -> b.queueUrl(url).attributeNamesWithStrings("RmqKind"))
                .attributesAsStrings().get("RmqKind"));
        assertEquals(Map.of("rmq:kind", "priority"), sqs.listQueueTags(b -> b.queueUrl(url)).tags());
        // The SDK checks each reply's MD5 against the attributes it sent, rmq.priority included.
        SendMessageResponse low = sqs.sendMessage(b -> b.queueUrl(url).messageBody("low")
                .messageAttributes(Map.of("rmq.priority", num(1), "tier", text("bronze"))));
        sqs.sendMessage(b -> b.queueUrl(url).messageBody("high").messageAttributes(Map.of("rmq.priority", num(9))));
        sqs.sendMessage(b -> b.queueUrl(url).messageBody("plain"));
        SendMessageResponse again = sqs.sendMessage(b -> b.queueUrl(url).messageBody("low")
                .messageAttributes(Map.of("rmq.priority", num(20))));
        assertEquals(low.messageId(), again.messageId(), "merged into the waiting message");
        SendMessageBatchResponse batch = sqs.sendMessageBatch(b -> b.queueUrl(url).entries(
                SendMessageBatchRequestEntry.builder().id("a").messageBody("twice")
                        .messageAttributes(Map.of("rmq.priority", num(5))).build(),
                SendMessageBatchRequestEntry.builder().id("b").messageBody("twice")
                        .messageAttributes(Map.of("rmq.priority", num(6))).build()));
        assertEquals(2, batch.successful().size());
        assertEquals(batch.successful().get(0).messageId(), batch.successful().get(1).messageId());
        // The SDK checks each received MD5 against the attributes it got: no rmq.priority.
        List<Message> got = receive(url, 20);
        assertEquals(List.of("low", "high", "twice", "plain"), got.stream().map(Message::body).collect(Collectors.toList()));
        assertEquals(Map.of("tier", text("bronze")), got.get(0).messageAttributes());
        assertEquals(low.messageId(), got.get(0).messageId());
        assertTrue(got.get(1).messageAttributes().isEmpty());
    }

    @Test
    void rangeQueueMergesABurstIntoOneDelivery() throws Exception {
        String url = queue("range", "range");
        long t0 = serverMs();
        Set<String> ids = new HashSet<>();
        for (int i = 0; i < 5; i++) {
            ids.add(sqs.sendMessage(b -> b.queueUrl(url).messageBody("reindex 7")
                    .messageAttributes(Map.of("rmq.range", num(1500)))).messageId());
        }
        assertEquals(1, ids.size());
        assertEquals("1", attribute(url, QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_DELAYED));
        List<Message> got = receive(url, 20);
        assertEquals(List.of("reindex 7"), got.stream().map(Message::body).collect(Collectors.toList()));
        assertTrue(serverMs() >= t0 + 1500, "due a range after the first send");
        assertTrue(receive(url, 0).isEmpty());
    }

    @Test
    void rmqAtPlacesAMessageFarAhead() throws Exception {
        String url = sqs.createQueue(b -> b.queueName(SdkTest.name("at"))).queueUrl();
        long now = serverMs();
        sqs.sendMessage(b -> b.queueUrl(url).messageBody("week").messageAttributes(Map.of("rmq.at", num(now + 7 * 86_400_000L))));
        sqs.sendMessage(b -> b.queueUrl(url).messageBody("soon").messageAttributes(Map.of("rmq.at", num(now + 1500))));
        assertEquals("2", attribute(url, QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_DELAYED));
        List<Message> got = receive(url, 20);
        assertEquals(List.of("soon"), got.stream().map(Message::body).collect(Collectors.toList()));
        assertTrue(got.get(0).messageAttributes().isEmpty());
        assertTrue(serverMs() >= now + 1500);
        assertEquals("1", attribute(url, QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_DELAYED));
    }

    @Test
    void refusals() {
        for (String kind : List.of("lifo", "Priority")) {
            SqsException e = assertThrows(SqsException.class, () -> queue("bad", kind));
            assertEquals("InvalidParameterValue", e.awsErrorDetails().errorCode());
        }
        SqsException fifo = assertThrows(SqsException.class, () -> sqs.createQueue(b -> b.queueName(SdkTest.name("f") + ".fifo")
                .attributesWithStrings(Map.of("FifoQueue", "true")).tags(Map.of("rmq:kind", "range"))));
        assertEquals("InvalidParameterValue", fifo.awsErrorDetails().errorCode());
        String prio = queue("prio", "priority");
        SqsException tag = assertThrows(SqsException.class,
                () -> sqs.tagQueue(b -> b.queueUrl(prio).tags(Map.of("rmq:kind", "fixed"))));
        assertEquals("InvalidParameterValue", tag.awsErrorDetails().errorCode());
        sqs.untagQueue(b -> b.queueUrl(prio).tagKeys("rmq:kind"));
        assertEquals("priority", sqs.getQueueAttributes(b -> b.queueUrl(prio).attributeNames(QueueAttributeName.ALL))
                .attributesAsStrings().get("RmqKind"));
        String fixed = sqs.createQueue(b -> b.queueName(SdkTest.name("fixed"))).queueUrl();
        Map<String, Map<String, MessageAttributeValue>> bad = Map.of(
                fixed, Map.of("rmq.priority", num(1)),
                prio, Map.of("rmq.priority", MessageAttributeValue.builder().dataType("Number").stringValue("2.5").build()));
        bad.forEach((url, attrs) -> {
            SqsException e = assertThrows(SqsException.class,
                    () -> sqs.sendMessage(b -> b.queueUrl(url).messageBody("m").messageAttributes(attrs)));
            assertEquals("InvalidParameterValue", e.awsErrorDetails().errorCode());
        });
        SendMessageBatchResponse r = sqs.sendMessageBatch(b -> b.queueUrl(fixed).entries(IntStream.range(0, 2)
                .mapToObj(i -> SendMessageBatchRequestEntry.builder().id("e" + i).messageBody("m" + i)
                        .messageAttributes(i == 0 ? Map.of("rmq.at", num(1_700_000_000L)) : Map.of()).build())
                .collect(Collectors.toList())));
        assertEquals("InvalidParameterValue", r.failed().get(0).code());
        assertEquals("e1", r.successful().get(0).id());
        assertNotEquals(0, r.successful().get(0).messageId().length());
    }
}
