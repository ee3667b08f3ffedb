"""RMQ's own semantics through an SQS SDK (boto3): the queue kind as the CreateQueue tag
`rmq:kind` (reported as RmqKind, fixed for good), a message's place as the message
attributes rmq.priority / rmq.range / rmq.at (not returned, not in the received MD5), merging
by body on priority and range queues, and every refusal."""

import hashlib
import struct

import pytest
from botocore.exceptions import ClientError

from gateway_support import error_code, error_message


def num(v):
    return {"DataType": "Number", "StringValue": str(v)}


def server_ms(r):
    s, us = r.time()
    return s * 1000 + us // 1000


def kinded(sqs, name, kind, **kw):
    return sqs.create_queue(QueueName=name, tags={"rmq:kind": kind}, **kw)["QueueUrl"]


def receive_all(sqs, url, **kw):
    return sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, **kw).get("Messages", [])


def md5_of_attributes(attrs):
    """SQS's MD5 of message attributes (what the SDKs compute over what they sent)."""
    buf = b""
    for name in sorted(attrs):
        a = attrs[name]
        buf += struct.pack(">I", len(name)) + name.encode()
        buf += struct.pack(">I", len(a["DataType"])) + a["DataType"].encode()
        v = a["StringValue"].encode()
        buf += b"\x01" + struct.pack(">I", len(v)) + v
    return hashlib.md5(buf).hexdigest()


