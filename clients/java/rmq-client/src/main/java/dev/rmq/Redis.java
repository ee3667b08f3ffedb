package dev.rmq;

import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCommandTimeoutException;
import io.lettuce.core.RedisException;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SslOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;

/**
 * The Lettuce side: one multiplexed connection (standalone or cluster) for every keyed
 * command, and dedicated connections for blocking pops. A command is an Object[]: its name,
 * then arguments (String, byte[] or a number); every command but RMQ.TPOP names its queue
 * as its first argument, which a cluster connection routes by.
 */
final class Redis implements AutoCloseable {
    /** Longest wait for a reply (blocking pops block far less: WorkerOptions bounds them). */
    static final Duration AWAIT = Duration.ofSeconds(120);
    /**
     * Longest wait for the reply to a command without BLOCK on the shared connection. A
     * command in flight to a primary that dies is kept by Lettuce for its reconnect, which
     * never comes: without this an ack stalled a minute there (and the acker with it, so
     * every ack meanwhile came after its lease). Past it the call fails as a connection
     * error: the callers retry (by then on the new primary) or the lease redelivers.
     */
    static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(10);
    /**
     * RESP2 replies; a command while the connection is down fails at once instead of waiting
     * in a buffer for a node that may never come back (a failed-over primary): the callers
     * retry with backoff, the worker's lease covers the rest.
     */
    private static final ClientOptions OPTIONS = ClientOptions.builder()
            .protocolVersion(ProtocolVersion.RESP2)
            .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
            .build();
    /**
     * A dedicated connection does not reconnect: a command in flight when it drops (a
     * blocked pop) fails at once instead of waiting for a reconnect that may never come; its
     * owner opens a new one (the worker's fetch loop, with backoff).
     */
    private static final ClientOptions LINK_OPTIONS = OPTIONS.mutate().autoReconnect(false).build();

    private final ClientResources resources;
    private final AbstractRedisClient client;
    private final RedisURI seed;
    private final StatefulRedisConnection<byte[], byte[]> conn;
    private final StatefulRedisClusterConnection<byte[], byte[]> cluster;
    /** For dedicated connections (blocking pops, durable writes), to the server or one node. */
    private final RedisClient nodes;

    /** `ssl`: the trust (and key) material of rediss:// connections, or null for the JVM's. */
    private Redis(List<RedisURI> uris, boolean isCluster, SslOptions ssl) {
        resources = DefaultClientResources.create();
        seed = uris.get(0);
        SslOptions tls = ssl != null ? ssl : SslOptions.create();
        if (isCluster) {
            RedisClusterClient c = RedisClusterClient.create(resources, uris);
            c.setOptions(ClusterClientOptions.builder()
                    .sslOptions(tls)
                    .protocolVersion(ProtocolVersion.RESP2)
                    .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                    .topologyRefreshOptions(ClusterTopologyRefreshOptions.builder()
                            .enablePeriodicRefresh(Duration.ofSeconds(5))
                            .enableAllAdaptiveRefreshTriggers()
                            .build())
                    .build());
            client = c;
            cluster = c.connect(ByteArrayCodec.INSTANCE);
            conn = null;
        } else {
            RedisClient c = RedisClient.create(resources, seed);
            c.setOptions(OPTIONS.mutate().sslOptions(tls).build());
            client = c;
            conn = c.connect(ByteArrayCodec.INSTANCE);
            cluster = null;
        }
        nodes = RedisClient.create(resources);
        nodes.setOptions(LINK_OPTIONS.mutate().sslOptions(tls).build());
    }

    /** One URI (a server) or several, comma-separated (seeds of a cluster). */
    static Redis connect(String uris, boolean forceCluster, SslOptions ssl) {
        if (uris == null || uris.isBlank()) {
            throw new IllegalArgumentException("a Redis URI is needed, e.g. redis://127.0.0.1:6379");
        }
        List<RedisURI> parsed = new ArrayList<>();
        for (String u : uris.split(",")) {
            try {
                parsed.add(RedisURI.create(u.trim()));
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("not a Redis URI: " + u.trim(), e);
            }
        }
        boolean isCluster = forceCluster || parsed.size() > 1;
        return new Redis(parsed, isCluster, ssl);
    }

    boolean isCluster() {
        return cluster != null;
    }

