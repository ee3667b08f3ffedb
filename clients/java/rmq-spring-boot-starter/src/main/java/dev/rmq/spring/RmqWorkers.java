package dev.rmq.spring;

import dev.rmq.Delivery;
import dev.rmq.MessageListener;
import dev.rmq.RmqClient;
import dev.rmq.Target;
import dev.rmq.Worker;
import dev.rmq.WorkerListener;
import dev.rmq.WorkerOptions;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ApplicationContextAware;
import org.springframework.context.SmartLifecycle;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ReflectionUtils;

/**
 * The workers of the application: one per {@link RmqListener} method and one per
 * MessageListener bean (on rmq.topic or rmq.queue), started when the context starts and
 * closed (gracefully: nothing left in flight) when it stops.
 */
public class RmqWorkers implements BeanPostProcessor, SmartLifecycle, ApplicationContextAware {
    private record Endpoint(Object bean, Method method, RmqListener spec) {}

    private final List<Endpoint> endpoints = new ArrayList<>();
    private final List<Worker> workers = new ArrayList<>();
    private ApplicationContext context;
    private volatile boolean running;

    @Override
    public void setApplicationContext(ApplicationContext context) {
        this.context = context;
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) throws BeansException {
        Class<?> type = AopUtils.getTargetClass(bean);
        ReflectionUtils.doWithMethods(type, m -> {
            RmqListener spec = AnnotatedElementUtils.findMergedAnnotation(m, RmqListener.class);
            if (spec != null) {
                if (m.getParameterCount() != 1 || !(m.getParameterTypes()[0] == Delivery.class
                        || m.getParameterTypes()[0] == String.class)) {
                    throw new IllegalStateException("@RmqListener method " + m
                            + " must take one Delivery or String");
                }
                if (spec.topic().isEmpty() == spec.queue().isEmpty()) {
                    throw new IllegalStateException("@RmqListener method " + m + " needs a topic or a queue");
                }
                ReflectionUtils.makeAccessible(m);
                synchronized (endpoints) {
                    endpoints.add(new Endpoint(bean, m, spec));
                }
            }
        });
        return bean;
    }

    @Override
    public synchronized void start() {
        RmqClient rmq = context.getBean(RmqClient.class);
        RmqProperties props = context.getBean(RmqProperties.class);
        List<WorkerListener> listeners = new ArrayList<>(context.getBeansOfType(WorkerListener.class).values());
        RmqMetrics metrics = context.getBeanProvider(RmqMetrics.class).getIfAvailable();
        List<Endpoint> eps;
        synchronized (endpoints) {
            eps = new ArrayList<>(endpoints);
        }
        for (Endpoint ep : eps) {
            RmqListener s = ep.spec();
            Target source = s.topic().isEmpty() ? rmq.queue(s.queue()) : rmq.topic(s.topic(), s.slots());
            MessageListener handler = msg -> invoke(ep, msg);
            add(rmq, source, handler, props.workerOptions(s.concurrency()), listeners, metrics, name(ep));
        }
        Map<String, MessageListener> beans = context.getBeansOfType(MessageListener.class);
        if (!beans.isEmpty()) {
            if (props.getTopic().isEmpty() == props.getQueue().isEmpty()) {
                throw new IllegalStateException("MessageListener beans " + beans.keySet()
                        + " need rmq.topic (and rmq.slots) or rmq.queue");
            }
            Target source = props.getTopic().isEmpty() ? rmq.queue(props.getQueue())
                    : rmq.topic(props.getTopic(), props.getSlots());
            beans.forEach((name, l) -> add(rmq, source, l, props.workerOptions(0), listeners, metrics, name));
        }
        workers.forEach(Worker::start);
        running = true;
    }

    private void add(RmqClient rmq, Target source, MessageListener handler, WorkerOptions.Builder options,
            List<WorkerListener> listeners, RmqMetrics metrics, String name) {
        options.name(name);
        listeners.forEach(options::listener);
        if (metrics != null) {
            options.listener(metrics.listener(name));
        }
        Worker w = rmq.worker(source, handler, options.build());
        if (metrics != null) {
            metrics.gauge(name, w);
        }
        workers.add(w);
    }

    private static String name(Endpoint ep) {
        return ep.method().getDeclaringClass().getSimpleName() + "." + ep.method().getName();
    }

    private static void invoke(Endpoint ep, Delivery msg) throws Exception {
        Object arg = ep.method().getParameterTypes()[0] == String.class ? msg.body() : msg;
        try {
            ep.method().invoke(ep.bean(), arg);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception) {
                throw (Exception) cause;
            }
            throw e;
        }
    }

    @Override
    public synchronized void stop() {
        running = false;
        workers.forEach(Worker::close);
        workers.clear();
    }

    @Override
    public boolean isRunning() {
        return running;
    }

    /** The workers, while running (health and tests read them). */
    public synchronized List<Worker> workers() {
        return List.copyOf(workers);
    }
}
