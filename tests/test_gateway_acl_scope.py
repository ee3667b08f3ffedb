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