    /** The primaries of the cluster, as Lettuce last read its slot map. */
    List<RedisClusterNode> primaries() {
        return cluster.getPartitions().stream()
                .filter(n -> n.is(RedisClusterNode.NodeFlag.UPSTREAM) && !n.getSlots().isEmpty())
                .collect(Collectors.toList());
    }

    void refreshTopology() {
        ((RedisClusterClient) client).refreshPartitions();
    }

    Object call(Object... command) {
        return await(send(command), timeoutOf(command));
    }

    private static Duration timeoutOf(Object[] command) {
        for (Object a : command) {
            if ("BLOCK".equals(a)) {
                return AWAIT;
            }
        }
        return COMMAND_TIMEOUT;
    }

    /** callAll, or with `durable` (not null or NONE) callDurable. */
    List<Object> callAll(List<Object[]> commands, Durable durable) {
        return durable == null || durable.none() ? callAll(commands) : callDurable(commands, durable, null);
    }

    /** Several commands pipelined on the shared connection; the first error is thrown. */
    List<Object> callAll(List<Object[]> commands) {
        List<RedisFuture<Object>> futures = new ArrayList<>(commands.size());
        for (Object[] c : commands) {
            futures.add(send(c));
        }
        List<Object> replies = new ArrayList<>(futures.size());
        RuntimeException first = null;
        for (int i = 0; i < futures.size(); i++) {
            try {
                replies.add(await(futures.get(i), timeoutOf(commands.get(i))));
            } catch (RuntimeException e) {
                replies.add(null);
                if (first == null) {
                    first = e;
                }
            }
        }
        if (first != null) {
            throw first;
        }
        return replies;
    }

    private RedisFuture<Object> send(Object[] command) {
        String name = (String) command[0];
        CommandArgs<byte[], byte[]> args = args(command, !name.equals("RMQ.TPOP"));
        if (cluster != null) {
            return cluster.async().dispatch(keyword(name), new ReplyOutput(), args);
        }
        return conn.async().dispatch(keyword(name), new ReplyOutput(), args);
    }

    /** Dedicated connections for durable writes, by node ("server" when not a cluster). */
    private final Map<String, Link> durableLinks = new HashMap<>();

    /**
     * Commands whose WAIT / WAITAOF covers them: each node's commands and the wait go down
     * that node's own durable connection (WAIT counts the writes of its connection). A
     * command answered MOVED or ASK was not run: the slot map is read again and it is sent
     * again, up to 5 times. With `via`, all go there (a worker's TPOP connection).
     */
    List<Object> callDurable(List<Object[]> commands, Durable d, Link via) {
        Object[] replies = new Object[commands.size()];
        List<Integer> pending = new ArrayList<>();
        for (int i = 0; i < commands.size(); i++) {
            pending.add(i);
        }
        String what = (String) commands.get(0)[0];
        for (int attempt = 0; attempt < 5 && !pending.isEmpty(); attempt++) {
            Map<String, List<Integer>> byNode = new LinkedHashMap<>();
            Map<String, RedisClusterNode> nodeOf = new HashMap<>();
            for (int i : pending) {
                RedisClusterNode node = via != null || cluster == null ? null : ownerOf((byte[]) keyBytes(commands.get(i)[1]));
                String id = node == null ? "server" : node.getNodeId();
                nodeOf.put(id, node);
                byNode.computeIfAbsent(id, k -> new ArrayList<>()).add(i);
            }
            List<Integer> again = new ArrayList<>();
            for (Map.Entry<String, List<Integer>> e : byNode.entrySet()) {
                Link link = via != null ? via : durableLink(e.getKey(), nodeOf.get(e.getKey()));
                List<Object[]> batch = new ArrayList<>();
                e.getValue().forEach(i -> batch.add(commands.get(i)));
                batch.add(d.command());
                List<Object> got;
                synchronized (link) {
                    got = link.callAll(batch);
                }
                List<Object> ran = new ArrayList<>();
                for (int k = 0; k < e.getValue().size(); k++) {
                    Object r = got.get(k);
                    if (r instanceof RuntimeException) {
                        String m = String.valueOf(((RuntimeException) r).getMessage());
                        if (m.startsWith("MOVED") || m.startsWith("ASK")) {
                            again.add(e.getValue().get(k));
                            continue;
                        }
                        throw (RuntimeException) r;
                    }
                    replies[e.getValue().get(k)] = r;
                    ran.add(r);
                }
                Object waited = got.get(got.size() - 1);
                if (waited instanceof RuntimeException) {
                    throw (RuntimeException) waited;
                }
                if (!ran.isEmpty()) {
                    d.check(waited, what, ran);
                }
            }
            pending = again;
            if (!pending.isEmpty()) {
                refreshTopology();
            }
        }
        if (!pending.isEmpty()) {
            throw new RedisException(what + " was redirected 5 times: the cluster is changing its slot map; retry");
        }
        return java.util.Arrays.asList(replies);
    }

