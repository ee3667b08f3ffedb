"""rmq-gateway as Celery's broker: workers on kombu's SQS transport (tests/
gateway_celery_support.py, started as `celery worker` processes and stopped by pid) against
one gateway and one Redis for the file: 200 tasks each run exactly once, countdown, retries,
a FIFO queue's tasks in order, and acks_late with the worker killed mid-task -> the task runs again on another worker once
the visibility timeout has run out. The README's Celery example is the app's own lines."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("celery")
pytest.importorskip("pycurl")  # kombu's SQS transport: pip install "kombu[sqs]"

from gateway_support import Gateway  # noqa: E402
from server_support import REPO  # noqa: E402

import gateway_celery_support as jobs  # noqa: E402

TESTS = Path(__file__).resolve().parent
VISIBILITY_MS = jobs.app.conf.broker_transport_options["visibility_timeout"] * 1000


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def server_ms(r):
    s, us = r.time()
    return s * 1000 + us // 1000


class Worker:
    """`celery worker` (threads pool) consuming `queues`; its log in a temp file."""

    def __init__(self, env, queues, name):
        self.log = tempfile.NamedTemporaryFile(prefix=f"rmq-celery-{name}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "gateway_celery_support", "worker", "-Q", queues,
             "-n", f"{name}@rmq-test", "--pool", "threads", "-c", "4", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
            cwd=TESTS, env=env, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_until(lambda: "ready." in self.output() or self.proc.poll() is not None, 60, f"worker {name}")
        except AssertionError:
            self.stop()
            raise
        if self.proc.poll() is not None:
            raise RuntimeError(f"celery worker exited: {self.output()[-3000:]}")

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # warm shutdown
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        os.unlink(self.log.name)


@pytest.fixture(scope="module")
def gw(_server_holder):
    g = Gateway(_server_holder.ensure()).start()
    yield g
    g.stop()


@pytest.fixture(scope="module")
def r(_server_holder, gw):
    """A client of the file's server (never flushed: the workers' queues live there)."""
    c = _server_holder.ensure().client()
    yield c
    c.close()


@pytest.fixture(scope="module")
def worker_env(gw, _server_holder):
    addr = f"127.0.0.1:{gw.port}"
    # This process sends the tasks through the same app, pointed at the same gateway.
    jobs.app.conf.broker_url = f"sqs://local:local@{addr}"
    env = dict(os.environ, RMQ_CELERY_GATEWAY=addr,
               RMQ_CELERY_REDIS=f"redis://{_server_holder.ensure().addr}/0",
               PYTHONPATH=os.pathsep.join([str(TESTS)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return env


@pytest.fixture(scope="module")
def worker(worker_env):
    w = Worker(worker_env, "celery,jobs.fifo", "main")
    yield w
    w.stop()


def queue_counts(gw, name):
    sqs = gw.sqs()
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"])


def test_readme_example_is_the_app(worker):
    src = (TESTS / "gateway_celery_support.py").read_text().split("\n")
    begin, end = src.index("# README:celery begin"), src.index("# README:celery end")
    snippet = "\n".join(src[begin + 1:end]) + "\n"
    assert snippet in (REPO / "docs" / "gateway.md").read_text(), "docs/gateway.md's Celery example is not the tested app"


def test_200_tasks_each_run_exactly_once(r, gw, worker):
    for i in range(200):
        jobs.record.delay(i)
    wait_until(lambda: r.llen("done") >= 200, 180, "200 tasks")
    # Every message acknowledged (deleted): nothing left that could run again.
    wait_until(lambda: queue_counts(gw, "celery") == (0, 0), 30, "an empty queue")
    done = sorted(int(x) for x in r.lrange("done", 0, -1))
    assert done == list(range(200))


def test_countdown(r, worker):
    sent = server_ms(r)
    jobs.stamp.apply_async(("countdown",), countdown=3)
    wait_until(lambda: r.llen("stamped") >= 1, 60, "the countdown task")
    [entry] = r.lrange("stamped", 0, -1)
    tag, ran = entry.decode().split()
    assert tag == "countdown"
    # Not before its countdown (100 ms for the two clocks' reads), and not long after.
    assert 2900 <= int(ran) - sent <= 30000


def test_retries(r, worker):
    jobs.flaky.delay("flaky")
    wait_until(lambda: r.llen("flaky:done") >= 1, 60, "the retried task")
    assert r.lrange("flaky:done", 0, -1) == [b"3"]
    assert r.get("flaky") == b"3"


def test_fifo_queue_runs_a_group_in_order(r, gw, worker):
    # kombu sends every message of a FIFO queue in one group (its default MessageGroupId)
    # with a new deduplication id; one message of a group is in flight at a time, and
    # acks_late holds it until the task is done: the four worker threads run them in order.
    for i in range(20):
        jobs.ordered.delay(i)
    wait_until(lambda: r.llen("ordered") >= 20, 120, "20 FIFO tasks")
    assert [int(x) for x in r.lrange("ordered", 0, -1)] == list(range(20))
    sqs = gw.sqs()
    url = sqs.get_queue_url(QueueName="jobs.fifo")["QueueUrl"]
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["FifoQueue"])["Attributes"]["FifoQueue"] == "true"
    wait_until(lambda: queue_counts(gw, "jobs.fifo") == (0, 0), 30, "the FIFO queue to empty")


def test_acks_late_task_redelivered_after_its_worker_is_killed(r, gw, worker_env):
    first = Worker(worker_env, "late", "doomed")
    try:
        jobs.slow.delay("slow")
        wait_until(lambda: r.llen("slow:starts") >= 1, 60, "the slow task to start")
        first.kill()  # mid-task: never acknowledged
    finally:
        first.stop()
    assert r.llen("slow:done") == 0
    assert queue_counts(gw, "late") == (0, 1)
    second = Worker(worker_env, "late", "rescuer")
    try:
        wait_until(lambda: r.llen("slow:done") >= 1, 60, "the redelivered task")
        starts = [int(x) for x in r.lrange("slow:starts", 0, -1)]
        assert len(starts) == 2
        # Received again only once the first delivery's visibility timeout ran out (its
        # lease began just before the first start: 1 s for that on a loaded machine).
        assert starts[1] - starts[0] >= VISIBILITY_MS - 1000
        assert r.lrange("slow:done", 0, -1) == [b"2"]
        wait_until(lambda: queue_counts(gw, "late") == (0, 0), 30, "the late queue to empty")
    finally:
        second.stop()
