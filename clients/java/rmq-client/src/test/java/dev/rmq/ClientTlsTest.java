package dev.rmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lettuce.core.RedisException;
import io.lettuce.core.SslOptions;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * rediss://: a server with --tls-port and a certificate signed by a CA the test makes
 * (openssl), trusted through a PKCS12 truststore (keytool) passed as Lettuce's SslOptions;
 * pushes, pops, acks and a worker over TLS. Without the truststore the handshake fails.
 */
class ClientTlsTest {
    static Path certs;
    static TestServer server;
    static int tlsPort;
    static File truststore;

    @BeforeAll
    static void start() throws Exception {
        certs = Files.createTempDirectory("rmq-java-tls");
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=rmq-test-ca",
                "-keyout", "ca.key", "-out", "ca.crt");
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                "-keyout", "server.key", "-out", "server.csr");
        Files.writeString(certs.resolve("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
        run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", "san.ext", "-out", "server.crt");
        run("keytool", "-importcert", "-noprompt", "-alias", "rmq-test-ca", "-file", "ca.crt",
                "-keystore", "truststore.p12", "-storetype", "PKCS12", "-storepass", "changeit");
        truststore = certs.resolve("truststore.p12").toFile();
        tlsPort = TestServer.freePort();
        server = TestServer.start("--tls-port", String.valueOf(tlsPort),
                "--tls-cert-file", certs.resolve("server.crt").toString(),
                "--tls-key-file", certs.resolve("server.key").toString(),
                "--tls-ca-cert-file", certs.resolve("ca.crt").toString(),
                "--tls-auth-clients", "no");
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) {
            server.close();
        }
        try (Stream<Path> files = Files.walk(certs)) {
            files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        }
    }

    private static void run(String... cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).directory(certs.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, String.join(" ", cmd) + ": " + out);
    }

    private static String uri() {
        return "rediss://127.0.0.1:" + tlsPort;
    }

    @Test
    void pushPopAckAndAWorkerOverTls() throws Exception {
        SslOptions ssl = SslOptions.builder().truststore(truststore, "changeit").build();
        try (RmqClient rmq = RmqClient.create(uri(), ssl)) {
            assertTrue(rmq.ping());
            Queue q = rmq.queue("tls:q");
            assertEquals(2, q.push(PriorityMessage.of("a", 5), PriorityMessage.of("b", 1)));
            List<Delivery> got = q.pop(2);
            assertEquals(List.of("a", "b"), got.stream().map(Delivery::body).toList());
            assertTrue(got.get(0).ack());
            assertTrue(got.get(1).ack());
            assertEquals(0, q.info().waiting() + q.info().inflight());

            // a worker's blocking pops run on connections of their own: TLS too
            Topic t = rmq.topic("tls:t", 4);
            List<Message> ms = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                ms.add(PriorityMessage.of("m" + i, 1));
            }
            assertEquals(20, t.push(ms));
            Worker w = rmq.worker(t, m -> { }, WorkerOptions.builder().concurrency(4).build()).start();
            try {
                Wait.until("20 processed", Duration.ofSeconds(60), () -> w.stats().processed() == 20);
            } finally {
                w.close();
            }
            assertEquals(0, t.info().waiting() + t.info().inflight());
        }
    }

    @Test
    void anUntrustedCertificateIsRefused() {
        // the JVM's own trust store does not hold the test's CA
        assertThrows(RedisException.class, () -> {
            try (RmqClient rmq = RmqClient.create(uri())) {
                rmq.ping();
            }
        });
    }
}
