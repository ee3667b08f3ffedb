package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * A 3-primary cluster (a replica each, node timeout 2 s): a worker on a topic spread over
 * the primaries, one primary killed with SIGKILL during consumption; its replica takes over
 * and the worker follows: every message is processed (at least once), none is lost.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ClusterTest {
    static final List<TestServer> NODES = new ArrayList<>();

    @BeforeAll
    static void start() throws Exception {
        Set<Integer> taken = new HashSet<>();
        for (int i = 0; i < 6; i++) {
            NODES.add(TestServer.startClusterNode(taken));
        }
        List<String> cmd = new ArrayList<>(List.of(cli(), "--cluster", "create"));
        NODES.forEach(n -> cmd.add("127.0.0.1:" + n.port));
        cmd.addAll(List.of("--cluster-replicas", "1", "--cluster-yes"));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "cluster create: " + out);
        for (TestServer n : NODES) {
            try (RmqClient c = RmqClient.create(n.uri())) {
                Wait.until("cluster_state:ok on " + n.port, Duration.ofSeconds(60), () ->
                        Replies.text(c.redis().call("CLUSTER", "INFO")).contains("cluster_state:ok"));
            }
        }
    }

    @AfterAll
    static void stop() {
        NODES.forEach(TestServer::close);
    }

    static String cli() {
        String env = System.getenv("RMQ_CLI_BIN");
        return env != null && !env.isEmpty() ? env : "redis-cli";
    }

    @Test
    @Order(1)
    void aQueueWorkerOnAClusterPopsFromTheQueuesNode() throws Exception {
        try (RmqClient rmq = RmqClient.create(NODES.get(0).uri() + "," + NODES.get(1).uri())) {
            Queue q = rmq.queue("solo");
            for (int i = 0; i < 50; i++) {
                q.push(FixedTimeMessage.after(Duration.ZERO, "s" + i));
            }
            Set<String> seen = ConcurrentHashMap.newKeySet();
            Worker w = rmq.worker(q, m -> {
                seen.add(m.body());
            }, WorkerOptions.builder().concurrency(4).build()).start();
            try {
                Wait.until("50 processed", Duration.ofSeconds(60), () -> w.stats().processed() == 50);
            } finally {
                w.close();
            }
            assertEquals(50, seen.size());
            assertEquals(0, q.info().waiting() + q.info().inflight());
        }
    }

    @Test
    @Order(2)
    void aFailoverDuringConsumptionLosesNothing() throws Exception {
        try (RmqClient rmq = RmqClient.create(NODES.get(0).uri() + "," + NODES.get(1).uri())) {
            assertTrue(rmq.isCluster());
            Topic topic = rmq.topic("fo", 16);
            List<Message> msgs = new ArrayList<>();
            for (int i = 0; i < 3000; i++) {
                msgs.add(PriorityMessage.of("m" + i, 1));
            }
            // durable: every push is on a replica before the kill
            Topic durable = topic.durable(Durable.replicas(1).timeout(Duration.ofSeconds(10)));
            for (int i = 0; i < msgs.size(); i += 500) {
                assertEquals(500, durable.push(msgs.subList(i, i + 500)));
            }
            Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
            Worker w = rmq.worker(topic, m -> {
                seen.computeIfAbsent(m.body(), k -> new AtomicInteger()).incrementAndGet();
                Thread.sleep(3);
            }, WorkerOptions.builder().concurrency(8).lease(Duration.ofSeconds(5)).build()).start();
            try {
                Wait.until("some processed", Duration.ofSeconds(60), () -> seen.size() >= 300);
                TestServer victim = primaryOf(rmq, topic.queueFor("m1"));
                victim.kill();
                Wait.until("every message processed", Duration.ofSeconds(150), () -> seen.size() == 3000);
                // acks lost in the failover: those leases run out and the worker takes them again
                Wait.until("nothing waiting or in flight", Duration.ofSeconds(150), () -> {
                    Info info = topic.info();
                    return info.waiting() == 0 && info.inflight() == 0;
                });
            } finally {
                w.close();
            }
            assertEquals(3000, seen.size(), "a message was lost");
        }
    }

    /** The node serving `queue`'s slot, from a live node's view. */
    private static TestServer primaryOf(RmqClient rmq, String queue) {
        for (io.lettuce.core.cluster.models.partitions.RedisClusterNode n : rmq.redis().primaries()) {
            if (n.hasSlot(io.lettuce.core.cluster.SlotHash.getSlot(queue))) {
                for (TestServer s : NODES) {
                    if (s.port == n.getUri().getPort()) {
                        return s;
                    }
                }
            }
        }
        throw new AssertionError("no primary serves " + queue);
    }
}
