package dev.rmq;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;

/** Argument checks against protocol.json's bounds: IllegalArgumentException before sending. */
final class Checks {
    private Checks() {}

    static long bounded(String name, long value, String bound) {
        long[] b = Protocol.BOUNDS.get(bound);
        return within(name, value, b[0], b[1]);
    }

    static long within(String name, long value, long low, long high) {
        if (value < low || value > high) {
            throw new IllegalArgumentException(
                    name + " must be in [" + low + ", " + high + "], got " + value);
        }
        return value;
    }

    /** A duration in whole ms within `bound` (sub-millisecond parts are refused, not rounded). */
    static long millis(String name, Duration d, String bound) {
        if (d == null) {
            throw new IllegalArgumentException(name + " must not be null");
        }
        long[] b = Protocol.BOUNDS.get(bound);
        if (d.isNegative() || d.getNano() % 1_000_000 != 0 || d.getSeconds() > b[1] / 1000) {
            throw new IllegalArgumentException(name + " must be whole milliseconds in ["
                    + b[0] + ", " + b[1] + "] ms, got " + d);
        }
        long ms = d.toMillis();
        return bounded(name, ms, bound);
    }

    /** An instant as Unix ms within `bound`. */
    static long unixMillis(String name, Instant t, String bound) {
        if (t == null) {
            throw new IllegalArgumentException(name + " must not be null");
        }
        long ms;
        try {
            ms = t.toEpochMilli();
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException(name + " is out of range: " + t);
        }
        return bounded(name, ms, bound);
    }

    static byte[] bytes(String name, byte[] value, String bound) {
        if (value == null) {
            throw new IllegalArgumentException(name + " must not be null");
        }
        long[] b = Protocol.BOUNDS.get(bound);
        if (value.length < b[0] || value.length > b[1]) {
            throw new IllegalArgumentException(
                    name + " must be " + b[0] + " to " + b[1] + " bytes, got " + value.length);
        }
        return value;
    }

    static byte[] utf8(String name, String s) {
        if (s == null) {
            throw new IllegalArgumentException(name + " must not be null");
        }
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static byte[] body(byte[] body) {
        if (body == null || body.length == 0) {
            throw new IllegalArgumentException("a message must not be empty");
        }
        return body;
    }

    static int slots(int slots) {
        bounded("slots", slots, "slots");
        if ((slots & (slots - 1)) != 0) {
            throw new IllegalArgumentException("slots must be a power of two, got " + slots);
        }
        return slots;
    }

    static String queueName(String name) {
        if (name == null || name.isEmpty() || name.contains("{") || name.contains("}")) {
            throw new IllegalArgumentException(
                    "a queue name is a non-empty string without '{' or '}', got " + name);
        }
        return name;
    }
}