def test_the_kind_tag_makes_the_queue_and_cannot_change(r, sqs):
    p = kinded(sqs, "jobs", "priority")
    assert sqs.get_queue_attributes(QueueUrl=p, AttributeNames=["RmqKind"])["Attributes"] == {"RmqKind": "priority"}
    assert sqs.get_queue_attributes(QueueUrl=p, AttributeNames=["All"])["Attributes"]["RmqKind"] == "priority"
    assert sqs.list_queue_tags(QueueUrl=p)["Tags"] == {"rmq:kind": "priority"}
    plain = sqs.create_queue(QueueName="plain")["QueueUrl"]
    assert sqs.get_queue_attributes(QueueUrl=plain, AttributeNames=["All"])["Attributes"]["RmqKind"] == "fixed"
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=plain), "no tag when none was given"
    rq = kinded(sqs, "coalesce", "range")
    assert sqs.get_queue_attributes(QueueUrl=rq, AttributeNames=["RmqKind"])["Attributes"]["RmqKind"] == "range"
    # Creating it again: the same kind (or none) answers the queue, another is QueueNameExists.
    assert kinded(sqs, "jobs", "priority") == p
    assert sqs.create_queue(QueueName="jobs")["QueueUrl"] == p
    assert kinded(sqs, "plain", "fixed") == plain
    for name, kind in [("jobs", "range"), ("plain", "priority")]:
        with pytest.raises(ClientError) as e:
            kinded(sqs, name, kind)
        assert error_code(e) == "QueueAlreadyExists", (name, kind)
    # Other values, and non-fixed kinds on FIFO queues, are refused; nothing is made.
    for name, kind, attrs in [("bad", "lifo", {}), ("bad", "Priority", {}), ("bad", "", {}),
                              ("bad.fifo", "priority", {"FifoQueue": "true"}),
                              ("bad.fifo", "range", {"FifoQueue": "true"})]:
        with pytest.raises(ClientError) as e:
            kinded(sqs, name, kind, Attributes=attrs)
        assert error_code(e) == "InvalidParameterValue", (name, kind)
        assert "rmq:kind" in error_message(e)
    f = kinded(sqs, "ok.fifo", "fixed", Attributes={"FifoQueue": "true"})
    assert sqs.get_queue_attributes(QueueUrl=f, AttributeNames=["RmqKind"])["Attributes"]["RmqKind"] == "fixed"
    assert not r.exists("rmqgw:q{bad}") and not r.exists("rmqgw:q{bad.fifo}")
    # TagQueue: the queue's own kind is fine (and shown), another is refused.
    sqs.tag_queue(QueueUrl=plain, Tags={"rmq:kind": "fixed", "team": "a"})
    assert sqs.list_queue_tags(QueueUrl=plain)["Tags"] == {"rmq:kind": "fixed", "team": "a"}
    for url, kind in [(plain, "priority"), (p, "range"), (p, "fixed"), (p, "bogus")]:
        with pytest.raises(ClientError) as e:
            sqs.tag_queue(QueueUrl=url, Tags={"rmq:kind": kind, "x": "y"})
        assert error_code(e) == "InvalidParameterValue", kind
    assert sqs.list_queue_tags(QueueUrl=p)["Tags"] == {"rmq:kind": "priority"}, "a refused TagQueue sets nothing"
    # UntagQueue removes the tag, not the kind; RmqKind is no settable attribute.
    sqs.untag_queue(QueueUrl=p, TagKeys=["rmq:kind"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=p)
    assert sqs.get_queue_attributes(QueueUrl=p, AttributeNames=["RmqKind"])["Attributes"]["RmqKind"] == "priority"
    with pytest.raises(ClientError) as e:
        sqs.set_queue_attributes(QueueUrl=p, Attributes={"RmqKind": "fixed"})
    assert error_code(e) == "InvalidAttributeName"
    # A priority queue delivers by priority: no DelaySeconds, at creation or later.
    with pytest.raises(ClientError) as e:
        kinded(sqs, "late", "priority", Attributes={"DelaySeconds": "5"})
    assert error_code(e) == "InvalidAttributeValue"
    with pytest.raises(ClientError) as e:
        sqs.set_queue_attributes(QueueUrl=p, Attributes={"DelaySeconds": "5"})
    assert error_code(e) == "InvalidAttributeValue"
    sqs.set_queue_attributes(QueueUrl=p, Attributes={"DelaySeconds": "0"})
    sqs.set_queue_attributes(QueueUrl=rq, Attributes={"DelaySeconds": "5"})


def test_priority_queue_serves_highest_first_and_merges_by_body(r, sqs):
    url = kinded(sqs, "jobs", "priority")
    ids = {}
    for body, p in [("low", 1), ("high", 9), ("mid", 5), ("none", None)]:
        attrs = {"tier": {"DataType": "String", "StringValue": body}}
        if p is not None:
            attrs["rmq.priority"] = num(p)
        sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attrs)
        # The reply's MD5 is of what was sent, rmq.priority included (what the SDKs check).
        assert sent["MD5OfMessageAttributes"] == md5_of_attributes(attrs)
        ids[body] = sent["MessageId"]
    assert r.zscore("jobs", r.hget("rmqgw:body{jobs}", hashlib.sha256(b"high").hexdigest())) == 9
    # "low" sent again with priority 20: merged (same MessageId), and now first.
    again = sqs.send_message(QueueUrl=url, MessageBody="low", MessageAttributes={"rmq.priority": num(20)})
    assert again["MessageId"] == ids["low"]
    assert again["MD5OfMessageAttributes"] == md5_of_attributes({"rmq.priority": num(20)})
    # A batch merges too, with itself and with what waits.
    b = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "mid", "MessageAttributes": {"rmq.priority": num(-3)}},
        {"Id": "b", "MessageBody": "new", "MessageAttributes": {"rmq.priority": num(7)}},
        {"Id": "c", "MessageBody": "new", "MessageAttributes": {"rmq.priority": num(8)}}])
    got = {s["Id"]: s["MessageId"] for s in b["Successful"]}
    assert got["a"] == ids["mid"] and got["b"] == got["c"] and got["b"] not in ids.values()
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert a["ApproximateNumberOfMessages"] == "5"
    msgs = receive_all(sqs, url, MessageAttributeNames=["All"])
    assert [m["Body"] for m in msgs] == ["low", "high", "new", "none", "mid"]
    low = msgs[0]
    assert low["MessageId"] == ids["low"]
    # The first send's data stays; the place is no attribute, nor in the received MD5.
    assert low["MessageAttributes"] == {"tier": {"DataType": "String", "StringValue": "low"}}
    assert low["MD5OfMessageAttributes"] == md5_of_attributes(low["MessageAttributes"])
    assert "MessageAttributes" not in msgs[2] and "MD5OfMessageAttributes" not in msgs[2]


