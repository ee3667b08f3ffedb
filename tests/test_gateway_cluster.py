"""rmq-gateway on a 3-primary Redis Cluster (one replica each), started with --cluster:
queues spread over the primaries, ListQueues over all of them, redrive and message moves
between queues of different slots, and a boto3 consumer running while the primary of its
queue is failed over (CLUSTER FAILOVER on the replica): nothing lost, and nothing delivered
twice unless its visibility timeout had passed (times from the servers' clock)."""

import threading
import time
from collections import defaultdict

import boto3
import pytest
from botocore.config import Config

from cluster_support import Cluster
from gateway_support import Gateway
from server_support import wait_for

VISIBILITY = 30
# Ample for a loaded 2-core machine; the whole failover test stays within 2 minutes.
RUN_LIMIT = 90


def gateway_on_cluster(extra=()):
    """Yields a 3-primary cluster (a replica each) and a gateway given its primaries as
    seeds and `extra` arguments; stops both (a replica paused by a test resumed first)."""
    cl = Cluster(masters=3, replicas=1).start()
    try:
        seeds = [f"redis://127.0.0.1:{n.port}" for n, _id, _slots in cl.primaries()]
        g = Gateway(None, cluster_seeds=seeds, extra=extra).start()
        try:
            yield cl, g
        finally:
            g.stop()
    finally:
        for n in cl.nodes:
            n.resume()
        cl.stop()


@pytest.fixture(scope="module")
def cluster_gw():
    """The cluster and a gateway, for the whole module."""
    yield from gateway_on_cluster()


@pytest.fixture
def cluster(cluster_gw):
    cluster_gw[0].wait_ok(timeout=30)
    return cluster_gw[0]


@pytest.fixture
def gw(cluster_gw):
    return cluster_gw[1]


