package dev.rmq;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A worker in a JVM of its own, for tests that kill it: consumes queue args[1] at
 * args[0] with a lease of args[2] ms; each handler prints "started BODY DELIVERIES" and
 * then hangs.
 */
public final class ChildWorker {
    private ChildWorker() {}

    public static void main(String[] args) throws Exception {
        RmqClient rmq = RmqClient.create(args[0]);
        rmq.worker(rmq.queue(args[1]), m -> {
            System.out.println("started " + m.body() + " " + m.deliveries());
            System.out.flush();
            Thread.sleep(Long.MAX_VALUE);
        }, WorkerOptions.builder().concurrency(1).lease(Duration.ofMillis(Long.parseLong(args[2]))).build()).start();
        Thread.sleep(Long.MAX_VALUE);
    }

    static Process spawn(String uri, String queue, Duration lease) throws IOException {
        String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
        return new ProcessBuilder(List.of(java, "-cp", System.getProperty("java.class.path"),
                ChildWorker.class.getName(), uri, queue, String.valueOf(lease.toMillis())))
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
    }

    static String readLine(Process p, Duration timeout) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        return CompletableFuture.supplyAsync(() -> {
            try {
                return r.readLine();
            } catch (IOException e) {
                return null;
            }
        }).get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    }
}
