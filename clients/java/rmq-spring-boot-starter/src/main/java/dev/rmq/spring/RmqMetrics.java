package dev.rmq.spring;

import dev.rmq.Delivery;
import dev.rmq.Worker;
import dev.rmq.WorkerListener;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;

/**
 * Micrometer meters of each worker, tagged worker=NAME: rmq.worker.completed (a Timer of
 * the handlers that returned), rmq.worker.failed and rmq.worker.errors (counters),
 * rmq.worker.in.flight (a gauge).
 */
public class RmqMetrics {
    private final MeterRegistry registry;

    public RmqMetrics(MeterRegistry registry) {
        this.registry = registry;
    }

    WorkerListener listener(String worker) {
        Timer completed = Timer.builder("rmq.worker.completed").tag("worker", worker)
                .description("handlers that returned (messages acked)").register(registry);
        Counter failed = Counter.builder("rmq.worker.failed").tag("worker", worker)
                .description("handlers that threw or ran out of time").register(registry);
        Counter errors = Counter.builder("rmq.worker.errors").tag("worker", worker)
                .description("server errors (fetch, ack, nack)").register(registry);
        return new WorkerListener() {
            @Override
            public void completed(Delivery message, Duration took) {
                completed.record(took);
            }

            @Override
            public void failed(Delivery message, Throwable error) {
                failed.increment();
            }

            @Override
            public void error(Throwable error) {
                errors.increment();
            }
        };
    }

    void gauge(String worker, Worker w) {
        Gauge.builder("rmq.worker.in.flight", w, Worker::inFlight).tag("worker", worker)
                .description("deliveries taken and not yet settled").register(registry);
    }
}
