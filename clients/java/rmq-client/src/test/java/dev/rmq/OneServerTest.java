package dev.rmq;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * A test class whose tests share one server with the module (started before the first,
 * stopped by pid after the last) and a client of it. The classes run one after another
 * (no parallel execution is configured), so the fields belong to one class at a time.
 */
abstract class OneServerTest {
    static TestServer server;
    static RmqClient rmq;

    @BeforeAll
    static void startServer() throws Exception {
        server = TestServer.start();
        rmq = RmqClient.create(server.uri());
    }

    @AfterAll
    static void stopServer() {
        rmq.close();
        server.close();
    }
}
