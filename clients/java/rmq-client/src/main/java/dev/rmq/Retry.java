package dev.rmq;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisException;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

/** Calls retried on connection errors (not on the server's error replies), with backoff. */
final class Retry {
    private static final Logger LOG = Logger.getLogger("dev.rmq");

    private Retry() {}

    static boolean transientError(Throwable e) {
        if (e instanceof RedisCommandExecutionException) {
            String m = String.valueOf(e.getMessage());
            return m.startsWith("CLUSTERDOWN") || m.startsWith("TRYAGAIN") || m.startsWith("LOADING");
        }
        return e instanceof RedisException;
    }

    static <T> T run(Supplier<T> call, String what) {
        long delayMs = 50;
        for (int attempt = 1; ; attempt++) {
            try {
                return call.get();
            } catch (RuntimeException e) {
                if (attempt == 4 || !transientError(e)) {
                    throw e;
                }
                LOG.log(Level.WARNING, what + " failed (" + e + "), retrying in " + delayMs + " ms");
                try {
                    Thread.sleep(delayMs);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
                delayMs *= 4;
            }
        }
    }
}
