package dev.rmq.spring;

import dev.rmq.RmqClient;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** The RmqClient of rmq.redis-url, the workers of the listeners, health and metrics. */
@AutoConfiguration(afterName = {
    "org.springframework.boot.actuate.autoconfigure.metrics.CompositeMeterRegistryAutoConfiguration",
    "org.springframework.boot.actuate.autoconfigure.metrics.export.simple.SimpleMetricsExportAutoConfiguration"})
@EnableConfigurationProperties(RmqProperties.class)
public class RmqAutoConfiguration {
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public RmqClient rmqClient(RmqProperties props) {
        return props.isCluster() ? RmqClient.createCluster(props.getRedisUrl()) : RmqClient.create(props.getRedisUrl());
    }

    /** Static: a BeanPostProcessor is made before the other beans. */
    @Bean
    @ConditionalOnMissingBean
    public static RmqWorkers rmqWorkers() {
        return new RmqWorkers();
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(MeterRegistry.class)
    static class Metrics {
        @Bean
        @ConditionalOnBean(MeterRegistry.class)
        @ConditionalOnMissingBean
        RmqMetrics rmqMetrics(MeterRegistry registry) {
            return new RmqMetrics(registry);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.actuate.health.HealthIndicator")
    static class HealthConfig {
        @Bean(name = "rmqHealthIndicator")
        @ConditionalOnMissingBean(name = "rmqHealthIndicator")
        RmqHealthIndicator rmqHealthIndicator(RmqClient rmq, RmqWorkers workers) {
            return new RmqHealthIndicator(rmq, workers);
        }
    }
}
