package dev.rmq;

import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.output.CommandOutput;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

/**
 * Any reply as plain Java values: byte[] for strings, Long for integers, List for arrays
 * (nested as sent), null for nil. The module's replies are all of these shapes (RESP2).
 */
final class ReplyOutput extends CommandOutput<byte[], byte[], Object> {
    private static final class Frame {
        final List<Object> list;
        final int expected;

        Frame(List<Object> list, int expected) {
            this.list = list;
            this.expected = expected;
        }
    }

    private final Deque<Frame> open = new ArrayDeque<>();

    ReplyOutput() {
        super(ByteArrayCodec.INSTANCE, null);
    }

    @Override
    public void set(ByteBuffer bytes) {
        add(bytes == null ? null : ByteArrayCodec.INSTANCE.decodeValue(bytes));
    }

    @Override
    public void setSingle(ByteBuffer bytes) {
        set(bytes);
    }

    @Override
    public void set(long integer) {
        add(integer);
    }

    @Override
    public void set(boolean value) {
        add(value ? 1L : 0L);
    }

    @Override
    public void multi(int count) {
        if (count < 0) {
            add(null);
            return;
        }
        List<Object> list = new ArrayList<>(count);
        attach(list);
        if (count > 0) {
            open.push(new Frame(list, count));
        } else {
            closeFull();
        }
    }

    private void add(Object value) {
        attach(value);
        closeFull();
    }

    private void attach(Object value) {
        if (open.isEmpty()) {
            output = value;
        } else {
            open.peek().list.add(value);
        }
    }

    /** Arrays that got all their elements are done: the next value goes to their parent. */
    private void closeFull() {
        while (!open.isEmpty() && open.peek().list.size() == open.peek().expected) {
            open.pop();
        }
    }
}
