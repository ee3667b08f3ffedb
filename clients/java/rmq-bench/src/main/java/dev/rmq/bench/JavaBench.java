package dev.rmq.bench;

import dev.rmq.FixedTimeMessage;
import dev.rmq.Message;
import dev.rmq.RmqClient;
import dev.rmq.Topic;
import dev.rmq.Worker;
import dev.rmq.WorkerListener;
import dev.rmq.WorkerOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.output.IntegerOutput;
import io.lettuce.core.output.NestedMultiOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.redisson.Redisson;
import org.redisson.api.RBlockingQueue;
import org.redisson.api.RDelayedQueue;
import org.redisson.api.RFuture;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * The Java worker's throughput against a hand-written TPOP/ACK loop on Lettuce and against
 * Redisson's delayed queue (RDelayedQueue feeding an RBlockingQueue), on one server (with
 * the module) that bench/bench_java.py started:
 *
 *   java dev.rmq.bench.JavaBench --port P --pid PID [--messages N] [--rounds R]
 *        [--concurrency C] [--slots S] [--delay-ms D] [--peers a,b]
 *
 * Each round, for each peer: the database is emptied, N messages due after D ms are
 * loaded (timed apart), then consumed with a no-op handler at concurrency C (timed, until
 * the last one is acknowledged by the server):
 *   rmq-worker  dev.rmq.Worker on a Topic of S slots (TPOP, batched ACKs)
 *   hand-loop   one Lettuce connection: RMQ.TPOP COUNT C LEASE 30000 BLOCK 1000, then one
 *               RMQ.ACK per queue of the batch (pipelined), until N are acked
 *   redisson    RDelayedQueue.offerAsync(m, D ms) to load; C threads each taking from the
 *               RBlockingQueue (a take is its acknowledgement: Redisson's queue has no lease)
 * The server's CPU (utime + stime of /proc/PID/stat) is read around the load and around
 * the consumption. A warm-up round first, not counted. Prints one line per
 * measurement: "RESULT peer round msgs_per_s server_us_consume server_us_total load_s".
 */
public final class JavaBench {
    private static final long TICK_US = 1_000_000 / 100;   // USER_HZ is 100 on Linux

    private final int port;
    private final long pid;
    private final int concurrency;
    private final int slots;
    private final long delayMs;
    private int n;

    private JavaBench(Map<String, String> a) {
        port = Integer.parseInt(a.get("port"));
        pid = Long.parseLong(a.get("pid"));
        n = Integer.parseInt(a.getOrDefault("messages", "50000"));
        concurrency = Integer.parseInt(a.getOrDefault("concurrency", "100"));
        slots = Integer.parseInt(a.getOrDefault("slots", "16"));
        delayMs = Long.parseLong(a.getOrDefault("delay-ms", "1"));
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new LinkedHashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        int rounds = Integer.parseInt(a.getOrDefault("rounds", "5"));
        List<String> peers = Arrays.asList(a.getOrDefault("peers", "rmq-worker,hand-loop,redisson").split(","));
        JavaBench b = new JavaBench(a);
        for (String p : peers) {        // the JIT's warm-up: the worker's threads need a full round
            b.measure(p, 0);
        }
        for (int r = 1; r <= rounds; r++) {
            for (String p : peers) {
                b.measure(p, r);
            }
        }
        System.exit(0);   // Redisson's and Lettuce's non-daemon threads
    }

    private String uri() {
        return "redis://127.0.0.1:" + port;
    }

    /** The server's CPU time so far, in µs. */
    private long serverCpuUs() throws IOException {
        String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * TICK_US;   // fields 14, 15
    }

    private void measure(String peer, int round) throws Exception {
        RedisClient lettuce = RedisClient.create(uri());
        try (StatefulRedisConnection<byte[], byte[]> admin = lettuce.connect(ByteArrayCodec.INSTANCE)) {
            admin.sync().flushall();
            long cpu0 = serverCpuUs();
            long t0 = System.nanoTime();
            Peer p = switch (peer) {
                case "rmq-worker" -> new RmqWorkerPeer();
                case "hand-loop" -> new HandLoopPeer(lettuce);
                case "redisson" -> new RedissonPeer();
                default -> throw new IllegalArgumentException("unknown peer " + peer);
            };
            p.load();
            double loadS = (System.nanoTime() - t0) / 1e9;
            long cpu1 = serverCpuUs();
            long t1 = System.nanoTime();
            p.consume();
            double secs = (System.nanoTime() - t1) / 1e9;
            long cpu2 = serverCpuUs();
            p.close();
            System.out.printf(Locale.ROOT, "RESULT %s %d %.1f %.3f %.3f %.3f%n", peer, round, n / secs,
                    (cpu2 - cpu1) / (double) n, (cpu2 - cpu0) / (double) n, loadS);
        } finally {
            lettuce.shutdown();
        }
    }

    private interface Peer extends AutoCloseable {
        void load() throws Exception;

        void consume() throws Exception;

        @Override
        void close();
    }

    private static String body(int i) {
        return String.format("m%08d", i);
    }

    /** N FixedTimeMessages due after delayMs, pushed 5,000 at a time. */
    private Topic fill(RmqClient rmq) {
        Topic topic = rmq.topic("bench", slots);
        for (int i = 0; i < n; i += 5000) {
            List<Message> batch = new ArrayList<>();
            for (int j = i; j < Math.min(n, i + 5000); j++) {
                batch.add(FixedTimeMessage.after(Duration.ofMillis(delayMs), body(j)));
            }
            topic.push(batch);
        }
        return topic;
    }

    private final class RmqWorkerPeer implements Peer {
        private final RmqClient rmq = RmqClient.create(uri());
        private Topic topic;
        private Worker worker;

        @Override
        public void load() {
            topic = fill(rmq);
        }

        @Override
        public void consume() throws InterruptedException {
            CountDownLatch all = new CountDownLatch(n);
            worker = rmq.worker(topic, m -> { }, WorkerOptions.builder().concurrency(concurrency)
                    .listener(new WorkerListener() {
                        @Override
                        public void completed(dev.rmq.Delivery m, Duration took) {
                            all.countDown();
                        }
                    }).build()).start();
            all.await();
            // handled; timed until the server has every ack (the worker batches them)
            while (topic.info().inflight() > 0) {
                Thread.sleep(1);
            }
        }

        @Override
        public void close() {
            worker.close();
            rmq.close();
        }
    }

    private static final ProtocolKeyword TPOP = keyword("RMQ.TPOP");
    private static final ProtocolKeyword ACK = keyword("RMQ.ACK");

    private static ProtocolKeyword keyword(String name) {
        byte[] bytes = name.getBytes(StandardCharsets.US_ASCII);
        return new ProtocolKeyword() {
            @Override
            public byte[] getBytes() {
                return bytes;
            }

            @Override
            public String toString() {
                return name;
            }
        };
    }

    private final class HandLoopPeer implements Peer {
        private final RmqClient rmq = RmqClient.create(uri());
        private final StatefulRedisConnection<byte[], byte[]> conn;
        private Topic topic;

        HandLoopPeer(RedisClient lettuce) {
            conn = lettuce.connect(ByteArrayCodec.INSTANCE);
        }

        @Override
        public void load() {
            topic = fill(rmq);
        }

        @Override
        @SuppressWarnings("unchecked")
        public void consume() throws Exception {
            byte[] name = topic.name().getBytes(StandardCharsets.UTF_8);
            long done = 0;
            while (done < n) {
                CommandArgs<byte[], byte[]> args = new CommandArgs<>(ByteArrayCodec.INSTANCE).add(name)
                        .add(slots).add("COUNT").add(concurrency).add("LEASE").add(30000).add("BLOCK").add(1000);
                List<Object> reply = conn.async().dispatch(TPOP, new NestedMultiOutput<>(ByteArrayCodec.INSTANCE), args)
                        .get(60, TimeUnit.SECONDS);
                if (reply == null || reply.isEmpty()) {
                    continue;
                }
                // entries [queue, message, deliveries]: one ACK per queue
                Map<String, CommandArgs<byte[], byte[]>> byQueue = new LinkedHashMap<>();
                for (Object e : reply) {
                    List<Object> entry = (List<Object>) e;
                    byte[] q = (byte[]) entry.get(0);
                    byQueue.computeIfAbsent(new String(q, StandardCharsets.UTF_8),
                            k -> new CommandArgs<>(ByteArrayCodec.INSTANCE).addKey(q)).add((byte[]) entry.get(1));
                }
                List<RedisFuture<Long>> acks = new ArrayList<>();
                for (CommandArgs<byte[], byte[]> a : byQueue.values()) {
                    acks.add(conn.async().dispatch(ACK, new IntegerOutput<>(ByteArrayCodec.INSTANCE), a));
                }
                for (RedisFuture<Long> f : acks) {
                    done += f.get(60, TimeUnit.SECONDS);
                }
            }
        }

        @Override
        public void close() {
            conn.close();
            rmq.close();
        }
    }

    private final class RedissonPeer implements Peer {
        private final RedissonClient redisson;
        private final RBlockingQueue<String> queue;
        private final RDelayedQueue<String> delayed;
        private final List<Thread> takers = new ArrayList<>();

        RedissonPeer() {
            Config config = new Config();
            // a pooled connection per blocked taker, and a few for the rest
            config.useSingleServer().setAddress(uri())
                    .setConnectionPoolSize(concurrency + 16).setConnectionMinimumIdleSize(concurrency + 16);
            redisson = Redisson.create(config);
            queue = redisson.getBlockingQueue("bench", StringCodec.INSTANCE);
            delayed = redisson.getDelayedQueue(queue);
        }

        @Override
        public void load() throws Exception {
            for (int i = 0; i < n; i += 5000) {
                List<CompletableFuture<Void>> fs = new ArrayList<>();
                for (int j = i; j < Math.min(n, i + 5000); j++) {
                    RFuture<Void> f = delayed.offerAsync(body(j), delayMs, TimeUnit.MILLISECONDS);
                    fs.add(f.toCompletableFuture());
                }
                CompletableFuture.allOf(fs.toArray(new CompletableFuture[0])).get(120, TimeUnit.SECONDS);
            }
        }

        @Override
        public void consume() throws InterruptedException {
            AtomicLong done = new AtomicLong();
            CountDownLatch all = new CountDownLatch(n);
            for (int t = 0; t < concurrency; t++) {
                Thread th = new Thread(() -> {
                    try {
                        while (done.get() < n) {
                            String m = queue.poll(1, TimeUnit.SECONDS);
                            if (m != null) {
                                done.incrementAndGet();   // the no-op handler
                                all.countDown();
                            }
                        }
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }, "redisson-taker-" + t);
                th.setDaemon(true);
                th.start();
                takers.add(th);
            }
            all.await();
        }

        @Override
        public void close() {
            for (Thread th : takers) {   // each ends within its poll's second
                try {
                    th.join(5000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            delayed.destroy();
            redisson.shutdown();
        }
    }
}
