package dev.rmq;

/** Thrown by a handler to send its message straight to dead (RMQ.NACK ... DEAD). */
public class DeadLetter extends Exception {
    public DeadLetter(String message) {
        super(message);
    }

    public DeadLetter(String message, Throwable cause) {
        super(message, cause);
    }
}
