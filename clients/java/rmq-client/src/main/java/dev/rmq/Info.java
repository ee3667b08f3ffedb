package dev.rmq;

import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * RMQ.INFO of a queue (or of a topic's queues summed: counts added up, `paused` how many
 * are, next_due / next_expiry the earliest, lag_ms the largest, `kinds` the distinct kinds).
 * Every field as the server names it is in {@link #fields()}; the common ones have accessors.
 */
public final class Info {
    private final Map<String, Object> fields;

    Info(Map<String, Object> fields) {
        this.fields = Collections.unmodifiableMap(fields);
    }

    public Map<String, Object> fields() {
        return fields;
    }

    public Object get(String field) {
        return fields.get(field);
    }

    private long count(String field) {
        Object v = fields.get(field);
        return v instanceof Long ? (Long) v : 0;
    }

    public long waiting() {
        return count("waiting");
    }

    public long ready() {
        return count("ready");
    }

    public long inflight() {
        return count("inflight");
    }

    public long dead() {
        return count("dead");
    }

    /** The queue's kind: "priority", "fixed", "range", or null while it has none. */
    public String kind() {
        return (String) fields.get("kind");
    }

    /** When the next waiting message is due, or null. */
    public Instant nextDue() {
        Object v = fields.get("next_due");
        return v == null ? null : Instant.ofEpochMilli((Long) v);
    }

    public Duration lag() {
        Object v = fields.get("lag_ms");
        return v == null ? null : Duration.ofMillis((Long) v);
    }

    static Info sum(Collection<Info> infos) {
        Map<String, Object> total = new LinkedHashMap<>();
        TreeSet<String> kinds = new TreeSet<>();
        total.put("kinds", null);
        for (Info info : infos) {
            info.fields.forEach((k, v) -> {
                if (k.equals("kind")) {
                    if (v != null) {
                        kinds.add((String) v);
                    }
                } else if (k.equals("next_due") || k.equals("next_expiry") || k.equals("lag_ms")) {
                    Object cur = total.get(k);
                    if (v == null) {
                        total.putIfAbsent(k, null);
                    } else if (cur == null) {
                        total.put(k, v);
                    } else {
                        long a = (Long) cur;
                        long b = (Long) v;
                        total.put(k, k.equals("lag_ms") ? Math.max(a, b) : Math.min(a, b));
                    }
                } else if (v instanceof Long) {
                    total.merge(k, v, (a, b) -> (Long) a + (Long) b);
                }
            });
        }
        total.put("kinds", List.copyOf(kinds));
        return new Info(total);
    }

    @Override
    public String toString() {
        return "Info" + fields;
    }
}
