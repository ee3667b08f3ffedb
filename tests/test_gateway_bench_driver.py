"""bench/driver's SQS modes (make bench-gateway's load generator, built by `make test`)
against a gateway that checks every signature: the driver's own SigV4 is accepted on
kept-alive connections for each queue kind, what it receives it deletes, a latency run
counts every message, and a wrong secret is refused (403), not measured."""

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DRIVER = REPO / "target" / "bench-driver" / "release" / "rmq-bench-driver"
KEY, SECRET = "AKIDBENCH", "bench-s3cret"


@pytest.fixture
def gw(start_gateway):
    if not DRIVER.exists():
        pytest.fail(f"{DRIVER} missing: `make bench-driver` builds it (make test does)", pytrace=False)
    return start_gateway(credentials=f"{KEY} {SECRET}\n")


def run(gw, mode, queue_url, kind, secret=SECRET, **opts):
    argv = [str(DRIVER), mode, "--endpoint", f"127.0.0.1:{gw.port}", "--queue-url", queue_url, "--kind", kind,
            "--access-key", KEY, "--secret", secret]
    for k, v in opts.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def make_queue(sqs, kind, name):
    """A new queue (the server, and so its queues, is shared by this file's tests)."""
    if kind == "fifo":
        return sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    if kind == "priority":
        return sqs.create_queue(QueueName=name, tags={"rmq:kind": "priority"})["QueueUrl"]
    return sqs.create_queue(QueueName=name)["QueueUrl"]


@pytest.mark.parametrize("kind", ["standard", "fifo", "priority"])
def test_load_is_signed_kept_alive_and_deletes_what_it_receives(gw, kind):
    sqs = gw.sqs(key=KEY, secret=SECRET)
    url = make_queue(sqs, kind, f"load-{kind}")
    p = run(gw, "sqs-load", url, kind, connections=2, secs=1)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["consumed"] > 0
    # Every request of a thread on its one connection: none was closed under it.
    assert r["connections_opened"] == r["connections"] == 2
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "0"


@pytest.mark.parametrize("kind", ["standard", "priority"])
def test_latency_counts_every_message(gw, kind):
    url = make_queue(gw.sqs(key=KEY, secret=SECRET), kind, f"latency-{kind}")
    p = run(gw, "sqs-latency", url, kind, samples=20, interval_ms=5)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert (r["n"], r["lost"]) == (20, 0)
    assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]


def test_a_wrong_secret_is_refused_not_measured(gw):
    url = make_queue(gw.sqs(key=KEY, secret=SECRET), "standard", "refused")
    p = run(gw, "sqs-load", url, "standard", secret="not-the-secret", connections=1, secs=1)
    assert p.returncode != 0
    assert "SendMessageBatch: HTTP 403" in p.stderr
    assert "SignatureDoesNotMatch" in p.stderr
