package dev.rmq.spring;

import dev.rmq.WorkerOptions;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * {@code rmq.*}: the server ({@code rmq.redis-url}: one URI, or several comma-separated for
 * a cluster) and the workers' options, the same names as the other clients' (Duration
 * values: {@code 30s}, {@code 500ms}). {@code rmq.topic} / {@code rmq.slots} (or
 * {@code rmq.queue}) is what MessageListener beans consume.
 */
@ConfigurationProperties(prefix = "rmq")
public class RmqProperties {
    private String redisUrl = "redis://127.0.0.1:6379";
    private boolean cluster = false;
    private String topic = "";
    private int slots = 16;
    private String queue = "";
    private int concurrency = 8;
    private Duration lease = Duration.ofSeconds(30);
    private Duration maxRuntime;
    private Duration grace = Duration.ofSeconds(30);
    private Duration block = Duration.ofSeconds(1);
    private Integer quantum;

    /** The worker options these properties say, with `concurrency` if above 0. */
    WorkerOptions.Builder workerOptions(int concurrencyOverride) {
        WorkerOptions.Builder b = WorkerOptions.builder()
                .concurrency(concurrencyOverride > 0 ? concurrencyOverride : concurrency)
                .lease(lease).grace(grace).block(block);
        if (maxRuntime != null) {
            b.maxRuntime(maxRuntime);
        }
        if (quantum != null) {
            b.quantum(quantum);
        }
        return b;
    }

    public String getRedisUrl() {
        return redisUrl;
    }

    public void setRedisUrl(String redisUrl) {
        this.redisUrl = redisUrl;
    }

    public boolean isCluster() {
        return cluster;
    }

    public void setCluster(boolean cluster) {
        this.cluster = cluster;
    }

    public String getTopic() {
        return topic;
    }

    public void setTopic(String topic) {
        this.topic = topic;
    }

    public int getSlots() {
        return slots;
    }

    public void setSlots(int slots) {
        this.slots = slots;
    }

    public String getQueue() {
        return queue;
    }

    public void setQueue(String queue) {
        this.queue = queue;
    }

    public int getConcurrency() {
        return concurrency;
    }

    public void setConcurrency(int concurrency) {
        this.concurrency = concurrency;
    }

    public Duration getLease() {
        return lease;
    }

    public void setLease(Duration lease) {
        this.lease = lease;
    }

    public Duration getMaxRuntime() {
        return maxRuntime;
    }

    public void setMaxRuntime(Duration maxRuntime) {
        this.maxRuntime = maxRuntime;
    }

    public Duration getGrace() {
        return grace;
    }

    public void setGrace(Duration grace) {
        this.grace = grace;
    }

    public Duration getBlock() {
        return block;
    }

    public void setBlock(Duration block) {
        this.block = block;
    }

    public Integer getQuantum() {
        return quantum;
    }

    public void setQuantum(Integer quantum) {
        this.quantum = quantum;
    }
}
