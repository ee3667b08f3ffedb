"""The Celery app of tests/test_gateway_celery.py, imported by its worker processes
(`celery -A gateway_celery_support worker`): Celery on kombu's SQS transport pointed at
rmq-gateway (RMQ_CELERY_GATEWAY = host:port). The tasks record what they do in plain keys of
the test's Redis (RMQ_CELERY_REDIS), with the server's clock."""

import os
import time

import redis
from celery import Celery

gateway = os.environ.get("RMQ_CELERY_GATEWAY", "127.0.0.1:9324")

# README:celery begin
app = Celery("jobs", broker=f"sqs://local:local@{gateway}",
             broker_transport_options={"region": "us-east-1", "is_secure": False})
# README:celery end

# The tests' settings: a short visibility timeout (the acks_late test waits for it) and short
# long polls (workers stop quickly); no remote control (SQS has no broadcast queues).
app.conf.broker_transport_options.update(visibility_timeout=6, wait_time_seconds=2, polling_interval=0.1)
app.conf.update(worker_enable_remote_control=False, worker_prefetch_multiplier=1,
                task_routes={"gateway_celery_support.slow": {"queue": "late"},
                             "gateway_celery_support.ordered": {"queue": "jobs.fifo"}},
                broker_connection_retry_on_startup=True)

_r = None


def store():
    global _r
    if _r is None:
        _r = redis.Redis.from_url(os.environ["RMQ_CELERY_REDIS"])
    return _r


def now_ms():
    s, us = store().time()
    return s * 1000 + us // 1000


@app.task
def record(i):
    store().rpush("done", i)


@app.task
def stamp(tag):
    store().rpush("stamped", f"{tag} {now_ms()}")


@app.task(bind=True, max_retries=5)
def flaky(self, key):
    """Fails its first two runs; Celery's retry sends it again each time."""
    n = store().incr(key)
    if n < 3:
        raise self.retry(countdown=0.5)
    store().rpush(key + ":done", n)


@app.task(acks_late=True)
def slow(key):
    """Its first run hangs (the test kills its worker meanwhile); the next one finishes."""
    n = store().incr(key)
    store().rpush(key + ":starts", now_ms())
    if n == 1:
        time.sleep(300)
    store().rpush(key + ":done", n)


@app.task(acks_late=True)
def ordered(i):
    """On a FIFO queue: acknowledged only when done, so the next of its group waits."""
    store().rpush("ordered", i)
