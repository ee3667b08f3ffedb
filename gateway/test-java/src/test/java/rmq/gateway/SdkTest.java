package rmq.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.SdkBytes;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.BatchEntryIdsNotDistinctException;
import software.amazon.awssdk.services.sqs.model.ChangeMessageVisibilityBatchResponse;
import software.amazon.awssdk.services.sqs.model.DeleteMessageBatchResponse;
import software.amazon.awssdk.services.sqs.model.ListMessageMoveTasksResultEntry;
import software.amazon.awssdk.services.sqs.model.Message;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeName;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeNameForSends;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeValue;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;
import software.amazon.awssdk.services.sqs.model.QueueDoesNotExistException;
import software.amazon.awssdk.services.sqs.model.QueueNameExistsException;
import software.amazon.awssdk.services.sqs.model.ReceiptHandleIsInvalidException;
import software.amazon.awssdk.services.sqs.model.ReceiveMessageResponse;
import software.amazon.awssdk.services.sqs.model.ResourceNotFoundException;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchResponse;
import software.amazon.awssdk.services.sqs.model.SendMessageResponse;
import software.amazon.awssdk.services.sqs.model.SqsException;
import software.amazon.awssdk.services.sqs.model.TooManyEntriesInBatchRequestException;

/**
 * Every action of the gateway's contract through the AWS SDK for Java v2, which checks
 * MD5OfMessageBody, MD5OfMessageAttributes and MD5OfMessageSystemAttributes of every send
 * and receive (a mismatch throws). One gateway for the class; each test its own queues.
 */
@ExtendWith(Servers.class)
class SdkTest {
    static Servers servers;
    static SqsClient sqs;
    static final AtomicInteger names = new AtomicInteger();

    @BeforeAll
    static void setUp() throws Exception {
        servers = Servers.get();
        sqs = servers.sqs();
    }

    static String name(String prefix) {
        return prefix + "-" + names.incrementAndGet();
    }

    static String arn(String queue) {
        return "arn:aws:sqs:us-east-1:000000000000:" + queue;
    }

    static List<Message> receive(String url, int max, int visibility) {
        return sqs.receiveMessage(b -> b.queueUrl(url).maxNumberOfMessages(max).visibilityTimeout(visibility)
                .waitTimeSeconds(20).messageAttributeNames("All")
                .messageSystemAttributeNames(MessageSystemAttributeName.ALL)).messages();
    }

    /** Receives until `n` messages came (or 30 s passed), deleting none. */
    static List<Message> receiveN(String url, int n, int visibility) {
        List<Message> got = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (got.size() < n && System.nanoTime() < deadline) {
            got.addAll(receive(url, Math.min(10, n - got.size()), visibility));
        }
        return got;
    }

    static Map<QueueAttributeName, String> attrs(String url) {
        return sqs.getQueueAttributes(b -> b.queueUrl(url).attributeNames(QueueAttributeName.ALL)).attributes();
    }

