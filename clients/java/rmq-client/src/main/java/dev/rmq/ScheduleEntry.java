package dev.rmq;

import java.time.Instant;

/**
 * One entry of RMQ.SCHEDULE Q LIST: `spec` the SET arguments after the name, `next` the
 * next firing (null when none is left), `fired` how many times it fired, `last` the planned
 * time of the latest firing (null before the first).
 */
public record ScheduleEntry(String queue, String name, String spec, Instant next, Long fired, Instant last) {}
