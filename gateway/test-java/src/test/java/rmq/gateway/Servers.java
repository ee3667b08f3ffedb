package rmq.gateway;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.awscore.retry.AwsRetryStrategy;
import software.amazon.awssdk.http.apache.ApacheHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;

/**
 * One redis-server (with the module) and one rmq-gateway for the whole test run, each on a
 * free 127.0.0.1 port, started by the first test class that asks and stopped by pid (SIGTERM,
 * then SIGKILL) when JUnit closes its root store. Binaries: target/release of the repository
 * (system property rmq.repo); RMQ_GATEWAY, RMQ_MODULE and RMQ_SERVER_BIN override them.
 */
public final class Servers implements BeforeAllCallback, ExtensionContext.Store.CloseableResource, AutoCloseable {
    private static Servers running;

    final Path dir;
    final int redisPort;
    final int gatewayPort;
    private final Process redis;
    private volatile Process gateway;
    private final Path gatewayLog;

    private Servers() throws Exception {
        Path repo = repo();
        String module = env("RMQ_MODULE", repo.resolve("target/release/librmq.so").toString());
        String gatewayBin = gatewayBin();
        String serverBin = env("RMQ_SERVER_BIN", "redis-server");
        dir = Files.createTempDirectory("rmq-gw-java-");
        redisPort = freePort();
        redis = new ProcessBuilder(serverBin, "--port", String.valueOf(redisPort), "--bind", "127.0.0.1",
                "--dir", dir.toString(), "--save", "", "--appendonly", "no", "--daemonize", "no",
                "--loadmodule", module)
                .redirectErrorStream(true).redirectOutput(dir.resolve("redis.log").toFile()).start();
        gatewayPort = freePort();
        gatewayLog = dir.resolve("gateway.log");
        // Whatever ends this JVM, and a start that fails half-way, stops what it started: the
        // test store's close is not reached when the engine does not end normally.
        Runtime.getRuntime().addShutdownHook(new Thread(this::stopQuietly));
        try {
            waitFor(() -> redisPing(), "redis-server on port " + redisPort, redis, dir.resolve("redis.log"));
            gateway = new ProcessBuilder(gatewayBin, "--listen", "127.0.0.1:" + gatewayPort,
                    "--redis", "redis://127.0.0.1:" + redisPort)
                    .redirectErrorStream(true).redirectOutput(gatewayLog.toFile()).start();
            waitFor(() -> Files.readString(gatewayLog).contains("listening on"), "rmq-gateway", gateway, gatewayLog);
        } catch (Exception e) {
            stopQuietly();
            throw e;
        }
    }

    /** The repository's root (system property rmq.repo). */
    static Path repo() {
        return Path.of(System.getProperty("rmq.repo", "../..")).toAbsolutePath().normalize();
    }

    /** The rmq-gateway binary (RMQ_GATEWAY overrides target/release's). */
    static String gatewayBin() {
        return env("RMQ_GATEWAY", repo().resolve("target/release/rmq-gateway").toString());
    }

    /** The servers of this run, started on first use. */
    public static synchronized Servers get() throws Exception {
        if (running == null) {
            running = new Servers();
        }
        return running;
    }

    @Override
    public void beforeAll(ExtensionContext context) throws Exception {
        Servers s = get();
        context.getRoot().getStore(ExtensionContext.Namespace.GLOBAL).getOrComputeIfAbsent(Servers.class, k -> s);
    }

    @Override
    public void close() throws Exception {
        stop(gateway);
        stop(redis);
    }

    private void stopQuietly() {
        try {
            close();
        } catch (Exception e) {
            // at exit or after a failed start: nothing left to report it to
        }
    }

    public String url() {
        return "http://127.0.0.1:" + gatewayPort;
    }

    /**
     * The SDK pointed at the gateway as the README does (MD5 checks on, the default); no
     * retries, so that an error is seen as the gateway sent it.
     */
    public SqsClient sqs() {
        return SqsClient.builder().endpointOverride(URI.create(url()))
            .region(Region.US_EAST_1)
            .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("local", "local")))
            .httpClientBuilder(ApacheHttpClient.builder().socketTimeout(Duration.ofSeconds(60)))
            .overrideConfiguration(o -> o.retryStrategy(AwsRetryStrategy.doNotRetry()))
            .build();
    }

    /** One Redis command (RESP), its reply as text: for the tests' look at the server. */
    public String redis(String... args) throws IOException {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), redisPort)) {
            s.setSoTimeout(10000);
            StringBuilder req = new StringBuilder("*" + args.length + "\r\n");
            for (String a : args) {
                req.append('$').append(a.getBytes(StandardCharsets.UTF_8).length).append("\r\n").append(a).append("\r\n");
            }
            OutputStream out = s.getOutputStream();
            out.write(req.toString().getBytes(StandardCharsets.UTF_8));
            out.flush();
            return readReply(s.getInputStream());
        }
    }

    private static String readReply(InputStream in) throws IOException {
        String line = readLine(in);
        switch (line.charAt(0)) {
            case '+': case ':': return line.substring(1);
            case '-': return "ERR:" + line.substring(1);
            case '$': {
                int n = Integer.parseInt(line.substring(1));
                if (n < 0) {
                    return null;
                }
                byte[] b = in.readNBytes(n + 2);
                return new String(b, 0, n, StandardCharsets.UTF_8);
            }
            case '*': {
                int n = Integer.parseInt(line.substring(1));
                List<String> items = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    items.add(readReply(in));
                }
                return items.toString();
            }
            default: throw new IOException("unexpected reply " + line);
        }
    }

    private static String readLine(InputStream in) throws IOException {
        StringBuilder sb = new StringBuilder();
        int c;
        while ((c = in.read()) != '\r') {
            if (c < 0) {
                throw new IOException("connection closed");
            }
            sb.append((char) c);
        }
        in.read();
        return sb.toString();
    }

    private boolean redisPing() {
        try {
            return "PONG".equals(redis("PING"));
        } catch (IOException e) {
            return false;
        }
    }

    interface Check {
        boolean ok() throws Exception;
    }

    static void waitFor(Check check, String what, Process p, Path log) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            if (check.ok()) {
                return;
            }
            if (!p.isAlive()) {
                throw new IllegalStateException(what + " exited: " + Files.readString(log));
            }
            Thread.sleep(50);
        }
        stop(p);
        throw new IllegalStateException(what + " did not start: " + Files.readString(log));
    }

    static void stop(Process p) throws InterruptedException {
        if (p != null && p.isAlive()) {
            p.destroy(); // SIGTERM to that pid
            if (!p.waitFor(15, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                p.waitFor(15, TimeUnit.SECONDS);
            }
        }
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    private static String env(String name, String otherwise) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? otherwise : v;
    }
}