    /** The README's example, as it is written there (between the README markers). */
    @Test
    void readmeExample() throws Exception {
        String endpoint = servers.url();
        // README:java begin
        SqsClient sqs = SqsClient.builder().endpointOverride(URI.create(endpoint))
            .region(Region.US_EAST_1)
            .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("local", "local")))
            .build();
        String url = sqs.createQueue(b -> b.queueName("orders")).queueUrl();
        sqs.sendMessage(b -> b.queueUrl(url).messageBody("order 42"));
        sqs.receiveMessage(b -> b.queueUrl(url).waitTimeSeconds(20)).messages()
           .forEach(m -> sqs.deleteMessage(b -> b.queueUrl(url).receiptHandle(m.receiptHandle())));
        // README:java end
        assertTrue(url.endsWith("/000000000000/orders"));
        Map<QueueAttributeName, String> a = attrs(url);
        assertEquals("0", a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES));
        assertEquals("0", a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE));
        assertEquals("1", servers.redis("GET", "seq{orders}"));
        assertTrue(Readme.contains("java", Path.of("src/test/java/rmq/gateway/SdkTest.java")),
                "docs/gateway.md's Java example is not the one tested here");
    }

    @Test
    void queueLifecycleListsAndTags() {
        String prefix = name("life");
        String url = sqs.createQueue(b -> b.queueName(prefix + "-orders").tags(Map.of("team", "a"))).queueUrl();
        assertEquals(servers.url() + "/000000000000/" + prefix + "-orders", url);
        // The same attributes again: the same queue; different ones: QueueNameExists.
        assertEquals(url, sqs.createQueue(b -> b.queueName(prefix + "-orders")).queueUrl());
        assertThrows(QueueNameExistsException.class, () -> sqs.createQueue(b -> b.queueName(prefix + "-orders")
                .attributes(Map.of(QueueAttributeName.VISIBILITY_TIMEOUT, "5"))));
        assertEquals(url, sqs.getQueueUrl(b -> b.queueName(prefix + "-orders")).queueUrl());
        String other = sqs.createQueue(b -> b.queueName(prefix + "-other")).queueUrl();
        String third = sqs.createQueue(b -> b.queueName(prefix + "-third")).queueUrl();
        assertEquals(List.of(other), sqs.listQueues(b -> b.queueNamePrefix(prefix + "-oth")).queueUrls());
        // MaxResults + NextToken, followed by the SDK's paginator.
        List<String> paged = sqs.listQueuesPaginator(b -> b.queueNamePrefix(prefix).maxResults(1)).queueUrls()
                .stream().collect(Collectors.toList());
        assertEquals(List.of(url, other, third), paged);
        assertEquals(Map.of("team", "a"), sqs.listQueueTags(b -> b.queueUrl(url)).tags());
        sqs.tagQueue(b -> b.queueUrl(url).tags(Map.of("env", "dev")));
        sqs.untagQueue(b -> b.queueUrl(url).tagKeys("team"));
        assertEquals(Map.of("env", "dev"), sqs.listQueueTags(b -> b.queueUrl(url)).tags());
        sqs.deleteQueue(b -> b.queueUrl(url));
        assertThrows(QueueDoesNotExistException.class, () -> sqs.getQueueUrl(b -> b.queueName(prefix + "-orders")));
        assertThrows(QueueDoesNotExistException.class, () -> sqs.sendMessage(b -> b.queueUrl(url).messageBody("x")));
        assertEquals(List.of(other, third), sqs.listQueues(b -> b.queueNamePrefix(prefix)).queueUrls());
    }

    @Test
    void queueAttributesGetAndSet() {
        String q = name("attrs");
        String url = sqs.createQueue(b -> b.queueName(q).attributes(Map.of(
                QueueAttributeName.VISIBILITY_TIMEOUT, "45", QueueAttributeName.DELAY_SECONDS, "0",
                QueueAttributeName.RECEIVE_MESSAGE_WAIT_TIME_SECONDS, "0"))).queueUrl();
        Map<QueueAttributeName, String> a = attrs(url);
        assertEquals("45", a.get(QueueAttributeName.VISIBILITY_TIMEOUT));
        assertEquals(arn(q), a.get(QueueAttributeName.QUEUE_ARN));
        assertEquals("1048576", a.get(QueueAttributeName.MAXIMUM_MESSAGE_SIZE));
        assertEquals("0", a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES));
        assertNotNull(a.get(QueueAttributeName.CREATED_TIMESTAMP));
        sqs.setQueueAttributes(b -> b.queueUrl(url).attributes(Map.of(
                QueueAttributeName.VISIBILITY_TIMEOUT, "7", QueueAttributeName.DELAY_SECONDS, "600",
                QueueAttributeName.MESSAGE_RETENTION_PERIOD, "3600")));
        a = sqs.getQueueAttributes(b -> b.queueUrl(url).attributeNames(QueueAttributeName.VISIBILITY_TIMEOUT,
                QueueAttributeName.DELAY_SECONDS, QueueAttributeName.MESSAGE_RETENTION_PERIOD)).attributes();
        assertEquals(Map.of(QueueAttributeName.VISIBILITY_TIMEOUT, "7", QueueAttributeName.DELAY_SECONDS, "600",
                QueueAttributeName.MESSAGE_RETENTION_PERIOD, "3600"), a);
        // The queue's delay applies: the message is delayed, not ready.
        sqs.sendMessage(b -> b.queueUrl(url).messageBody("later"));
        a = attrs(url);
        assertEquals("1", a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_DELAYED));
        assertEquals("0", a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES));
        SqsException e = assertThrows(SqsException.class, () -> sqs.setQueueAttributes(b -> b.queueUrl(url)
                .attributes(Map.of(QueueAttributeName.VISIBILITY_TIMEOUT, "99999"))));
        assertEquals("InvalidAttributeValue", e.awsErrorDetails().errorCode());
    }

    @Test
    void sendReceiveWithAttributesAndEveryMd5() {
        String url = sqs.createQueue(b -> b.queueName(name("md5"))).queueUrl();
        Map<String, MessageAttributeValue> ma = Map.of(
                "tier", MessageAttributeValue.builder().dataType("String").stringValue("gold ü ✓").build(),
                "n", MessageAttributeValue.builder().dataType("Number.int").stringValue("42").build(),
                "blob", MessageAttributeValue.builder().dataType("Binary")
                        .binaryValue(SdkBytes.fromByteArray(new byte[] {0, 1, (byte) 0xff})).build());
        String body = "order 42 — ü \t\n\r 𝄞";
        SendMessageResponse sent = sqs.sendMessage(b -> b.queueUrl(url).messageBody(body).messageAttributes(ma)
                .messageSystemAttributes(Map.of(MessageSystemAttributeNameForSends.AWS_TRACE_HEADER,
                        MessageSystemAttributeValue.builder().dataType("String")
                                .stringValue("Root=1-5759e988-bd862e3fe1be46a994272793").build())));
        assertNotNull(sent.md5OfMessageSystemAttributes());
        List<Message> got = receive(url, 10, 30);
        assertEquals(1, got.size());
        Message m = got.get(0);
        assertEquals(body, m.body());
        assertEquals(sent.messageId(), m.messageId());
        assertEquals(sent.md5OfMessageBody(), m.md5OfBody());
        assertEquals(sent.md5OfMessageAttributes(), m.md5OfMessageAttributes());
        assertEquals(ma, m.messageAttributes());
        assertEquals("1", m.attributes().get(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT));
        assertEquals("Root=1-5759e988-bd862e3fe1be46a994272793",
                m.attributes().get(MessageSystemAttributeName.AWS_TRACE_HEADER));
        assertNotNull(m.attributes().get(MessageSystemAttributeName.SENT_TIMESTAMP));
        assertNotNull(m.attributes().get(MessageSystemAttributeName.APPROXIMATE_FIRST_RECEIVE_TIMESTAMP));
        // Only the attributes asked for.
        sqs.changeMessageVisibility(b -> b.queueUrl(url).receiptHandle(m.receiptHandle()).visibilityTimeout(0));
        Message again = sqs.receiveMessage(b -> b.queueUrl(url).waitTimeSeconds(20).messageAttributeNames("tier"))
                .messages().get(0);
        assertEquals(Set.of("tier"), again.messageAttributes().keySet());
        sqs.deleteMessage(b -> b.queueUrl(url).receiptHandle(again.receiptHandle()));
        // A handle of an ended delivery: deletes nothing, no error (as SQS).
        sqs.deleteMessage(b -> b.queueUrl(url).receiptHandle(m.receiptHandle()));
        assertThrows(ReceiptHandleIsInvalidException.class,
                () -> sqs.deleteMessage(b -> b.queueUrl(url).receiptHandle("garbled")));
        SqsException e = assertThrows(SqsException.class,
                () -> sqs.sendMessage(b -> b.queueUrl(url).messageBody("bad \u0001 char")));
        assertEquals("InvalidMessageContents", e.awsErrorDetails().errorCode());
    }

    @Test
    void batchesWithPerEntryResults() {
        String url = sqs.createQueue(b -> b.queueName(name("batch"))).queueUrl();
        SendMessageBatchResponse sent = sqs.sendMessageBatch(b -> b.queueUrl(url).entries(
                IntStream.range(0, 10).mapToObj(i -> software.amazon.awssdk.services.sqs.model
                        .SendMessageBatchRequestEntry.builder().id("e" + i)
                        .messageBody(i == 3 ? "bad \u0002" : "m" + i)
                        .messageAttributes(Map.of("i", MessageAttributeValue.builder().dataType("Number")
                                .stringValue(String.valueOf(i)).build()))
                        .build()).collect(Collectors.toList())));
        assertEquals(9, sent.successful().size());
        assertEquals(1, sent.failed().size());
        assertEquals("e3", sent.failed().get(0).id());
        assertEquals("InvalidMessageContents", sent.failed().get(0).code());
        assertTrue(sent.failed().get(0).senderFault());
        assertThrows(TooManyEntriesInBatchRequestException.class, () -> sqs.sendMessageBatch(b -> b.queueUrl(url)
                .entries(IntStream.range(0, 11).mapToObj(i -> software.amazon.awssdk.services.sqs.model
                        .SendMessageBatchRequestEntry.builder().id("x" + i).messageBody("x").build())
                        .collect(Collectors.toList()))));
        assertThrows(BatchEntryIdsNotDistinctException.class, () -> sqs.sendMessageBatch(b -> b.queueUrl(url)
                .entries(e -> e.id("same").messageBody("a"), e -> e.id("same").messageBody("b"))));

        List<Message> got = receiveN(url, 9, 30);
        assertEquals(Set.of("m0", "m1", "m2", "m4", "m5", "m6", "m7", "m8", "m9"),
                got.stream().map(Message::body).collect(Collectors.toSet()));
        // ChangeMessageVisibilityBatch: two back to visible, one garbled handle fails alone.
        ChangeMessageVisibilityBatchResponse vis = sqs.changeMessageVisibilityBatch(b -> b.queueUrl(url).entries(
                e -> e.id("a").receiptHandle(got.get(0).receiptHandle()).visibilityTimeout(0),
                e -> e.id("b").receiptHandle(got.get(1).receiptHandle()).visibilityTimeout(0),
                e -> e.id("c").receiptHandle("garbled").visibilityTimeout(0)));
        assertEquals(Set.of("a", "b"), vis.successful().stream().map(s -> s.id()).collect(Collectors.toSet()));
        assertEquals("ReceiptHandleIsInvalid", vis.failed().get(0).code());
        List<Message> back = receiveN(url, 2, 30);
        assertEquals(Set.of(got.get(0).body(), got.get(1).body()),
                back.stream().map(Message::body).collect(Collectors.toSet()));
        assertEquals(Set.of("2"), back.stream().map(m ->
                m.attributes().get(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT)).collect(Collectors.toSet()));
        // DeleteMessageBatch: everything in flight, and one garbled handle.
        List<Message> all = new ArrayList<>(back);
        all.addAll(got.subList(2, got.size()));
        List<software.amazon.awssdk.services.sqs.model.DeleteMessageBatchRequestEntry> entries = new ArrayList<>();
        for (int i = 0; i < 9; i++) {
            entries.add(software.amazon.awssdk.services.sqs.model.DeleteMessageBatchRequestEntry.builder()
                    .id("d" + i).receiptHandle(all.get(i).receiptHandle()).build());
        }
        entries.add(software.amazon.awssdk.services.sqs.model.DeleteMessageBatchRequestEntry.builder()
                .id("bad").receiptHandle("garbled").build());
        DeleteMessageBatchResponse del = sqs.deleteMessageBatch(b -> b.queueUrl(url).entries(entries));
        assertEquals(9, del.successful().size());
        assertEquals("bad", del.failed().get(0).id());
        assertEquals("ReceiptHandleIsInvalid", del.failed().get(0).code());
        Map<QueueAttributeName, String> a = attrs(url);
        assertEquals("0", a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES));
        assertEquals("0", a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE));
    }

    @Test
    void visibilityTimeoutRedeliversAndPurgeEmpties() {
        String url = sqs.createQueue(b -> b.queueName(name("vis"))).queueUrl();
        sqs.sendMessage(b -> b.queueUrl(url).messageBody("v"));
        Message first = receive(url, 1, 1).get(0);
        assertEquals("1", first.attributes().get(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT));
        assertEquals("1", attrs(url).get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE));
        // Its lease runs out after 1 s: the long poll gets it again.
        Message second = receive(url, 1, 30).get(0);
        assertEquals(first.messageId(), second.messageId());
        assertEquals("2", second.attributes().get(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT));
        // Extending the lease keeps it away from a receive.
        sqs.changeMessageVisibility(b -> b.queueUrl(url).receiptHandle(second.receiptHandle()).visibilityTimeout(60));
        assertTrue(sqs.receiveMessage(b -> b.queueUrl(url).waitTimeSeconds(2)).messages().isEmpty());
        sqs.sendMessageBatch(b -> b.queueUrl(url).entries(e -> e.id("1").messageBody("p1"),
                e -> e.id("2").messageBody("p2").delaySeconds(900)));
        sqs.purgeQueue(b -> b.queueUrl(url));
        Map<QueueAttributeName, String> a = attrs(url);
        assertEquals("0", a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES));
        assertEquals("0", a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE));
        assertEquals("0", a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_DELAYED));
        assertThrows(ReceiptHandleIsInvalidException.class, () -> sqs.changeMessageVisibility(b -> b.queueUrl(url)
                .receiptHandle("AQEBgarbled").visibilityTimeout(0)));
    }

    @Test
    void longPollWakesOnSend() throws Exception {
        String url = sqs.createQueue(b -> b.queueName(name("poll"))).queueUrl();
        long t0 = System.nanoTime();
        CompletableFuture<ReceiveMessageResponse> poll = CompletableFuture.supplyAsync(() ->
                sqs.receiveMessage(b -> b.queueUrl(url).waitTimeSeconds(20)));
        Thread.sleep(1000);
        assertFalse(poll.isDone(), "the long poll answered before any send");
        sqs.sendMessage(b -> b.queueUrl(url).messageBody("wake"));
        ReceiveMessageResponse got = poll.get(30, TimeUnit.SECONDS);
        double took = (System.nanoTime() - t0) / 1e9;
        assertEquals(List.of("wake"), got.messages().stream().map(Message::body).collect(Collectors.toList()));
        // Woken by the send, not by its 20 s running out (generous for a loaded machine).
        assertTrue(took < 15, "long poll took " + took + " s");
    }

    @Test
    void fifoOrderGroupsAndDeduplication() {
        String q = name("fifo") + ".fifo";
        String url = sqs.createQueue(b -> b.queueName(q).attributes(Map.of(QueueAttributeName.FIFO_QUEUE, "true",
                QueueAttributeName.CONTENT_BASED_DEDUPLICATION, "true"))).queueUrl();
        assertEquals("true", attrs(url).get(QueueAttributeName.FIFO_QUEUE));
        List<String> seqs = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            int n = i;
            SendMessageResponse r = sqs.sendMessage(b -> b.queueUrl(url).messageBody("a" + n).messageGroupId("A"));
            seqs.add(r.sequenceNumber());
        }
        sqs.sendMessageBatch(b -> b.queueUrl(url).entries(
                e -> e.id("1").messageBody("b0").messageGroupId("B"),
                e -> e.id("2").messageBody("b1").messageGroupId("B").messageDeduplicationId("explicit")));
        // Duplicates within 5 minutes: accepted, never delivered again.
        SendMessageResponse dup = sqs.sendMessage(b -> b.queueUrl(url).messageBody("a0").messageGroupId("A"));
        assertNotNull(dup.messageId());
        sqs.sendMessage(b -> b.queueUrl(url).messageBody("other body").messageGroupId("B")
                .messageDeduplicationId("explicit"));
        assertEquals(seqs.stream().sorted().collect(Collectors.toList()), seqs, "sequence numbers grow");
        SqsException e = assertThrows(SqsException.class,
                () -> sqs.sendMessage(b -> b.queueUrl(url).messageBody("no group")));
        assertEquals("MissingParameter", e.awsErrorDetails().errorCode());

        // One message per group in flight at a time, each group in send order.
        List<Message> first = receive(url, 10, 30);
        assertEquals(Set.of("a0", "b0"), first.stream().map(Message::body).collect(Collectors.toSet()));
        Message a0 = first.stream().filter(m -> m.body().equals("a0")).findFirst().orElseThrow();
        assertEquals("A", a0.attributes().get(MessageSystemAttributeName.MESSAGE_GROUP_ID));
        assertEquals(seqs.get(0), a0.attributes().get(MessageSystemAttributeName.SEQUENCE_NUMBER));
        assertNotNull(a0.attributes().get(MessageSystemAttributeName.MESSAGE_DEDUPLICATION_ID));
        assertTrue(sqs.receiveMessage(b -> b.queueUrl(url).maxNumberOfMessages(10).waitTimeSeconds(1))
                .messages().isEmpty());
        List<String> order = new ArrayList<>();
        for (Message m : first) {
            order.add(m.body());
            sqs.deleteMessage(b -> b.queueUrl(url).receiptHandle(m.receiptHandle()));
        }
        for (int round = 0; round < 10 && order.size() < 6; round++) {
            for (Message m : receive(url, 10, 30)) {
                order.add(m.body());
                sqs.deleteMessage(b -> b.queueUrl(url).receiptHandle(m.receiptHandle()));
            }
        }
        assertEquals(List.of("a0", "a1", "a2", "a3"), order.stream().filter(s -> s.startsWith("a"))
                .collect(Collectors.toList()));
        assertEquals(List.of("b0", "b1"), order.stream().filter(s -> s.startsWith("b")).collect(Collectors.toList()));
        assertEquals(6, order.size());
        assertTrue(sqs.receiveMessage(b -> b.queueUrl(url).waitTimeSeconds(1)).messages().isEmpty());
    }

    @Test
    void redriveToADeadLetterQueueAndMoveBack() throws Exception {
        String dlqName = name("dlq");
        String srcName = name("src");
        String dlq = sqs.createQueue(b -> b.queueName(dlqName)).queueUrl();
        String src = sqs.createQueue(b -> b.queueName(srcName).attributes(Map.of(QueueAttributeName.REDRIVE_POLICY,
                "{\"deadLetterTargetArn\":\"" + arn(dlqName) + "\",\"maxReceiveCount\":\"2\"}"))).queueUrl();
        assertEquals(List.of(src), sqs.listDeadLetterSourceQueues(b -> b.queueUrl(dlq)).queueUrls());
        SendMessageResponse sent = sqs.sendMessage(b -> b.queueUrl(src).messageBody("doomed")
                .messageAttributes(Map.of("k", MessageAttributeValue.builder().dataType("String").stringValue("v")
                        .build())));
        for (int n = 1; n <= 2; n++) {
            Message m = receive(src, 1, 1).get(0);
            assertEquals(String.valueOf(n), m.attributes().get(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT));
        }
        // The second lease runs out: it dies and moves to the dead-letter queue.
        List<Message> dead = receive(dlq, 10, 30);
        assertEquals(1, dead.size());
        assertEquals("doomed", dead.get(0).body());
        assertEquals(sent.messageId(), dead.get(0).messageId());
        assertEquals("v", dead.get(0).messageAttributes().get("k").stringValue());
        sqs.changeMessageVisibility(b -> b.queueUrl(dlq).receiptHandle(dead.get(0).receiptHandle()).visibilityTimeout(0));
        sqs.sendMessageBatch(b -> b.queueUrl(dlq).entries(IntStream.range(0, 5).mapToObj(i -> software.amazon.awssdk
                .services.sqs.model.SendMessageBatchRequestEntry.builder().id("d" + i).messageBody("dead" + i).build())
                .collect(Collectors.toList())));
        // A move task from the dead-letter queue back to its source.
        assertThrows(SqsException.class, () -> sqs.startMessageMoveTask(b -> b.sourceArn(arn(srcName))));
        String handle = sqs.startMessageMoveTask(b -> b.sourceArn(arn(dlqName)).maxNumberOfMessagesPerSecond(50))
                .taskHandle();
        ListMessageMoveTasksResultEntry task = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            task = sqs.listMessageMoveTasks(b -> b.sourceArn(arn(dlqName))).results().get(0);
            if (!task.status().equals("RUNNING")) {
                break;
            }
            Thread.sleep(100);
        }
        assertEquals("COMPLETED", task.status());
        assertEquals(6L, task.approximateNumberOfMessagesMoved());
        assertEquals(arn(srcName), task.destinationArn());
        assertThrows(ResourceNotFoundException.class, () -> sqs.cancelMessageMoveTask(b -> b.taskHandle(handle)));
        Set<String> bodies = new HashSet<>();
        receiveN(src, 6, 30).forEach(m -> bodies.add(m.body()));
        assertEquals(Set.of("doomed", "dead0", "dead1", "dead2", "dead3", "dead4"), bodies);

        // A slow task cancelled part way: every message is in one queue or the other.
        String dlq2Name = name("dlq");
        String dlq2 = sqs.createQueue(b -> b.queueName(dlq2Name)).queueUrl();
        String src2Name = name("src");
        String src2 = sqs.createQueue(b -> b.queueName(src2Name).attributes(Map.of(QueueAttributeName.REDRIVE_POLICY,
                "{\"deadLetterTargetArn\":\"" + arn(dlq2Name) + "\",\"maxReceiveCount\":1}"))).queueUrl();
        for (int k = 0; k < 2; k++) {
            int base = k * 10;
            sqs.sendMessageBatch(b -> b.queueUrl(dlq2).entries(IntStream.range(base, base + 10).mapToObj(i ->
                    software.amazon.awssdk.services.sqs.model.SendMessageBatchRequestEntry.builder().id("d" + i)
                            .messageBody("m" + i).build()).collect(Collectors.toList())));
        }
        String slow = sqs.startMessageMoveTask(b -> b.sourceArn(arn(dlq2Name)).maxNumberOfMessagesPerSecond(1))
                .taskHandle();
        Thread.sleep(1500);
        long moved = sqs.cancelMessageMoveTask(b -> b.taskHandle(slow)).approximateNumberOfMessagesMoved();
        assertTrue(moved >= 1 && moved < 20, "moved " + moved);
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            task = sqs.listMessageMoveTasks(b -> b.sourceArn(arn(dlq2Name))).results().get(0);
            if (task.status().equals("CANCELLED")) {
                break;
            }
            Thread.sleep(100);
        }
        assertEquals("CANCELLED", task.status());
        int left = Integer.parseInt(attrs(dlq2).get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES));
        int there = Integer.parseInt(attrs(src2).get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES));
        assertEquals(20, left + there);
    }

    @Test
    void unsupportedActionsAreRefused() {
        SqsException e = assertThrows(software.amazon.awssdk.services.sqs.model.UnsupportedOperationException.class,
                () -> sqs.addPermission(b -> b.queueUrl(servers.url() + "/000000000000/nope").label("l")
                        .awsAccountIds("111111111111").actions("SendMessage")));
        // The query-compatible code SQS itself sends in x-amzn-query-error.
        assertEquals("AWS.SimpleQueueService.UnsupportedOperation", e.awsErrorDetails().errorCode());
        assertEquals(400, e.statusCode());
    }

    @Test
    void largeBodies() {
        String url = sqs.createQueue(b -> b.queueName(name("big"))).queueUrl();
        String body = "x".repeat(1_000_000) + "ü";
        sqs.sendMessage(b -> b.queueUrl(url).messageBody(body));
        assertEquals(body, receive(url, 1, 30).get(0).body());
        SqsException e = assertThrows(SqsException.class,
                () -> sqs.sendMessage(b -> b.queueUrl(url).messageBody("y".repeat(1_048_577))));
        assertEquals("InvalidParameterValue", e.awsErrorDetails().errorCode());
        // MaximumMessageSize is what SQS counts (the body's bytes here): 1,048,576 is accepted.
        String most = "z".repeat(1_048_576);
        sqs.sendMessage(b -> b.queueUrl(url).messageBody(most));
        assertEquals(most, receive(url, 1, 30).get(0).body());
    }
}
