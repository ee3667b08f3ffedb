"""rmq-gateway acting with each caller's Redis rights: ListQueues shows only the queues the
caller's Redis user may read, at a cost that follows the gateway's queues rather than the
keyspace; redrive policies and message move tasks need write access to the queues they
push into, and work for a user confined to some queues."""

import json
import time

import pytest
from botocore.exceptions import ClientError

from gateway_support import error_code

CREDS = ("AKIDADMIN s3cretADMIN\n"
         "AKIDALICE s3cretALICE alice alicepw\n"
         "AKIDBOB s3cretBOB bob bobpw\n")


@pytest.fixture
def users(r, start_gateway):
    # Each user may use the queues of its own prefix, and no key of the other's.
    for user, prefix in (("alice", "a-"), ("bob", "b-")):
        r.execute_command("ACL", "SETUSER", user, "reset", "on", f">{user}pw",
                          f"~{prefix}*", f"~*{{{prefix}*}}*", "+@all")
    gw = start_gateway(credentials=CREDS)
    yield (gw, gw.sqs(key="AKIDADMIN", secret="s3cretADMIN"), gw.sqs(key="AKIDALICE", secret="s3cretALICE"),
           gw.sqs(key="AKIDBOB", secret="s3cretBOB"))
    for user in ("alice", "bob"):
        r.execute_command("ACL", "DELUSER", user)


def commandstats(r):
    return {k: v for k, v in r.info("commandstats").items()}


def names(listing):
    return [u.rsplit("/", 1)[1] for u in listing.get("QueueUrls", [])]


def test_list_queues_shows_only_the_callers_queues(r, users):
    gw, admin, alice, bob = users
    for n in ("a-1", "a-2"):
        alice.create_queue(QueueName=n)
    bob.create_queue(QueueName="b-1")
    admin.create_queue(QueueName="a-admins")
    # An RMQ queue made without the gateway is not an SQS queue.
    r.execute_command("RMQ.PUSH", "a-plain", "DELAY", "0", "x")
    # 300,000 keys that are no queue's.
    pipe = r.pipeline(transaction=False)
    for i in range(300_000):
        pipe.set(f"unrelated:{i}", "v")
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()
    before = commandstats(r)
    assert names(alice.list_queues()) == ["a-1", "a-2", "a-admins"]
    assert names(bob.list_queues()) == ["b-1"]
    assert names(alice.list_queues(QueueNamePrefix="b-")) == []
    assert names(admin.list_queues()) == ["a-1", "a-2", "a-admins", "b-1"]
    page = alice.list_queues(MaxResults=2)
    assert names(page) == ["a-1", "a-2"]
    assert names(alice.list_queues(MaxResults=2, NextToken=page["NextToken"])) == ["a-admins"]
    after = commandstats(r)
    # No look at the whole keyspace: no SCAN, no KEYS.
    for cmd in ("cmdstat_scan", "cmdstat_keys"):
        assert after.get(cmd, {}).get("calls", 0) == before.get(cmd, {}).get("calls", 0), cmd
    # What Redis spent on the six listings (a SCAN of 300k keys alone took over 100 ms),
    # all commands counted, generously bounded.
    spent = sum(v["usec"] - before.get(k, {}).get("usec", 0) for k, v in after.items() if k != "cmdstat_info")
    assert spent < 30_000, spent
    t = time.monotonic()
    alice.list_queues()
    assert time.monotonic() - t < 2.0


def arn(name):
    return f"arn:aws:sqs:us-east-1:000000000000:{name}"


def test_redrive_and_move_tasks_need_write_access(r, start_gateway):
    """carol may use the c-* queues and only read the d-* ones: she may not make a d-*
    queue her dead-letter target, nor move messages out of or into one (AccessDenied,
    nothing changed); with her own queues both work."""
    r.execute_command("ACL", "SETUSER", "carol", "reset", "on", ">carolpw", "+@all", "~c-*", "~*{c-*}*",
                      "~rmqgw:redrive", "%R~d-*", "%R~*{d-*}*")
    try:
        gw = start_gateway(credentials="AKIDADMIN s3cretADMIN\nAKIDCAROL s3cretCAROL carol carolpw\n")
        admin = gw.sqs(key="AKIDADMIN", secret="s3cretADMIN")
        carol = gw.sqs(key="AKIDCAROL", secret="s3cretCAROL")
        admin.create_queue(QueueName="d-dlq")
        admin.create_queue(QueueName="d-src", Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn("d-dlq"), "maxReceiveCount": 1})})
        admin.send_message(QueueUrl=f"{gw.url}/000000000000/d-dlq", MessageBody="d's dead")
        carol.create_queue(QueueName="c-dlq")
        src = carol.create_queue(QueueName="c-src")["QueueUrl"]
        policy = {"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn("d-dlq"), "maxReceiveCount": 1})}
        with pytest.raises(ClientError) as e:
            carol.set_queue_attributes(QueueUrl=src, Attributes=policy)
        assert error_code(e) == "AccessDenied"
        with pytest.raises(ClientError) as e:
            carol.create_queue(QueueName="c-other", Attributes=policy)
        assert error_code(e) == "AccessDenied"
        assert "RedrivePolicy" not in carol.get_queue_attributes(QueueUrl=src, AttributeNames=["All"])["Attributes"]
        # Her own dead-letter queue: allowed, and its messages can be moved back.
        carol.set_queue_attributes(QueueUrl=src, Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn("c-dlq"), "maxReceiveCount": 1})})
        carol.send_message(QueueUrl=f"{gw.url}/000000000000/c-dlq", MessageBody="c's dead")
        for source, dest in (("d-dlq", "c-src"), ("c-dlq", "d-src")):
            with pytest.raises(ClientError) as e:
                carol.start_message_move_task(SourceArn=arn(source), DestinationArn=arn(dest))
            assert error_code(e) == "AccessDenied", (source, dest)
        assert r.exists("rmqgw:task{d-dlq}", "rmqgw:task{c-dlq}") == 0
        carol.start_message_move_task(SourceArn=arn("c-dlq"))
        got = carol.receive_message(QueueUrl=src, WaitTimeSeconds=10)["Messages"]
        assert [m["Body"] for m in got] == ["c's dead"]
        assert r.zcard("d-dlq") == 1 and r.zcard("d-src") == 0
    finally:
        r.execute_command("ACL", "DELUSER", "carol")