def test_a_body_in_flight_is_not_merged_and_waits_its_turn(r, sqs):
    url = kinded(sqs, "jobs", "priority")
    first = sqs.send_message(QueueUrl=url, MessageBody="x")["MessageId"]
    m = receive_all(sqs, url, VisibilityTimeout=60)[0]
    # In flight, not waiting: a new message, which waits until that delivery ends.
    second = sqs.send_message(QueueUrl=url, MessageBody="x")["MessageId"]
    assert second != first
    assert receive_all(sqs, url) == []
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    (m2,) = receive_all(sqs, url)
    assert m2["MessageId"] == second and m2["Body"] == "x"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m2["ReceiptHandle"])
    # Consumed: the next send of the body is a new message again.
    assert sqs.send_message(QueueUrl=url, MessageBody="x")["MessageId"] not in (first, second)


def test_range_queue_merges_a_burst_into_one_delivery(r, sqs):
    url = kinded(sqs, "coalesce", "range")
    t0 = server_ms(r)
    ids = {sqs.send_message(QueueUrl=url, MessageBody="reindex 42",
                            MessageAttributes={"rmq.range": num(1500)})["MessageId"] for _ in range(5)}
    ids |= {s["MessageId"] for s in sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": "reindex 42", "MessageAttributes": {"rmq.range": num(1500)}}
        for i in range(3)])["Successful"]}
    assert len(ids) == 1, "one message for the burst"
    due = r.zscore("coalesce", r.hget("rmqgw:body{coalesce}", hashlib.sha256(b"reindex 42").hexdigest()))
    assert t0 + 1500 <= due <= t0 + 1500 + 10_000, "due a range after the first send, kept by the others"
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert a["ApproximateNumberOfMessagesDelayed"] == "1" and a["ApproximateNumberOfMessages"] == "0"
    msgs = receive_all(sqs, url, WaitTimeSeconds=20)
    assert [m["Body"] for m in msgs] == ["reindex 42"] and msgs[0]["MessageId"] in ids
    assert server_ms(r) >= due
    assert receive_all(sqs, url) == []
    # Without rmq.range: the queue's (or the send's) DelaySeconds is the range.
    sqs.send_message(QueueUrl=url, MessageBody="soon")
    assert [m["Body"] for m in receive_all(sqs, url, WaitTimeSeconds=20)] == ["soon"]


def test_rmq_at_places_a_message_at_any_time(r, sqs):
    url = sqs.create_queue(QueueName="later")["QueueUrl"]
    now = server_ms(r)
    hour, week, soon = now + 3_600_000, now + 7 * 86_400_000, now + 2_000
    for body, at in [("hour", hour), ("week", week), ("soon", soon)]:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes={"rmq.at": num(at)})
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])["Attributes"]
    assert a["ApproximateNumberOfMessagesDelayed"] == "3"
    due = sorted(r.zrange("later", 0, -1, withscores=True), key=lambda e: e[1])
    assert [int(s) for _, s in due] == [soon, hour, week]
    # A past time is simply overdue; the fixed queue still sends every message apart.
    sqs.send_message(QueueUrl=url, MessageBody="past", MessageAttributes={"rmq.at": num(now - 60_000)})
    assert [m["Body"] for m in receive_all(sqs, url)] == ["past"]
    msgs = receive_all(sqs, url, WaitTimeSeconds=20, MessageAttributeNames=["All"])
    assert [m["Body"] for m in msgs] == ["soon"] and "MessageAttributes" not in msgs[0]
    assert server_ms(r) >= soon
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])["Attributes"]
    assert a["ApproximateNumberOfMessagesDelayed"] == "2"


