package dev.rmq.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * A bean method consuming a topic (or a queue) under a Worker started and stopped with the
 * application context. The method takes a {@link dev.rmq.Delivery} or a String (the body);
 * returning acks the message, throwing nacks it ({@link dev.rmq.DeadLetter}: to dead).
 * Unset values (0, "") take the {@code rmq.*} properties.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface RmqListener {
    /** The topic to consume (with slots), or set queue() instead. */
    String topic() default "";

    /** The topic's slot count (a power of two). */
    int slots() default 16;

    /** A single queue to consume instead of a topic. */
    String queue() default "";

    /** Handlers at once; 0: rmq.concurrency. */
    int concurrency() default 0;
}
