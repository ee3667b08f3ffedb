package dev.rmq;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Conversions of ReplyOutput's values. */
final class Replies {
    private Replies() {}

    static String text(Object reply) {
        return reply instanceof byte[] ? new String((byte[]) reply, StandardCharsets.UTF_8) : String.valueOf(reply);
    }

    /** A flat field/value list as a map: keys with '-' written '_', byte values as text. */
    static Map<String, Object> map(Object reply) {
        Map<String, Object> out = new LinkedHashMap<>();
        List<?> items = (List<?>) reply;
        for (int i = 0; i + 1 < items.size(); i += 2) {
            Object v = items.get(i + 1);
            out.put(text(items.get(i)).replace('-', '_'), v instanceof byte[] ? text(v) : v);
        }
        return out;
    }
}