def test_wrong_places_are_refused(r, sqs):
    p = kinded(sqs, "jobs", "priority")
    rq = kinded(sqs, "coalesce", "range")
    f = sqs.create_queue(QueueName="plain")["QueueUrl"]
    fifo = sqs.create_queue(QueueName="f.fifo", Attributes={"FifoQueue": "true",
                                                            "ContentBasedDeduplication": "true"})["QueueUrl"]
    at = str(server_ms(r) + 60_000)
    cases = [
        (f, {"rmq.priority": num(1)}, {}, "rmq.priority is for priority queues"),
        (f, {"rmq.range": num(1)}, {}, "rmq.range is for range queues"),
        (p, {"rmq.at": num(at)}, {}, "rmq.at is for fixed queues"),
        (rq, {"rmq.priority": num(1)}, {}, "rmq.priority is for priority queues"),
        (p, {"rmq.priority": {"DataType": "String", "StringValue": "1"}}, {}, "of DataType Number"),
        (p, {"rmq.priority": num("1.5")}, {}, "an integer"),
        (p, {"rmq.priority": num(2 ** 53 + 1)}, {}, "from -9007199254740992 to 9007199254740992"),
        (p, {}, {"DelaySeconds": 5}, "delivers by priority"),
        (rq, {"rmq.range": num(0)}, {}, "from 1 to"),
        (rq, {"rmq.range": num(100)}, {"DelaySeconds": 5}, "DelaySeconds"),
        (f, {"rmq.at": num(1_700_000_000)}, {}, "from 946684800000"),
        (f, {"rmq.at": num(at)}, {"DelaySeconds": 5}, "DelaySeconds"),
        (fifo, {"rmq.at": num(at)}, {"MessageGroupId": "g"}, "FIFO"),
        (fifo, {"rmq.priority": num(1)}, {"MessageGroupId": "g"}, "rmq.priority is for priority queues"),
    ]
    for url, attrs, extra, text in cases:
        with pytest.raises(ClientError) as e:
            sqs.send_message(QueueUrl=url, MessageBody="m", MessageAttributes=attrs, **extra)
        assert error_code(e) == "InvalidParameterValue", (attrs, extra)
        assert text in error_message(e), (error_message(e), text)
        # In a batch the entry fails, and the others are sent.
        b = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "bad", "MessageBody": "m", "MessageAttributes": attrs, **extra},
            {"Id": "ok", "MessageBody": "fine", **({"MessageGroupId": "g"} if url == fifo else {})}])
        assert [x["Id"] for x in b["Successful"]] == ["ok"]
        assert [(x["Id"], x["Code"], x["SenderFault"]) for x in b["Failed"]] == [("bad", "InvalidParameterValue", True)]
    for q in ["jobs", "coalesce", "plain", "f.fifo"]:
        assert all(b'"body":"fine"' in m for m in r.zrange(q, 0, -1)), "a refused send stores nothing"
    # DelaySeconds=0, as the SDKs send it, is no delay.
    sqs.send_message(QueueUrl=p, MessageBody="z", DelaySeconds=0, MessageAttributes={"rmq.priority": num(3)})


def test_delete_queue_takes_the_body_index(r, sqs):
    url = kinded(sqs, "jobs", "priority")
    sqs.send_message(QueueUrl=url, MessageBody="a")
    assert r.exists("rmqgw:body{jobs}", "rmqgw:bodyage{jobs}") == 2
    sqs.delete_queue(QueueUrl=url)
    assert r.exists("rmqgw:body{jobs}", "rmqgw:bodyage{jobs}") == 0


def test_the_index_forgets_consumed_bodies(r, sqs):
    url = kinded(sqs, "jobs", "priority")
    for i in range(6):
        sqs.send_message(QueueUrl=url, MessageBody=f"old{i}")
    for m in receive_all(sqs, url):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    keep = sqs.send_message(QueueUrl=url, MessageBody="keep")["MessageId"]
    for i in range(6):
        sqs.send_message(QueueUrl=url, MessageBody=f"new{i}")
    # Each new message swept two entries: the consumed bodies are gone, the waiting ones stay.
    left = {k.decode() for k in r.hkeys("rmqgw:body{jobs}")}
    want = {hashlib.sha256(b.encode()).hexdigest() for b in ["keep"] + [f"new{i}" for i in range(6)]}
    assert left == want and r.zcard("rmqgw:bodyage{jobs}") == 7
    assert sqs.send_message(QueueUrl=url, MessageBody="keep")["MessageId"] == keep
