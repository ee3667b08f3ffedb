package rmq.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.awscore.retry.AwsRetryStrategy;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.http.apache.ApacheHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.Message;

/**
 * The gateway serving HTTPS (--tls-cert, --tls-key) to the AWS SDK for Java v2, which trusts
 * the test's CA through a truststore built from its PEM file. The certificates (a CA and a
 * certificate for 127.0.0.1 it signed) are made by tests/tls_support.py, as for the Python
 * tests; this class starts its own gateway against the run's redis-server.
 */
@ExtendWith(Servers.class)
class GatewayTlsTest {
    static Path certs;
    static Process gateway;
    static Path log;
    static int port;

    @BeforeAll
    static void start() throws Exception {
        Servers servers = Servers.get();
        certs = Files.createTempDirectory("rmq-gw-java-tls-");
        Process make = new ProcessBuilder("python3", Servers.repo().resolve("tests/tls_support.py").toString(),
                certs.toString()).redirectErrorStream(true).start();
        String made = new String(make.getInputStream().readAllBytes());
        assertTrue(make.waitFor(60, TimeUnit.SECONDS) && make.exitValue() == 0, "tls_support.py: " + made);
        port = Servers.freePort();
        log = certs.resolve("gateway.log");
        gateway = new ProcessBuilder(Servers.gatewayBin(), "--listen", "127.0.0.1:" + port,
                "--redis", "redis://127.0.0.1:" + servers.redisPort,
                "--tls-cert", certs.resolve("server.pem").toString(), "--tls-key", certs.resolve("server-key.pem").toString())
                .redirectErrorStream(true).redirectOutput(log.toFile()).start();
        Servers.waitFor(() -> Files.readString(log).contains("listening on"), "rmq-gateway (HTTPS)", gateway, log);
    }

    @AfterAll
    static void stop() throws Exception {
        Servers.stop(gateway);
    }

    /** Trust managers that trust the certificates of a PEM file and nothing else. */
    static TrustManagerFactory trusting(Path pem) throws Exception {
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        try (InputStream in = Files.newInputStream(pem)) {
            int i = 0;
            for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                store.setCertificateEntry("ca" + i++, c);
            }
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(store);
        return tmf;
    }

    static SqsClient sqs(Path ca) throws Exception {
        TrustManagerFactory tmf = trusting(ca);
        return SqsClient.builder().endpointOverride(URI.create("https://127.0.0.1:" + port))
            .region(Region.US_EAST_1)
            .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("local", "local")))
            .httpClientBuilder(ApacheHttpClient.builder().socketTimeout(Duration.ofSeconds(60))
                .tlsTrustManagersProvider(tmf::getTrustManagers))
            .overrideConfiguration(o -> o.retryStrategy(AwsRetryStrategy.doNotRetry()))
            .build();
    }

    @Test
    void sendsAndReceivesOverHttps() throws Exception {
        try (SqsClient sqs = sqs(certs.resolve("ca.pem"))) {
            String url = sqs.createQueue(b -> b.queueName("java-tls")).queueUrl();
            assertEquals("https://127.0.0.1:" + port + "/000000000000/java-tls", url);
            sqs.sendMessage(b -> b.queueUrl(url).messageBody("over https from Java"));
            List<Message> got = sqs.receiveMessage(b -> b.queueUrl(url).waitTimeSeconds(10)).messages();
            assertEquals(1, got.size());
            assertEquals("over https from Java", got.get(0).body());
            sqs.deleteMessage(b -> b.queueUrl(url).receiptHandle(got.get(0).receiptHandle()));
        }
    }

    @Test
    void refusesAGatewayItsCaDidNotSign() throws Exception {
        try (SqsClient sqs = sqs(certs.resolve("other-ca.pem"))) {
            SdkClientException e = assertThrows(SdkClientException.class, () -> sqs.listQueues());
            Throwable cause = e;
            while (cause.getCause() != null && !(cause instanceof javax.net.ssl.SSLException)) {
                cause = cause.getCause();
            }
            assertTrue(cause instanceof javax.net.ssl.SSLException, "not a TLS refusal: " + e);
        }
    }
}
