"""rmq-gateway --durable N (issue #35): SendMessage(Batch) and DeleteMessage(Batch) answer
only once N replicas hold the change, else a 503 ServiceUnavailable the SDK retries. Driven
by boto3 against a primary and a replica of the test's own; "the replica is down" is the
replica stopped with SIGSTOP by the pid started here (connected, acknowledging nothing).
"""

import threading
import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from gateway_support import Gateway
from server_support import Server, wait_replica_synced

TIMEOUT_MS = 2000


@pytest.fixture
def pair():
    p = Server(conf=["--repl-diskless-sync-delay", "0"], tag="rmq-gwd").start()
    rep = Server(conf=["--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1",
                       str(p.port)], tag="rmq-gwd").start()
    wait_replica_synced(p.client(), rep.client())
    yield p, rep
    rep.resume()
    rep.stop()
    p.stop()


@pytest.fixture
def durable_gw(pair, start_gateway):
    p, _ = pair
    return start_gateway(extra=["--durable", "1", "--durable-timeout-ms", TIMEOUT_MS], server=p)


def test_send_and_delete_are_on_the_replica_when_answered(pair, durable_gw):
    p, rep = pair
    sqs, rc = durable_gw.sqs(), rep.client()
    url = sqs.create_queue(QueueName="dq")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="one")
    assert rc.zcard("dq") == 1                 # no waiting: answered after the replica had it
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"b{i}"}
                                                  for i in range(3)])
    assert rc.zcard("dq") == 4
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(got) == 4
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got[1:])])
    assert rc.zcard("prepare{dq}") == 0 and rc.zcard("dq") == 0


def test_replica_down_is_a_503_the_sdk_retries(pair, durable_gw):
    p, rep = pair
    pc = p.client()
    sqs = durable_gw.sqs()
    url = sqs.create_queue(QueueName="dq")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="before")
    got = sqs.receive_message(QueueUrl=url)["Messages"]
    rep.pause()
    with pytest.raises(ClientError) as err:
        sqs.send_message(QueueUrl=url, MessageBody="m")
    e = err.value.response
    assert e["Error"]["Code"] == "ServiceUnavailable"
    assert e["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert "0 of 1 replicas" in e["Error"]["Message"] and "retry" in e["Error"]["Message"]
    assert pc.zcard("dq") == 1                 # stored on the primary all the same
    with pytest.raises(ClientError) as err:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    assert err.value.response["Error"]["Code"] == "ServiceUnavailable"
    assert pc.zcard("prepare{dq}") == 0        # ended on the primary
    # the SDK's standard retry mode retries the 503: each attempt stores a copy (a standard
    # queue's send is not idempotent, as in SQS), which is what the README says
    retrying = boto3.client("sqs", endpoint_url=durable_gw.url, region_name="us-east-1",
                            aws_access_key_id="test", aws_secret_access_key="test",
                            config=Config(retries={"total_max_attempts": 3, "mode": "standard"}))
    with pytest.raises(ClientError):
        retrying.send_message(QueueUrl=url, MessageBody="r")
    assert pc.zcard("dq") == 1 + 3
    rep.resume()
    sqs.send_message(QueueUrl=url, MessageBody="after")


def test_without_durable_nothing_waits(pair, start_gateway):
    p, rep = pair
    sqs = start_gateway(server=p).sqs()
    url = sqs.create_queue(QueueName="dq")["QueueUrl"]
    rep.pause()
    sqs.send_message(QueueUrl=url, MessageBody="m")
    assert p.client().zcard("dq") == 1


@pytest.mark.parametrize("args", [["--durable", "1001"], ["--durable=-1"],
                                  ["--durable", "1", "--durable-timeout-ms", "0"]])
def test_bad_durable_arguments_are_refused(server, args):
    g = Gateway(server, extra=args).launch()
    assert g.wait_exit() not in (None, 0)
    assert "durable" in g.output()


def test_stalled_replica_holds_up_only_the_writes_waiting_on_it(pair, start_gateway):
    """Each durable write waits for its replicas on a connection of its own: with the
    replica stopped, reads of another queue answer at once (they once queued behind every
    WAIT on one shared connection), and the writes answer 503 after --durable-timeout-ms."""
    p, rep = pair
    timeout_ms = 4000
    gw = start_gateway(extra=["--durable", "1", "--durable-timeout-ms", timeout_ms], server=p)
    sqs = gw.sqs(max_pool_connections=32)
    waiting = sqs.create_queue(QueueName="stalled")["QueueUrl"]
    other = sqs.create_queue(QueueName="other")["QueueUrl"]
    sqs.send_message(QueueUrl=other, MessageBody="ready")
    rep.pause()
    outcomes = []

    def send(i):
        t = time.monotonic()
        try:
            sqs.send_message(QueueUrl=waiting, MessageBody=f"w{i}")
            outcomes.append(("ok", time.monotonic() - t))
        except ClientError as e:
            outcomes.append((e.response["Error"]["Code"], time.monotonic() - t))

    writers = [threading.Thread(target=send, args=(i,)) for i in range(8)]
    for w in writers:
        w.start()
    time.sleep(0.5)
    reads = []
    for _ in range(3):
        t = time.monotonic()
        attrs = sqs.get_queue_attributes(QueueUrl=other, AttributeNames=["ApproximateNumberOfMessages"])
        assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "1"
        assert sorted(sqs.list_queues()["QueueUrls"]) == sorted([other, waiting])
        reads.append(time.monotonic() - t)
    got = sqs.receive_message(QueueUrl=other)["Messages"]
    assert [m["Body"] for m in got] == ["ready"]
    for w in writers:
        w.join(timeout=60)
    rep.resume()
    # Normal time: well under one WAIT's timeout (each once cost one timeout per WAIT ahead).
    assert max(reads) < timeout_ms / 2000, reads
    assert [o for o, _ in outcomes] == ["ServiceUnavailable"] * 8
    # Each answered once its own WAIT timed out: not early, not many timeouts later.
    assert all(timeout_ms / 1000 - 0.5 <= took < 2 * timeout_ms / 1000 + 2 for _, took in outcomes), outcomes
