package dev.rmq;

import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.List;

/** When a schedule fires: {@code Schedule.every(Duration.ofHours(1))} or {@code Schedule.cron("0 2 * * *").zone(...)}. */
public final class Schedule {
    private final Long everyMs;
    private final String cron;
    private ZoneId zone;
    private Long start;
    private Long end;
    private Long times;

    private Schedule(Long everyMs, String cron) {
        this.everyMs = everyMs;
        this.cron = cron;
    }

    public static Schedule every(Duration every) {
        return new Schedule(Checks.millis("every", every, "every"), null);
    }

    /** A cron expression (the server checks it), in UTC unless zone() says otherwise. */
    public static Schedule cron(String expression) {
        if (expression == null || expression.isBlank()) {
            throw new IllegalArgumentException("cron needs an expression");
        }
        return new Schedule(null, expression);
    }

    public Schedule zone(ZoneId zone) {
        if (cron == null) {
            throw new IllegalArgumentException("tz goes with cron, not every");
        }
        this.zone = zone;
        return this;
    }

    public Schedule start(Instant start) {
        this.start = Checks.unixMillis("start", start, "start");
        return this;
    }

    public Schedule end(Instant end) {
        this.end = Checks.unixMillis("end", end, "end");
        return this;
    }

    /** Fire at most `times` times. */
    public Schedule times(long times) {
        this.times = Checks.bounded("times", times, "times");
        return this;
    }

    List<Object> args() {
        List<Object> out = new ArrayList<>();
        if (everyMs != null) {
            out.add("EVERY");
            out.add(everyMs);
        } else {
            out.add("CRON");
            out.add(cron);
            if (zone != null) {
                out.add("TZ");
                out.add(zone.getId());
            }
        }
        if (start != null) {
            out.add("START");
            out.add(start);
        }
        if (end != null) {
            out.add("END");
            out.add(end);
        }
        if (times != null) {
            out.add("TIMES");
            out.add(times);
        }
        return out;
    }
}
