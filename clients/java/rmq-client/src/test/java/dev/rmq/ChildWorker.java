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
 * A worker in a JVM of its own. `hang URI QUEUE LEASE_MS`: consumes the queue, each handler
 * prints "started BODY DELIVERIES" and hangs (for tests that kill it). `groups URI TOPIC
 * SLOTS`: consumes the topic at concurrency 8, each handler counting itself in the server
 * key active:GROUP (the body up to ':') while it runs, and in `overlaps` when it found
 * another handler of its group running; prints "ready" once started.
 */
public final class ChildWorker {
    private ChildWorker() {}

    public static void main(String[] args) throws Exception {
        RmqClient rmq = RmqClient.create(args[1]);
        if (args[0].equals("hang")) {
            rmq.worker(rmq.queue(args[2]), m -> {
                System.out.println("started " + m.body() + " " + m.deliveries());
                System.out.flush();
                Thread.sleep(Long.MAX_VALUE);
            }, WorkerOptions.builder().concurrency(1).lease(Duration.ofMillis(Long.parseLong(args[3]))).build()).start();
        } else {
            rmq.worker(rmq.topic(args[2], Integer.parseInt(args[3])), m -> {
                String active = "active:" + m.body().substring(0, m.body().indexOf(':'));
                if ((Long) rmq.redis().call("INCR", active) > 1) {
                    rmq.redis().call("INCR", "overlaps");
                }
                Thread.sleep(3);
                rmq.redis().call("DECR", active);
            }, WorkerOptions.builder().concurrency(8).build()).start();
            System.out.println("ready");
            System.out.flush();
        }
        Thread.sleep(Long.MAX_VALUE);
    }

    static Process spawn(String... args) throws IOException {
        String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = new java.util.ArrayList<>(List.of(java, "-cp", System.getProperty("java.class.path"),
                ChildWorker.class.getName()));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
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
