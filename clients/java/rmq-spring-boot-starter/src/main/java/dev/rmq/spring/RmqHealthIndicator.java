package dev.rmq.spring;

import dev.rmq.RmqClient;
import dev.rmq.Worker;
import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/** UP when the server answers PING and no worker has stopped by itself. */
public class RmqHealthIndicator extends AbstractHealthIndicator {
    private final RmqClient rmq;
    private final RmqWorkers workers;

    public RmqHealthIndicator(RmqClient rmq, RmqWorkers workers) {
        this.rmq = rmq;
        this.workers = workers;
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) {
        boolean ping = rmq.ping();
        int inFlight = 0;
        Throwable fatal = null;
        for (Worker w : workers.workers()) {
            inFlight += w.inFlight();
            if (w.fatalError() != null) {
                fatal = w.fatalError();
            }
        }
        builder.withDetail("workers", workers.workers().size()).withDetail("inFlight", inFlight);
        if (!ping || fatal != null) {
            builder.down();
            if (fatal != null) {
                builder.withDetail("error", fatal.toString());
            }
        } else {
            builder.up();
        }
    }
}
