package dev.rmq;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * One redis-server (or Valkey) the tests start on a free port on 127.0.0.1, with its own
 * temporary --dir and the RMQ module loaded; stopped only through its own Process (its pid).
 * RMQ_MODULE names the module (default: the repository's target/release/librmq.so),
 * RMQ_SERVER_BIN the server binary (default: redis-server on PATH).
 */
public final class TestServer implements AutoCloseable {
    public final int port;
    private final Path dir;
    private final Process process;

    private TestServer(int port, List<String> extra) throws IOException {
        this.port = port;
        dir = Files.createTempDirectory("rmq-java-test");
        List<String> cmd = new ArrayList<>(List.of(serverBinary(), "--port", String.valueOf(port),
                "--bind", "127.0.0.1", "--dir", dir.toString(), "--logfile", dir.resolve("server.log").toString(),
                "--daemonize", "no", "--save", "", "--appendonly", "no", "--loadmodule", modulePath().toString()));
        cmd.addAll(extra);
        process = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(dir.resolve("stdout.log").toFile()).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!ping()) {
            if (!process.isAlive() || System.nanoTime() > deadline) {
                String log = Files.exists(dir.resolve("server.log")) ? Files.readString(dir.resolve("server.log")) : "";
                close();
                throw new IllegalStateException("the server did not start: " + cmd + "\n" + log);
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    public static TestServer start(String... extraArgs) throws IOException {
        return new TestServer(freePort(), List.of(extraArgs));
    }

    /** A cluster node: its port and its bus port (port + 10000) free, not in `taken`. */
    public static TestServer startClusterNode(java.util.Set<Integer> taken) throws IOException {
        while (true) {
            int p = freePort();
            if (p + 10000 > 65535 || taken.contains(p) || taken.contains(p + 10000)) {
                continue;
            }
            try (ServerSocket bus = new ServerSocket(p + 10000)) {
                bus.getLocalPort();
            } catch (IOException busy) {
                continue;
            }
            taken.add(p);
            taken.add(p + 10000);
            return new TestServer(p, List.of("--cluster-enabled", "yes", "--cluster-config-file",
                    "nodes-" + p + ".conf", "--cluster-node-timeout", "2000"));
        }
    }

    /** SIGKILL, by this server's pid. */
    public void kill() throws InterruptedException {
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }

    public String uri() {
        return "redis://127.0.0.1:" + port;
    }

    public long pid() {
        return process.pid();
    }

    /** The repository root: the nearest parent holding clients/conformance.json. */
    public static Path repo() {
        Path p = Paths.get("").toAbsolutePath();
        while (p != null && !Files.exists(p.resolve("clients/conformance.json"))) {
            p = p.getParent();
        }
        if (p == null) {
            throw new IllegalStateException("not inside the RMQ repository");
        }
        return p;
    }

    static Path modulePath() {
        String env = System.getenv("RMQ_MODULE");
        Path p = env != null && !env.isEmpty() ? Paths.get(env) : repo().resolve("target/release/librmq.so");
        if (!Files.isRegularFile(p)) {
            throw new IllegalStateException("RMQ module not found at " + p
                    + ": run `cargo build --release` or set RMQ_MODULE");
        }
        return p.toAbsolutePath();
    }

    static String serverBinary() {
        String env = System.getenv("RMQ_SERVER_BIN");
        return env != null && !env.isEmpty() ? env : "redis-server";
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private boolean ping() {
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.setSoTimeout(2000);
            OutputStream out = s.getOutputStream();
            out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            byte[] buf = new byte[7];
            int n = in.read(buf);
            return n > 0 && new String(buf, 0, n, StandardCharsets.US_ASCII).startsWith("+PONG");
        } catch (IOException e) {
            return false;
        }
    }

    @Override
    public void close() {
        process.destroy();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        } catch (IOException ignored) {
            // a temp dir left behind is harmless
        }
    }
}