def client(gw):
    # Retries what the gateway answers ServiceUnavailable while a slot changes hands.
    cfg = Config(retries={"mode": "standard", "max_attempts": 10}, read_timeout=60)
    return boto3.client("sqs", endpoint_url=gw.url, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test", config=cfg)


def server_ms(node):
    s, us = node.conn().time()
    return s * 1000 + us // 1000


def fail_over(replica, limit=60):
    """CLUSTER FAILOVER on `replica` until it is the primary: a manual failover that the
    loaded primary does not complete in time (5 s here) is abandoned, and asked again."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        replica.conn().execute_command("CLUSTER", "FAILOVER")
        step = time.monotonic() + 10
        while time.monotonic() < min(step, deadline):
            if replica.conn().info("replication").get("role") == "master":
                return
            time.sleep(0.1)
    pytest.fail(f"the replica did not take over in {limit}s:\n{replica.log_text()[-3000:]}",
                pytrace=False)


def names_on_distinct_primaries(cluster, prefix, n=3):
    """Queue names whose slots belong to n different primaries."""
    by_owner = {}
    i = 0
    while len(by_owner) < n:
        name = f"{prefix}{i}"
        by_owner.setdefault(cluster.owner(name).port, name)
        i += 1
    return list(by_owner.values())


def test_queues_across_primaries(cluster, gw):
    sqs = client(gw)
    names = names_on_distinct_primaries(cluster, "cq")
    urls = [sqs.create_queue(QueueName=n)["QueueUrl"] for n in names]
    assert sqs.list_queues(QueueNamePrefix="cq")["QueueUrls"] == sorted(urls)
    # Every key of a queue is in its slot, on its primary.
    for n in names:
        owner = cluster.owner(n)
        assert owner.conn().exists(f"rmqgw:q{{{n}}}") == 1
    src, dlq = urls[0], urls[1]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.set_queue_attributes(QueueUrl=src, Attributes={
        "RedrivePolicy": f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"1"}}'})
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [src]
    sent = sqs.send_message(QueueUrl=src, MessageBody="dies")["MessageId"]
    got = sqs.receive_message(QueueUrl=src, VisibilityTimeout=0)["Messages"]
    assert [m["MessageId"] for m in got] == [sent]
    # Its one receive used up, it moves to the dead-letter queue in another slot.
    dead = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=20, VisibilityTimeout=0)["Messages"]
    assert [m["Body"] for m in dead] == ["dies"]
    # And back to the source (another slot again) with a move task.
    sqs.start_message_move_task(SourceArn=dlq_arn)
    back = sqs.receive_message(QueueUrl=src, WaitTimeSeconds=20)["Messages"]
    assert [m["Body"] for m in back] == ["dies"]
    sqs.delete_message(QueueUrl=src, ReceiptHandle=back[0]["ReceiptHandle"])
    # A FIFO queue: a batch numbered and deduplicated by the module on its queue's primary
    # (every key of the send in the queue's slot).
    fifo = sqs.create_queue(QueueName="cq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    entries = [{"Id": str(i), "MessageBody": f"b{i}", "MessageGroupId": "g", "MessageDeduplicationId": f"d{i % 2}"}
               for i in range(3)]
    res = sqs.send_message_batch(QueueUrl=fifo, Entries=entries)["Successful"]
    seqs = {e["Id"]: e["SequenceNumber"] for e in res}
    assert seqs["2"] == seqs["0"] < seqs["1"], "d0 again: the first send's number"
    assert cluster.owner("cq.fifo").conn().get("seq{cq.fifo}") == b"2"
    sqs.delete_queue(QueueUrl=fifo)
    assert cluster.owner("cq.fifo").conn().keys("*{cq.fifo}*") == [b"rmqgw:gone{cq.fifo}"]
    for u in urls:
        sqs.delete_queue(QueueUrl=u)
    assert sqs.list_queues(QueueNamePrefix="cq").get("QueueUrls", []) == []
    for n in names:
        assert cluster.owner(n).conn().keys(f"*{{{n}}}*") == [f"rmqgw:gone{{{n}}}".encode()]


def test_consumer_through_a_failover(cluster, gw):
    sqs = client(gw)
    q = "failover-q"
    url = sqs.create_queue(QueueName=q, Attributes={"VisibilityTimeout": str(VISIBILITY)})["QueueUrl"]
    owner = cluster.owner(q)
    wait_for(lambda: cluster.replicas_of(owner), timeout=30, interval=0.1,
             what="every node to know the queue's replica")
    cluster.wait_replicas_synced(timeout=30)
    replica = cluster.replicas_of(owner)[0]
    total, batch = 1000, 10
    sent = {}                       # body -> MessageId
    sent_lock = threading.Lock()
    receives = defaultdict(list)    # MessageId -> [(server ms before, server ms after, count)]
    stop = threading.Event()
    errors = []

    def send(lo, hi):
        for start in range(lo, hi, batch):
            entries = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(start, min(start + batch, hi))]
            out = sqs.send_message_batch(QueueUrl=url, Entries=entries)
            assert not out.get("Failed"), out
            with sent_lock:
                for e in out["Successful"]:
                    sent[f"m{e['Id']}"] = e["MessageId"]

    def produce(lo, hi):
        try:
            send(lo, hi)
        except Exception as e:  # reported by the test thread
            errors.append(e)

    def consume():
        c = client(gw)
        try:
            while not stop.is_set():
                before = server_ms(replica)
                got = c.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2,
                                        AttributeNames=["ApproximateReceiveCount"]).get("Messages", [])
                after = server_ms(replica)
                for m in got:
                    receives[m["MessageId"]].append(
                        (before, after, int(m["Attributes"]["ApproximateReceiveCount"]), m["Body"]))
                if got:
                    out = c.delete_message_batch(QueueUrl=url, Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
                    assert not out.get("Failed"), out
        except Exception as e:  # reported by the test thread
            errors.append(e)

    send(0, total // 2)
    consumer = threading.Thread(target=consume)
    consumer.start()
    began = time.monotonic()
    try:
        wait_for(lambda: len(receives) >= 50 or errors, timeout=60, what="the consumer to start")
        # A graceful failover (the replica catches up, then takes the slots over) while
        # sends go on; the last batch is sent after it, so the consumer is still at work.
        producer = threading.Thread(target=produce, args=(total // 2, total - batch))
        producer.start()
        fail_over(replica)
        at_promotion = len(receives)
        producer.join(timeout=RUN_LIMIT)
        send(total - batch, total)
        assert cluster.owner(q).port == replica.port
        wait_for(lambda: len(receives) >= total or errors, timeout=RUN_LIMIT,
                 interval=0.1, what="every message to be received")
    finally:
        stop.set()
        consumer.join(timeout=60)
    assert not errors, errors
    # The consumer was still at work when the slot changed hands.
    assert at_promotion < total, at_promotion
    assert time.monotonic() - began < 120
    # Nothing lost, nothing made up.
    assert set(receives) == set(sent.values())
    assert sorted(b for r in receives.values() for (_, _, _, b) in r[:1]) == sorted(sent)
    # A second delivery only after the first one's visibility timeout ran out.
    for mid, r in receives.items():
        for first, again in zip(r, r[1:]):
            assert again[1] - first[0] >= VISIBILITY * 1000, (mid, r)
            assert again[2] > first[2], (mid, r)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"][
        "ApproximateNumberOfMessages"] == "0"
