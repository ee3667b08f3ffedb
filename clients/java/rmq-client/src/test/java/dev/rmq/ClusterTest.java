package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
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
 * A 3-primary cluster (a replica each, node timeout 2 s). Durable mode with one replica
 * stopped by SIGSTOP (connected but acknowledging nothing, as a partitioned one is): the
 * calls on its primary's queues throw NotDurable, the other primaries' go on. Then a worker
 * on a topic spread over the primaries, one primary killed with SIGKILL during consumption;
 * its replica takes over and the worker follows: every message is processed (at least
 * once), none is lost.
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
    void aPausedReplicaMakesItsPrimarysCallsNotDurableAndLeavesTheOthersAlone() throws Exception {
        try (RmqClient rmq = RmqClient.create(NODES.get(0).uri() + "," + NODES.get(1).uri())) {
            String down = "dd:down";
            String fine = null;
            for (int i = 0; fine == null; i++) {
                if (primaryOf(rmq, "dd:fine" + i) != primaryOf(rmq, down)) {
                    fine = "dd:fine" + i;
                }
            }
            TestServer owner = primaryOf(rmq, down);
            TestServer replica = replicaOf(rmq, owner);
            Durable up = Durable.replicas(1).timeout(Duration.ofSeconds(20));
            Durable shortWait = Durable.replicas(1).timeout(Duration.ofMillis(300));
            Queue q = rmq.queue(down);
            signal(replica, "STOP");
            try {
                NotDurable e = assertThrows(NotDurable.class, () -> q.push(shortWait, PriorityMessage.of("job", 3)));
                assertEquals(0, e.confirmed());
                assertEquals(1, e.wanted());
                assertEquals(List.of(1L), e.replies());
                assertEquals(1, q.info().waiting(), "done on the primary all the same");
                // another primary's replica confirms (the generous wait: a loaded machine is slow)
                assertEquals(1, rmq.queue(fine).push(up, PriorityMessage.of("job", 3)), "another primary's queue");
                // a topic's push waits on every primary it wrote to: one short is NotDurable
                Topic t = rmq.topic("dd:t", 16);
                List<Message> ms = new ArrayList<>();
                for (int i = 0; i < 40; i++) {
                    ms.add(PriorityMessage.of("m" + i, 1));
                }
                assertThrows(NotDurable.class, () -> t.push(shortWait, ms));
            } finally {
                signal(replica, "CONT");
            }
            // the retry merges with the stored copy and returns once the replica holds it
            assertEquals(0, q.push(up, PriorityMessage.of("job", 3)));
            signal(replica, "STOP");
            try {
                NotDurable pop = assertThrows(NotDurable.class,
                        () -> q.pop(1, Duration.ofSeconds(60), null, shortWait));
                assertTrue(pop.getMessage().contains("not handed out"), pop.getMessage());
                assertEquals(1, rmq.queue(fine).pop(1, Duration.ofSeconds(60), null, up).size(),
                        "another primary's pop is handed out");
            } finally {
                signal(replica, "CONT");
            }
        }
    }

    @Test
    @Order(3)
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

    /** kill -SIG by the server's pid (SIGSTOP / SIGCONT: the JDK sends only TERM and KILL). */
    private static void signal(TestServer s, String sig) throws Exception {
        Process p = new ProcessBuilder("kill", "-" + sig, String.valueOf(s.pid())).inheritIO().start();
        assertTrue(p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0, "kill -" + sig);
    }

    /** The replica of `primary`, from CLUSTER NODES (gossip may take a moment to tell it). */
    private static TestServer replicaOf(RmqClient rmq, TestServer primary) throws Exception {
        TestServer[] found = new TestServer[1];
        Wait.until("the replica of " + primary.port + " known", Duration.ofSeconds(30), () -> {
            String[] lines = Replies.text(rmq.redis().call("CLUSTER", "NODES")).split("\n");
            String primaryId = null;
            for (String l : lines) {
                String[] f = l.split(" ");
                if (f.length > 3 && f[1].startsWith("127.0.0.1:" + primary.port + "@")) {
                    primaryId = f[0];
                }
            }
            for (String l : lines) {
                String[] f = l.split(" ");
                if (primaryId != null && f.length > 3 && f[2].contains("slave") && f[3].equals(primaryId)) {
                    int port = Integer.parseInt(f[1].substring(f[1].indexOf(':') + 1, f[1].indexOf('@')));
                    NODES.stream().filter(n -> n.port == port).forEach(n -> found[0] = n);
                }
            }
            return found[0] != null;
        });
        return found[0];
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
