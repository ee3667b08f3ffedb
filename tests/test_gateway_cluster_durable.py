"""rmq-gateway --durable 1 --cluster (issue #35) on a 3-primary Redis Cluster with a replica
each: a send or delete and its WAIT go to the primary serving the queue on one connection,
so the WAIT counts that primary's replicas. "A replica is down" is the replica stopped with
SIGSTOP by the pid started here (connected, acknowledging nothing); then the queues of its
primary answer the retryable 503 while the queues of the other primaries go on."""

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from server_support import wait_for
from test_gateway_cluster import fail_over, gateway_on_cluster

TIMEOUT_MS = 2000


@pytest.fixture(scope="module")
def cluster_gw():
    """The cluster and a gateway in durable mode, for the whole module."""
    yield from gateway_on_cluster(extra=["--durable", "1", "--durable-timeout-ms", TIMEOUT_MS])


def retrying(gw):
    """A client that retries the 503 (the SDK's standard mode), for after a replica is back."""
    cfg = Config(retries={"mode": "standard", "max_attempts": 10}, read_timeout=60)
    return boto3.client("sqs", endpoint_url=gw.url, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test", config=cfg)


def queues_by_primary(cluster, prefix):
    """One queue name per primary: [(name, primary, its replica)]."""
    by_owner = {}
    i = 0
    while len(by_owner) < 3:
        name = f"{prefix}{i}"
        by_owner.setdefault(cluster.owner(name).port, name)
        i += 1
    out = []
    for name in by_owner.values():
        owner = cluster.owner(name)
        replicas = wait_for(lambda: cluster.replicas_of(owner), timeout=30, interval=0.1,
                            what="every node to know the replicas")
        out.append((name, owner, replicas[0]))
    return out


def reader(node):
    """A client of `node` that reads its keys though it is a replica."""
    c = node.client()
    c.execute_command("READONLY")
    return c


def send_batch(sqs, url, prefix, n=5):
    out = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"{prefix}{i}"} for i in range(n)])
    assert not out.get("Failed"), out
    return out["Successful"]


def delete_all(sqs, url, n):
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(got) == n
    out = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    assert not out.get("Failed"), out


def test_batches_are_on_the_owners_replica_when_answered(cluster_gw):
    cluster, gw = cluster_gw
    sqs = gw.sqs()
    for name, _owner, replica in queues_by_primary(cluster, "dcq"):
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        send_batch(sqs, url, "m")
        r = reader(replica)
        assert r.zcard(name) == 5, name           # no waiting: the replica had them
        delete_all(sqs, url, 5)
        assert r.zcard(f"prepare{{{name}}}") == 0 and r.zcard(name) == 0, name


def test_a_stopped_replica_fails_its_primarys_queues_only(cluster_gw):
    cluster, gw = cluster_gw
    sqs = gw.sqs()
    (down, down_owner, replica), *others = queues_by_primary(cluster, "dcs")
    urls = {name: sqs.create_queue(QueueName=name)["QueueUrl"] for name, _, _ in [(down, 0, 0), *others]}
    send_batch(sqs, urls[down], "before", n=2)
    got = sqs.receive_message(QueueUrl=urls[down], MaxNumberOfMessages=2)["Messages"]
    replica.pause()
    try:
        with pytest.raises(ClientError) as err:
            send_batch(sqs, urls[down], "m")
        e = err.value.response
        assert e["Error"]["Code"] == "ServiceUnavailable"
        assert e["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert "0 of 1 replicas" in e["Error"]["Message"] and "retry" in e["Error"]["Message"]
        assert down_owner.conn().zcard(down) == 5    # stored on the primary all the same
        with pytest.raises(ClientError) as err:
            sqs.delete_message_batch(QueueUrl=urls[down], Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
        assert err.value.response["Error"]["Code"] == "ServiceUnavailable"
        assert down_owner.conn().zcard(f"prepare{{{down}}}") == 0    # ended on the primary
        # the other primaries' replicas confirm: their WAIT went to their own primary
        for name, _owner, rep in others:
            send_batch(sqs, urls[name], "m")
            delete_all(sqs, urls[name], 5)
            assert reader(rep).zcard(name) == 0
    finally:
        replica.resume()
    # back: the next sends are confirmed (the SDK retries while the replica catches up)
    send_batch(retrying(gw), urls[down], "after")
    assert reader(replica).zcard(down) == 10


def test_a_failover_is_followed(cluster_gw):
    cluster, gw = cluster_gw
    sqs = gw.sqs()
    name, owner, replica = queues_by_primary(cluster, "dcf")[0]
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    send_batch(sqs, url, "before")
    fail_over(replica)
    cluster.wait_ok(timeout=30)
    # the gateway's slot map still names the old primary, now a replica answering MOVED:
    # the send and its WAIT go again to the new primary, whose replica is the old one
    moved = owner.conn().info("errorstats").get("errorstat_MOVED", {}).get("count", 0)
    send_batch(sqs, url, "after")
    assert owner.conn().info("errorstats")["errorstat_MOVED"]["count"] > moved
    assert cluster.owner(name).port == replica.port
    assert replica.conn().zcard(name) == 10
    assert reader(owner).zcard(name) == 10
    delete_all(sqs, url, 10)
    assert reader(owner).zcard(f"prepare{{{name}}}") == 0


def test_a_killed_primary_confirms_nothing_after_its_replica_took_over(cluster_gw):
    """Last: it leaves the cluster with a primary gone. kill -9 of a queue's primary: its
    replica takes over with no replica of its own, so sends answer 503, never 200."""
    cluster, gw = cluster_gw
    sqs = gw.sqs()
    name, owner, replica = queues_by_primary(cluster, "dck")[0]
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    send_batch(sqs, url, "before")
    owner.kill9()
    wait_for(lambda: replica.conn().info("replication")["role"] == "master", timeout=60,
             interval=0.1, what="the replica to take over")
    answers = []        # a lost node or a cluster between states first, then not durable
    for _ in range(100):
        try:
            sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "0", "MessageBody": "after"}])
            answers.append((200, ""))
        except ClientError as e:
            answers.append((e.response["Error"]["Code"], e.response["Error"]["Message"]))
            if "0 of 1 replicas" in answers[-1][1]:
                break
    assert (200, "") not in answers, answers
    assert answers[-1][0] == "ServiceUnavailable" and "0 of 1 replicas" in answers[-1][1], answers
    # stored on the new primary all the same, once per send that reached it
    assert replica.conn().zcard(name) >= 6
