"""rmq-gateway where SQS users and other people's SQS tests notice the difference: FIFO
attributes and DelaySeconds=0, removing Policy/RedrivePolicy with "", VisibilityTimeout=0,
x-amzn-RequestId, MessageAttributeNames prefixes, oversized bodies as SDK-readable errors,
tag and Number limits, AWS's error texts, racing CreateQueues, and nothing pushed into a
deleted queue (dead letters, move tasks, long polls)."""

import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError


@pytest.fixture
def gw(r, start_gateway):
    return start_gateway()


@pytest.fixture
def sqs(gw):
    return gw.sqs()


def code(exc):
    return exc.value.response["Error"]["Code"]


def message(exc):
    return exc.value.response["Error"]["Message"]


def arn(name):
    return f"arn:aws:sqs:us-east-1:000000000000:{name}"


def raw(gw, action, body, data=None):
    """POST one JSON 1.0 request; (status, headers, parsed body)."""
    req = urllib.request.Request(gw.url + "/", data=data if data is not None else json.dumps(body).encode(),
                                 method="POST", headers={"X-Amz-Target": f"AmazonSQS.{action}",
                                                         "Content-Type": "application/x-amz-json-1.0"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, resp.headers, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, e.headers, json.loads(e.read() or b"{}")


def test_fifo_accepts_delay_0_and_reports_its_attributes(sqs):
    url = sqs.create_queue(QueueName="f.fifo", Attributes={"FifoQueue": "true", "DelaySeconds": "0",
                                                           "ContentBasedDeduplication": "true"})["QueueUrl"]
    # The SDKs send DelaySeconds=0 for a FIFO queue; SQS accepts it.
    sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g", DelaySeconds=0)
    r = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "b", "MessageGroupId": "g",
                                                       "DelaySeconds": 0}])
    assert [s["Id"] for s in r["Successful"]] == ["1"] and r.get("Failed", []) == []
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="c", MessageGroupId="g", DelaySeconds=5)
    assert code(e) == "InvalidParameterValue"
    assert message(e) == ("Value 5 for parameter DelaySeconds is invalid. Reason: The request include "
                          "parameter that is not valid for this queue type.")
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert a["DeduplicationScope"] == "queue" and a["FifoThroughputLimit"] == "perQueue"
    assert a["SqsManagedSseEnabled"] == "false"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "messageGroup",
                                                       "FifoThroughputLimit": "perMessageGroupId"})
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DeduplicationScope", "FifoThroughputLimit"])
    assert a["Attributes"] == {"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}
    for k, v in [("DeduplicationScope", "perQueue"), ("FifoThroughputLimit", "queue"),
                 ("SqsManagedSseEnabled", "yes")]:
        with pytest.raises(ClientError) as e:
            sqs.set_queue_attributes(QueueUrl=url, Attributes={k: v})
        assert code(e) == "InvalidAttributeValue", k
    # A standard queue reports SqsManagedSseEnabled too, but no FIFO attributes.
    std = sqs.create_queue(QueueName="s")["QueueUrl"]
    a = sqs.get_queue_attributes(QueueUrl=std, AttributeNames=["All"])["Attributes"]
    assert a["SqsManagedSseEnabled"] == "false" and "DeduplicationScope" not in a


def test_message_group_deduplication_scope(sqs):
    url = sqs.create_queue(QueueName="d.fifo", Attributes={"FifoQueue": "true",
                                                           "DeduplicationScope": "messageGroup"})["QueueUrl"]
    a = sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g1", MessageDeduplicationId="d")
    b = sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g2", MessageDeduplicationId="d")
    again = sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g1", MessageDeduplicationId="d")
    assert a["MessageId"] != b["MessageId"] and again["MessageId"] == a["MessageId"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert sorted(m["Attributes"]["MessageGroupId"] for m in got) == ["g1", "g2"]
    assert {m["Attributes"]["MessageDeduplicationId"] for m in got} == {"d"}


def test_empty_policy_or_redrive_policy_removes_it(r, sqs):
    sqs.create_queue(QueueName="dlq")
    url = sqs.create_queue(QueueName="q", Attributes={
        "Policy": '{"Version": "2012-10-17"}',
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn("dlq"), "maxReceiveCount": 2})})["QueueUrl"]
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "Policy" in a and "RedrivePolicy" in a
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": "", "RedrivePolicy": ""})
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "Policy" not in a and "RedrivePolicy" not in a
    assert not r.hexists("rmqgw:q{q}", "Policy") and not r.hexists("rmqgw:q{q}", "RedrivePolicy")
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"]).get("Attributes", {}) == {}
    assert sqs.list_dead_letter_source_queues(QueueUrl=sqs.get_queue_url(QueueName="dlq")["QueueUrl"])["queueUrls"] == []


def test_visibility_timeout_0_leaves_the_message_receivable(sqs):
    url = sqs.create_queue(QueueName="v")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    for i in range(200):
        got = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, AttributeNames=["ApproximateReceiveCount"])
        assert [m["Body"] for m in got.get("Messages", [])] == ["m"], i
    assert got["Messages"][0]["Attributes"]["ApproximateReceiveCount"] == "200"


def test_every_response_carries_a_fresh_request_id(gw, sqs):
    ids = set()
    for action, body in [("ListQueues", {}), ("GetQueueUrl", {"QueueName": "none"}), ("Frobnicate", {})]:
        for _ in range(2):
            status, headers, _ = raw(gw, action, body)
            rid = headers["x-amzn-RequestId"]
            assert rid and len(rid) >= 32 and rid not in ids, (action, rid)
            ids.add(rid)
    # boto3 reads it into ResponseMetadata.
    assert sqs.list_queues()["ResponseMetadata"]["RequestId"] not in ids


def test_message_attribute_names_select_by_prefix(sqs):
    url = sqs.create_queue(QueueName="p")["QueueUrl"]
    s = lambda v: {"DataType": "String", "StringValue": v}
    attrs = {"Custom.a": s("1"), "Custom.b": s("2"), "Customer": s("3"), "other": s("4"), "Help.Me": s("5")}
    sent = sqs.send_message(QueueUrl=url, MessageBody="m", MessageAttributes=attrs)

    def received(names):
        got = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, MessageAttributeNames=names)["Messages"][0]
        return set(got.get("MessageAttributes", {}))

    # A prefix is what stands before ".*", dot or not (AWS: "Hel.*" selects Hello and Help.Me).
    assert received(["Custom.*"]) == {"Custom.a", "Custom.b", "Customer"}
    assert received(["Hel.*", "oth.*"]) == {"Help.Me", "other"}
    assert received(["other", "Custom.b"]) == {"other", "Custom.b"}
    assert received(["All"]) == set(attrs) and received([".*"]) == set(attrs) and received(["*"]) == set(attrs)
    assert received(["nothing"]) == set()
    assert sent["MD5OfMessageAttributes"]


def test_oversized_body_is_an_error_sdks_parse(gw, sqs):
    status, headers, body = raw(gw, "ListQueues", None, data=b"x" * (3 * 1024 * 1024))
    assert status == 413
    assert headers["Content-Type"] == "application/x-amz-json-1.0"
    assert body["__type"].endswith("#RequestEntityTooLarge") and body["message"]
    assert headers["x-amzn-query-error"] == "RequestEntityTooLarge;Sender"
    assert headers["x-amzn-RequestId"]
    url = sqs.create_queue(QueueName="big")["QueueUrl"]
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x" * (2 * 1024 * 1024 + 1))
    assert code(e) == "RequestEntityTooLarge"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413
