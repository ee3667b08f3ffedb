package dev.rmq;

/**
 * The entry point: {@code RmqClient.create("redis://127.0.0.1:6380")} (or rediss:// for
 * TLS, or several comma-separated URIs for a cluster's seeds). One multiplexed Lettuce
 * connection serves every queue and topic made from it; workers add a dedicated connection
 * per server for their blocking pops. Close it when done.
 */
public final class RmqClient implements AutoCloseable {
    private final Redis redis;

    private RmqClient(Redis redis) {
        this.redis = redis;
    }

    /** Connects: one URI is one server; several, comma-separated, are the seeds of a cluster. */
    public static RmqClient create(String uri) {
        return create(uri, null);
    }

    /**
     * As create(uri), with the TLS settings of rediss:// URIs: Lettuce's SslOptions, e.g.
     * {@code SslOptions.builder().truststore(file, password).build()} to trust a private CA
     * (null: the JVM's trust store, javax.net.ssl.trustStore).
     */
    public static RmqClient create(String uri, io.lettuce.core.SslOptions ssl) {
        return new RmqClient(Redis.connect(uri, false, ssl));
    }

    /** Connects to a cluster through one or more seed URIs (comma-separated). */
    public static RmqClient createCluster(String uris) {
        return createCluster(uris, null);
    }

    /** As createCluster(uris), with the TLS settings of rediss:// URIs (see create(uri, ssl)). */
    public static RmqClient createCluster(String uris, io.lettuce.core.SslOptions ssl) {
        return new RmqClient(Redis.connect(uris, true, ssl));
    }

    public Topic topic(String name, int slots) {
        return new Topic(redis, name, slots, null);
    }

    public Queue queue(String name) {
        return new Queue(redis, name, null);
    }

    public boolean isCluster() {
        return redis.isCluster();
    }

    /** A worker consuming `source` with `listener`; start() it, close() it. */
    public Worker worker(Target source, MessageListener listener, WorkerOptions options) {
        return new Worker(redis, source, listener, options);
    }

    public Worker worker(Target source, MessageListener listener) {
        return worker(source, listener, WorkerOptions.builder().build());
    }

    /** PING: true when the server (every node of a cluster: the one asked) answers. */
    public boolean ping() {
        return "PONG".equals(Replies.text(redis.call("PING")));
    }

    Redis redis() {
        return redis;
    }

    @Override
    public void close() {
        redis.close();
    }
}