    private static byte[] keyBytes(Object key) {
        return key instanceof byte[] ? (byte[]) key : key.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** The primary serving `key`'s slot, as Lettuce last read the slot map. */
    RedisClusterNode ownerOf(byte[] key) {
        RedisClusterNode node = cluster.getPartitions().getPartitionBySlot(SlotHash.getSlot(key));
        if (node == null) {
            throw new RedisException("no node serves the slot of " + new String(key, StandardCharsets.UTF_8));
        }
        return node;
    }

    private synchronized Link durableLink(String id, RedisClusterNode node) {
        Link link = durableLinks.get(id);
        if (link == null || !link.conn.isOpen()) {
            link = open(node);
            durableLinks.put(id, link);
        }
        return link;
    }

    /** A connection of its own (blocking pops hold it): to the server, or to cluster node `node`. */
    Link open(RedisClusterNode node) {
        if (node == null) {
            return new Link(nodes.connect(ByteArrayCodec.INSTANCE, seed));
        }
        RedisURI uri = RedisURI.builder(seed)
                .withHost(node.getUri().getHost())
                .withPort(node.getUri().getPort())
                .build();
        return new Link(nodes.connect(ByteArrayCodec.INSTANCE, uri));
    }

    /** A dedicated connection. */
    static final class Link implements AutoCloseable {
        private final StatefulRedisConnection<byte[], byte[]> conn;

        Link(StatefulRedisConnection<byte[], byte[]> conn) {
            this.conn = conn;
        }

        Object call(Object... command) {
            String name = (String) command[0];
            return await(conn.async().dispatch(keyword(name), new ReplyOutput(), args(command, false)));
        }

        /** Pipelined; each reply or the RuntimeException it failed with. */
        List<Object> callAll(List<Object[]> commands) {
            List<RedisFuture<Object>> futures = new ArrayList<>();
            for (Object[] c : commands) {
                futures.add(conn.async().dispatch(keyword((String) c[0]), new ReplyOutput(), args(c, false)));
            }
            List<Object> out = new ArrayList<>();
            for (RedisFuture<Object> f : futures) {
                try {
                    out.add(await(f));
                } catch (RuntimeException e) {
                    out.add(e);
                }
            }
            return out;
        }

        @Override
        public void close() {
            conn.close();
        }
    }

    static CommandArgs<byte[], byte[]> args(Object[] command, boolean keyed) {
        CommandArgs<byte[], byte[]> args = new CommandArgs<>(ByteArrayCodec.INSTANCE);
        for (int i = 1; i < command.length; i++) {
            Object a = command[i];
            byte[] b;
            if (a instanceof byte[]) {
                b = (byte[]) a;
            } else if (a instanceof Number) {
                args.add(((Number) a).longValue());
                continue;
            } else {
                b = a.toString().getBytes(StandardCharsets.UTF_8);
            }
            if (i == 1 && keyed) {
                args.addKey(b);
            } else {
                args.add(b);
            }
        }
        return args;
    }

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

    static Object await(Future<Object> f) {
        return await(f, AWAIT);
    }

    static Object await(Future<Object> f, Duration timeout) {
        try {
            return f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            f.cancel(false);                 // its reply, should one come, is not waited for
            throw new RedisCommandTimeoutException("no reply within " + timeout);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause;
            }
            throw new RedisException(cause);   // an I/O error: a connection error, retried
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    @Override
    public void close() {
        synchronized (this) {
            durableLinks.values().forEach(Link::close);
        }
        if (conn != null) {
            conn.close();
        }
        if (cluster != null) {
            cluster.close();
        }
        nodes.shutdown();
        client.shutdown();
        resources.shutdown();
    }
}
