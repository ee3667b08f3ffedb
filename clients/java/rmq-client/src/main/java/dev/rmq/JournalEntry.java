package dev.rmq;

import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * One event of a queue's journal (RMQ.TRACE): `id` the stream entry's id (its time, Unix ms,
 * then a sequence), `fields` event, message, [sha1,] deliveries, by[, id][, due | priority].
 */
public record JournalEntry(String id, Map<String, byte[]> fields) {
    /** A field as UTF-8 text, or null when the entry has none of that name. */
    public String field(String name) {
        byte[] v = fields.get(name);
        return v == null ? null : new String(v, StandardCharsets.UTF_8);
    }

    /** The event: pushed, merged, popped, acked, nacked, expired, dead, replayed, cancelled, purged. */
    public String event() {
        return field("event");
    }
}
