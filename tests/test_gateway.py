"""rmq-gateway driven by real clients (boto3, which checks the MD5s SQS returns): every
action of docs/gateway.md, the stored keys behind them, receipt handles, FIFO, interop with
RMQ.PUSH, restarts and a second gateway."""

import hashlib
import json
import threading
import time

import pytest
from botocore.exceptions import ClientError

from gateway_support import error_code
from server_support import wait_for


def server_ms(r):
    s, us = r.time()
    return s * 1000 + us // 1000


def test_queue_lifecycle(r, gw, sqs):
    url = sqs.create_queue(QueueName="orders", tags={"team": "a"})["QueueUrl"]
    assert url == f"{gw.url}/000000000000/orders"
    # The same attributes again: the same queue; different ones: QueueNameExists.
    assert sqs.create_queue(QueueName="orders")["QueueUrl"] == url
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName="orders", Attributes={"VisibilityTimeout": "5"})
    assert error_code(e) == "QueueAlreadyExists"
    assert sqs.get_queue_url(QueueName="orders")["QueueUrl"] == url
    sqs.create_queue(QueueName="other")
    assert sqs.list_queues()["QueueUrls"] == [url, f"{gw.url}/000000000000/other"]
    assert sqs.list_queues(QueueNamePrefix="oth")["QueueUrls"] == [f"{gw.url}/000000000000/other"]
    page = sqs.list_queues(MaxResults=1)
    assert page["QueueUrls"] == [url]
    assert sqs.list_queues(MaxResults=1, NextToken=page["NextToken"])["QueueUrls"] == [f"{gw.url}/000000000000/other"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "a"}
    sqs.tag_queue(QueueUrl=url, Tags={"env": "dev"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["team"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"env": "dev"}
    assert r.hgetall("rmqgw:t{orders}") == {b"env": b"dev"}
    sqs.send_message(QueueUrl=url, MessageBody="x")
    assert r.get("seq{orders}") == b"1"
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="orders")
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.send_message(QueueUrl=url, MessageBody="x")
    # Only the tombstone that keeps the name from a new queue for a few seconds.
    assert r.keys("*{orders}*") == [b"rmqgw:gone{orders}"]


def test_delete_queue_leaves_no_schedule_firing(r, sqs):
    """DeleteQueue drops the queue with every key the module keeps for it (RMQ.DROP): a
    schedule set on it by hand fires no more, and no key of it is left."""
    url = sqs.create_queue(QueueName="ticks")["QueueUrl"]
    r.execute_command("RMQ.SCHEDULE", "ticks", "SET", "t", "EVERY", 50, "DELAY", 0, "tick")
    r.execute_command("RMQ.POLICY", "ticks", "SET", "journal", 10)
    fired = lambda: int(r.info("rmq")["rmq_schedule_fired"])  # noqa: E731
    start = fired()
    deadline = time.monotonic() + 10
    while fired() == start and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fired() > start, "the schedule never fired"
    firing = int(r.info("rmq")["rmq_schedules"])
    sqs.delete_queue(QueueUrl=url)
    assert int(r.info("rmq")["rmq_schedules"]) == firing - 1
    after = fired()
    t0 = server_ms(r)
    while server_ms(r) < t0 + 500:
        time.sleep(0.05)
    assert fired() == after
    assert r.keys("*ticks*") == [b"rmqgw:gone{ticks}"]


def test_invalid_names_and_attributes(sqs):
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName="bad name")
    assert error_code(e) == "InvalidParameterValue"
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "43201"})
    assert error_code(e) == "InvalidAttributeValue"
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName="q", Attributes={"Colour": "blue"})
    assert error_code(e) == "InvalidAttributeName"
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName="q.fifo")
    assert error_code(e) == "InvalidParameterValue"


def test_send_receive_with_attributes_and_md5s(r, sqs):
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    attrs = {"s": {"DataType": "String", "StringValue": "héllo"},
             "n": {"DataType": "Number", "StringValue": "42"},
             "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"}}
    body = "tab\there ü 😀"
    sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attrs,
                            MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-x"}})
    assert sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest()
    assert "MD5OfMessageAttributes" in sent and "MD5OfMessageSystemAttributes" in sent
    # One stored RMQ message in the queue's sorted set, due now (DELAY 0).
    members = r.zrange("q", 0, -1, withscores=True)
    assert len(members) == 1 and members[0][0].startswith(b"rmqgw1 00000000000000000001 {")
    assert abs(members[0][1] - server_ms(r)) < 5000
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"])["Messages"]
    assert len(got) == 1
    m = got[0]
    # boto3 has checked MD5OfBody and MD5OfMessageAttributes against what it received.
    assert m["Body"] == body and m["MessageId"] == sent["MessageId"]
    assert m["MessageAttributes"]["b"]["BinaryValue"] == b"\x00\x01\xff"
    assert m["MessageAttributes"]["s"]["StringValue"] == "héllo"
    assert m["Attributes"]["ApproximateReceiveCount"] == "1"
    assert m["Attributes"]["SenderId"] == "test"
    assert m["Attributes"]["AWSTraceHeader"] == "Root=1-x"
    assert abs(int(m["Attributes"]["SentTimestamp"]) - server_ms(r)) < 60000
    # In flight: nothing else to receive, and the module holds it under a 30 s lease.
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    [(raw, deadline)] = r.zrange("prepare{q}", 0, -1, withscores=True)
    assert 25000 < deadline - server_ms(r) <= 30000
    # Only the requested attributes come back, with a digest of those.
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    m2 = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["n"])["Messages"][0]
    assert list(m2["MessageAttributes"]) == ["n"] and "Attributes" not in m2
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m2["ReceiptHandle"])
    assert r.zcard("q") == 0 and r.zcard("prepare{q}") == 0


def test_send_validation(sqs):
    url = sqs.create_queue(QueueName="q", Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="bad \x00 char")
    assert error_code(e) == "InvalidMessageContents"
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x" * 1025)
    assert error_code(e) == "InvalidParameterValue"
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=901)
    assert error_code(e) == "InvalidParameterValue"
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x",
                         MessageAttributes={"AWS.x": {"DataType": "String", "StringValue": "v"}})
    assert error_code(e) == "InvalidParameterValue"
    with pytest.raises(ClientError) as e:
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11)
    assert error_code(e) == "InvalidParameterValue"


def test_same_body_twice_is_two_messages(sqs):
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    a = sqs.send_message(QueueUrl=url, MessageBody="same")["MessageId"]
    b = sqs.send_message(QueueUrl=url, MessageBody="same")["MessageId"]
    assert a != b
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["MessageId"] for m in got) == sorted([a, b])


def test_delay_and_queue_attributes(r, sqs):
    url = sqs.create_queue(QueueName="q", Attributes={"DelaySeconds": "30"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="later")
    sqs.send_message(QueueUrl=url, MessageBody="now", DelaySeconds=0)
    [(_, due_later)] = [(m, s) for m, s in r.zrange("q", 0, -1, withscores=True) if b'"later"' in m]
    assert 25000 < due_later - server_ms(r) <= 30000
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in got] == ["now"]
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert a["ApproximateNumberOfMessages"] == "0"
    assert a["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert a["ApproximateNumberOfMessagesDelayed"] == "1"
    assert a["DelaySeconds"] == "30" and a["VisibilityTimeout"] == "30"
    assert a["MaximumMessageSize"] == "1048576"
    assert a["QueueArn"] == "arn:aws:sqs:us-east-1:000000000000:q"
    assert int(a["CreatedTimestamp"]) <= int(a["LastModifiedTimestamp"])
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "7"})
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"] == {"VisibilityTimeout": "7"}
    with pytest.raises(ClientError) as e:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Nope"])
    assert error_code(e) == "InvalidAttributeName"
    sqs.purge_queue(QueueUrl=url)
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"], a["ApproximateNumberOfMessagesDelayed"]) == ("0", "0", "0")
    assert r.exists("q", "prepare{q}") == 0 and r.exists("rmqgw:q{q}") == 1


def test_visibility_expiry_counts_and_stale_handles(r, sqs):
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=1, AttributeNames=["ApproximateReceiveCount"])["Messages"][0]
    assert first["Attributes"]["ApproximateReceiveCount"] == "1"
    # The lease runs out (the module's timer rolls it back) and it is received again.
    second = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20, VisibilityTimeout=60,
                                 AttributeNames=["ApproximateReceiveCount"])["Messages"][0]
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    assert second["ReceiptHandle"] != first["ReceiptHandle"]
    # The first handle's delivery has ended: deleting with it succeeds and ends nothing,
    # changing its visibility is refused.
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert r.zcard("prepare{q}") == 1
    with pytest.raises(ClientError) as e:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=5)
    assert error_code(e) == "AWS.SimpleQueueService.MessageNotInflight"
    # The current handle extends and then ends it.
    before = r.zscore("prepare{q}", r.zrange("prepare{q}", 0, 0)[0])
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"], VisibilityTimeout=600)
    after = r.zscore("prepare{q}", r.zrange("prepare{q}", 0, 0)[0])
    assert 590000 < after - server_ms(r) <= 600000 and after > before
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
    assert r.zcard("prepare{q}") == 0 and r.zcard("q") == 0


def test_stale_handle_never_ends_an_unrecorded_later_delivery(r, sqs):
    """A later delivery taken by anything but the gateway's receive (a blocking POP before
    its record is written, a plain RMQ.POP) is not ended by an earlier delivery's handle."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    old = sqs.receive_message(QueueUrl=url, VisibilityTimeout=1)["Messages"][0]
    deadline = time.monotonic() + 30
    got = None
    while time.monotonic() < deadline and not got:
        got = r.execute_command("RMQ.POP", "q", "LEASE", 60000)
        time.sleep(0.05)
    assert got and got[0][1] == 2
    sqs.delete_message(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"])
    with pytest.raises(ClientError):
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"], VisibilityTimeout=0)
    assert r.zcard("prepare{q}") == 1


def test_handles_are_short_and_name_the_modules_delivery(r, sqs):
    """A receipt handle names RMQ's delivery id (RMQ.POP ... IDS) and the MessageId, not the
    message: the same 55 characters for any body; the gateway's only record is the message's
    first receive time, which goes with its deletion, as the module's record of the name
    goes with the delivery."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    for body in ("m", "x" * 200_000):
        sqs.send_message(QueueUrl=url, MessageBody=body)
        m = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"][0]
        assert len(m["ReceiptHandle"]) == 55
        assert [k for k in r.hkeys("meta{q}") if k[:1] == b"n"] != []
        assert r.keys("rmqgw:r*") == []
        # Written a moment after the receive (it did not ask for the attribute).
        wait_for(lambda: r.hkeys("rmqgw:first{q}") == [m["MessageId"].replace("-", "").encode()], 10,
                 what="the first receive recorded")
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        assert r.zcard("prepare{q}") == 0 and r.exists("rmqgw:first{q}") == 0
        assert [k for k in r.hkeys("meta{q}") if k[:1] == b"n"] == []


def test_first_format_handles_are_refused(r, sqs):
    """Handles of the first format (version 1, carrying the message) are
    ReceiptHandleIsInvalid after the upgrade, even with a valid MAC (docs/GATEWAY_FORMAT.md)."""
    import base64
    import hmac
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    sqs.receive_message(QueueUrl=url)
    raw = r.zrange("prepare{q}", 0, 0)[0]
    key = bytes.fromhex(r.hget("rmqgw:q{q}", "hkey").decode())
    data = b"\x01" + (1).to_bytes(4, "big") + (1).to_bytes(2, "big") + b"q" + raw
    old = base64.urlsafe_b64encode(data + hmac.new(key, data, "sha256").digest()[:16]).rstrip(b"=").decode()
    with pytest.raises(ClientError) as e:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=old)
    assert error_code(e) == "ReceiptHandleIsInvalid"
    assert r.zcard("prepare{q}") == 1


def test_forged_handles_refused(sqs):
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    other = sqs.create_queue(QueueName="other")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    h = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
    for bad in ["garbage", h[:-4] + ("AAAA" if not h.endswith("AAAA") else "BBBB"), ""]:
        with pytest.raises(ClientError) as e:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=bad)
        assert error_code(e) in ("ReceiptHandleIsInvalid", "MissingParameter")
    # A handle of another queue is not a handle of this one.
    with pytest.raises(ClientError) as e:
        sqs.delete_message(QueueUrl=other, ReceiptHandle=h)
    assert error_code(e) == "ReceiptHandleIsInvalid"


def test_long_poll_wakes_on_send(r, sqs, gw):
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sender = gw.sqs()
    out = {}

    def poll():
        t0 = time.monotonic()
        out["got"] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20).get("Messages", [])
        out["took"] = time.monotonic() - t0

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(1.0)
    sender.send_message(QueueUrl=url, MessageBody="wake")
    t.join(30)
    assert [m["Body"] for m in out["got"]] == ["wake"]
    assert 0.9 < out["took"] < 15
    # The long-polled delivery's handle ends it.
    sqs.delete_message(QueueUrl=url, ReceiptHandle=out["got"][0]["ReceiptHandle"])
    assert r.zcard("prepare{q}") == 0


def test_long_poll_times_out_empty(sqs):
    url = sqs.create_queue(QueueName="q", Attributes={"ReceiveMessageWaitTimeSeconds": "1"})["QueueUrl"]
    t0 = time.monotonic()
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    assert time.monotonic() - t0 >= 0.9


def test_batches_with_per_entry_failures(r, sqs):
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    res = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "one"},
        {"Id": "b", "MessageBody": "bad\x01"},
        {"Id": "c", "MessageBody": "three", "DelaySeconds": 0},
    ])
    assert sorted(e["Id"] for e in res["Successful"]) == ["a", "c"]
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in res["Failed"]] == [("b", "InvalidMessageContents", True)]
    assert r.zcard("q") == 2
    for entries, expected in [
        ([], "AWS.SimpleQueueService.EmptyBatchRequest"),
        ([{"Id": str(i), "MessageBody": "x"} for i in range(11)], "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"),
        ([{"Id": "x", "MessageBody": "x"}, {"Id": "x", "MessageBody": "y"}], "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"),
        ([{"Id": "bad id!", "MessageBody": "x"}], "AWS.SimpleQueueService.InvalidBatchEntryId"),
    ]:
        with pytest.raises(ClientError) as e:
            sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert error_code(e) == expected
    assert r.zcard("q") == 2
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in got) == ["one", "three"]
    res = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "a", "ReceiptHandle": got[0]["ReceiptHandle"], "VisibilityTimeout": 100},
        {"Id": "b", "ReceiptHandle": "forged", "VisibilityTimeout": 100},
    ])
    assert [e["Id"] for e in res["Successful"]] == ["a"]
    assert [(f["Id"], f["Code"]) for f in res["Failed"]] == [("b", "ReceiptHandleIsInvalid")]
    res = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "ReceiptHandle": got[0]["ReceiptHandle"]},
        {"Id": "b", "ReceiptHandle": got[1]["ReceiptHandle"]},
        {"Id": "c", "ReceiptHandle": "forged"},
    ])
    assert sorted(e["Id"] for e in res["Successful"]) == ["a", "b"]
    assert [(f["Id"], f["Code"]) for f in res["Failed"]] == [("c", "ReceiptHandleIsInvalid")]
    assert r.zcard("prepare{q}") == 0


def test_a_batch_pushes_each_run_of_one_place_at_once(r, sqs):
    """Neighbouring entries of one delay are one RMQ.PUSH, numbered in entry order, each
    answered with its own MessageId; a push the queue's length limit refuses stores none of
    its messages."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]

    def pushes():
        return r.info("commandstats").get("cmdstat_rmq.push", {}).get("calls", 0)

    before = pushes()
    res = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "a"},
        {"Id": "b", "MessageBody": "b", "DelaySeconds": 0},
        {"Id": "c", "MessageBody": "c", "DelaySeconds": 1},
        {"Id": "d", "MessageBody": "d"},
    ])
    assert pushes() - before == 3
    ids = {e["Id"]: e["MessageId"] for e in res["Successful"]}
    assert len(set(ids.values())) == 4
    stored = {}
    for member in r.zrange("q", 0, -1):
        prefix, seq, text = member.split(b" ", 2)
        assert prefix == b"rmqgw1"
        m = json.loads(text)
        stored[m["body"]] = (int(seq), m["id"])
    assert sorted(stored.items(), key=lambda kv: kv[1][0]) == [(b, (i + 1, ids[b])) for i, b in enumerate("abcd")]
    got = []
    deadline = time.monotonic() + 10
    while len(got) < 4 and time.monotonic() < deadline:
        got += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
    assert {m["Body"]: m["MessageId"] for m in got} == ids
    r.execute_command("RMQ.POLICY", "q", "SET", "max-queue-length", "2")
    with pytest.raises(ClientError) as e:
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"x{i}"} for i in range(3)])
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert r.zcard("q") == 0


def test_fifo_order_exclusivity_and_dedup(r, sqs):
    url = sqs.create_queue(QueueName="f.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    sent = [sqs.send_message(QueueUrl=url, MessageBody=f"a{i}", MessageGroupId="A") for i in range(5)]
    first_a0 = sent[0]
    seqs = [m["SequenceNumber"] for m in sent]
    sqs.send_message(QueueUrl=url, MessageBody="b0", MessageGroupId="B")
    assert seqs == sorted(seqs)
    # Content-based deduplication: the same body again is accepted and not delivered again.
    dup = sqs.send_message(QueueUrl=url, MessageBody="a0", MessageGroupId="A")
    assert dup["SequenceNumber"] == seqs[0]
    assert dup["MessageId"] == first_a0["MessageId"]
    # The module's send sequence numbered them: the last number given is the last send's.
    assert int(r.get("seq{f.fifo}")) == int(seqs[-1]) + 1
    # An explicit id deduplicates whatever the body.
    sqs.send_message(QueueUrl=url, MessageBody="c0", MessageGroupId="C", MessageDeduplicationId="d1")
    sqs.send_message(QueueUrl=url, MessageBody="c1", MessageGroupId="C", MessageDeduplicationId="d1")
    # One message per group at a time, each group in send order.
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert sorted(m["Body"] for m in got) == ["a0", "b0", "c0"]
    assert {m["Attributes"]["MessageGroupId"] for m in got} == {"A", "B", "C"}
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    order = []
    handles = {m["Body"]: m["ReceiptHandle"] for m in got}
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handles["a0"])
    order.append("a0")
    while len(order) < 5:
        [m] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        order.append(m["Body"])
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert order == [f"a{i}" for i in range(5)]
    # Consumed, and still deduplicated within the window.
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handles["c0"])
    sqs.send_message(QueueUrl=url, MessageBody="c2", MessageGroupId="C", MessageDeduplicationId="d1")
    assert r.zcard("f.fifo") == 0
    # The window: the module's record of d1, ending 5 minutes after its first send.
    ends = int(r.hget("dedup{f.fifo}", "d1").split(b" ")[0])
    assert 0 < ends - server_ms(r) <= 300000
    assert r.zscore("dedupexp{f.fifo}", "d1") == ends and 0 < r.pttl("dedup{f.fifo}") <= 300000
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x")
    assert error_code(e) == "MissingParameter"
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="A", DelaySeconds=1)
    assert error_code(e) == "InvalidParameterValue"
    # DeleteQueue takes the sequence and the deduplication records along.
    sqs.delete_queue(QueueUrl=url)
    assert r.keys("*{f.fifo}*") == [b"rmqgw:gone{f.fifo}"]


def test_rmq_push_received_through_the_gateway(r, sqs):
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    r.execute_command("RMQ.PUSH", "q", "DELAY", 0, "plain text")
    r.execute_command("RMQ.PUSH", "q", "DELAY", 0, b"\x00\xffbin")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    by_body = {m["Body"]: m for m in got}
    assert "MessageAttributes" not in by_body["plain text"]
    assert by_body["AP9iaW4="]["MessageAttributes"]["rmq.encoding"]["StringValue"] == "base64"
    for m in got:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert r.zcard("prepare{q}") == 0


def test_second_gateway_and_restart(r, gw, start_gateway):
    a = gw.sqs()
    url = a.create_queue(QueueName="q")["QueueUrl"]
    for i in range(3):
        a.send_message(QueueUrl=url, MessageBody=f"m{i}")
    m = a.receive_message(QueueUrl=url)["Messages"][0]
    other = start_gateway()
    b = other.sqs()
    burl = b.get_queue_url(QueueName="q")["QueueUrl"]
    b.delete_message(QueueUrl=burl, ReceiptHandle=m["ReceiptHandle"])
    assert r.zcard("prepare{q}") == 0
    m = b.receive_message(QueueUrl=burl)["Messages"][0]
    assert gw.stop() == 0
    restarted = start_gateway()
    c = restarted.sqs()
    curl = c.get_queue_url(QueueName="q")["QueueUrl"]
    c.delete_message(QueueUrl=curl, ReceiptHandle=m["ReceiptHandle"])
    rest = c.receive_message(QueueUrl=curl, MaxNumberOfMessages=10)["Messages"]
    assert len(rest) == 1 and r.zcard("q") == 0


def test_stop_answers_long_polls_empty(r, gw):
    sqs = gw.sqs()
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    out = {}

    def poll():
        out["got"] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(1.0)
    t0 = time.monotonic()
    assert gw.stop() == 0
    assert time.monotonic() - t0 < 10
    t.join(15)
    assert "Messages" not in out["got"]


def test_unsupported_and_malformed(gw, sqs):
    import urllib.request
    req = urllib.request.Request(gw.url + "/", data=b"{}", method="POST",
                                 headers={"X-Amz-Target": "AmazonSQS.Frobnicate", "Content-Type": "application/x-amz-json-1.0"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 400
    assert e.value.headers["x-amzn-query-error"] == "AWS.SimpleQueueService.UnsupportedOperation;Sender"
    req = urllib.request.Request(gw.url + "/", data=b"x" * (3 * 1024 * 1024), method="POST",
                                 headers={"X-Amz-Target": "AmazonSQS.ListQueues"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 413
    # The gateway still serves others.
    assert sqs.list_queues().get("QueueUrls", []) == []
    with urllib.request.urlopen(gw.url + "/health") as h:
        assert h.status == 200
    with urllib.request.urlopen(gw.url + "/metrics") as h:
        text = h.read().decode()
    assert 'rmq_gateway_requests_total{action="ListQueues",outcome="ok"}' in text
    assert "rmq_gateway_long_polls 0" in text


def test_redrive_to_a_dead_letter_queue(r, sqs):
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName="src", Attributes={
        "RedrivePolicy": f'{{"deadLetterTargetArn": "{arn}", "maxReceiveCount": "2"}}'})["QueueUrl"]
    policy = dict(zip(*[iter(r.execute_command("RMQ.POLICY", "src", "GET"))] * 2))
    assert policy[b"retries"] == 1
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [url]
    sent = sqs.send_message(QueueUrl=url, MessageBody="doomed",
                            MessageAttributes={"k": {"DataType": "String", "StringValue": "v"}})
    for n in (1, 2):
        m = sqs.receive_message(QueueUrl=url, VisibilityTimeout=1, WaitTimeSeconds=20,
                                AttributeNames=["ApproximateReceiveCount"])["Messages"][0]
        assert m["Attributes"]["ApproximateReceiveCount"] == str(n)
    # The second delivery's lease runs out: the message dies and moves to the target.
    got = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=20, MessageAttributeNames=["All"],
                              AttributeNames=["ApproximateReceiveCount"])["Messages"]
    assert [(m["Body"], m["MessageId"], m["Attributes"]["ApproximateReceiveCount"]) for m in got] == \
        [("doomed", sent["MessageId"], "1")]
    assert got[0]["MessageAttributes"]["k"]["StringValue"] == "v"
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    assert r.zcard("dead{src}") == 0 and r.exists("moving{src}") == 0
    # Without a redrive policy a queue redelivers (RMQ's largest retries).
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    policy = dict(zip(*[iter(r.execute_command("RMQ.POLICY", "src", "GET"))] * 2))
    assert policy[b"retries"] == 1000
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == []
    with pytest.raises(ClientError) as e:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:nope", "maxReceiveCount": 1}'})
    assert error_code(e) == "InvalidParameterValue"
    with pytest.raises(ClientError) as e:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": '{"maxReceiveCount": 1}'})
    assert error_code(e) == "InvalidAttributeValue"


def test_redrive_timing_and_interrupted_moves(r, sqs):
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    url = sqs.create_queue(QueueName="src", Attributes={
        "RedrivePolicy": '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:dlq", "maxReceiveCount": 1}'})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=1)
    # Died (server clock) -> in the target: measured from its death time in dead{src}.
    died = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and r.zcard("dlq") == 0:
        d = r.zrange("dead{src}", 0, 0, withscores=True)
        if d:
            died = d[0][1]
        time.sleep(0.01)
    arrived = server_ms(r)
    assert r.zcard("dlq") == 1
    if died is not None:
        assert arrived - died <= 1500
    # A claim left by a gateway that stopped mid-move is taken again (after 10 s) and the
    # push merges with a copy already there: one message in the target.
    raw = r.zrange("dlq", 0, 0)[0]
    # (A claim as RMQ.REDRIVE CLAIM writes it: claim time, no priority, no group.)
    r.hset("moving{src}", raw, f"{server_ms(r) - 60000} - ")
    wait_until = time.monotonic() + 20
    while time.monotonic() < wait_until and r.hlen("moving{src}"):
        time.sleep(0.05)
    assert r.hlen("moving{src}") == 0 and r.zcard("dlq") == 1


def test_message_move_task_back_to_the_source(r, sqs):
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    dlq_arn = "arn:aws:sqs:us-east-1:000000000000:dlq"
    url = sqs.create_queue(QueueName="src", Attributes={
        "RedrivePolicy": f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": 1}}'})["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(6)])
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=1)["Messages"]) == 6
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and r.zcard("dlq") < 6:
        time.sleep(0.05)
    assert r.zcard("dlq") == 6
    with pytest.raises(ClientError) as e:
        sqs.start_message_move_task(SourceArn="arn:aws:sqs:us-east-1:000000000000:src")
    assert error_code(e) == "InvalidParameterValue"
    t0 = time.monotonic()
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=4)["TaskHandle"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        [task] = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        if task["Status"] != "RUNNING":
            break
        time.sleep(0.1)
    took = time.monotonic() - t0
    assert task["Status"] == "COMPLETED" and task["ApproximateNumberOfMessagesMoved"] == 6
    assert task["ApproximateNumberOfMessagesToMove"] == 6
    assert task["DestinationArn"] == "arn:aws:sqs:us-east-1:000000000000:src"
    # 6 messages at 4 a second: the last two go in the second second.
    assert took >= 0.95
    assert r.zcard("dlq") == 0 and r.zcard("prepare{dlq}") == 0
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"])["Messages"]
    assert sorted(m["Body"] for m in got) == [f"m{i}" for i in range(6)]
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in got} == {"1"}
    with pytest.raises(ClientError) as e:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert error_code(e) == "ResourceNotFoundException"
    # Deleting the dead-letter queue removes its task's state too.
    sqs.delete_queue(QueueUrl=url.replace("/src", "/dlq"))
    assert r.keys("*{dlq}*") == [b"rmqgw:gone{dlq}"]


def test_message_move_task_cancel(r, sqs):
    sqs.create_queue(QueueName="dlq")
    dlq_arn = "arn:aws:sqs:us-east-1:000000000000:dlq"
    sqs.create_queue(QueueName="src", Attributes={
        "RedrivePolicy": f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": 1}}'})
    for i in range(20):
        r.execute_command("RMQ.PUSH", "dlq", "DELAY", 0, f"dead{i}")
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    time.sleep(1.5)
    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]
    assert 1 <= moved < 20
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        [task] = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        if task["Status"] == "CANCELLED":
            break
        time.sleep(0.1)
    assert task["Status"] == "CANCELLED"
    assert r.zcard("src") + r.zcard("dlq") == 20 and r.zcard("prepare{dlq}") == 0


def test_grafana_panel_uses_exported_metrics(gw, sqs):
    """docs/grafana-dashboard.json's gateway panel names only metrics /metrics gives."""
    import json
    import re
    import urllib.request
    from server_support import REPO
    sqs.list_queues()
    with urllib.request.urlopen(gw.url + "/metrics") as h:
        exported = set(re.findall(r"^(rmq_gateway_[a-z_]+)", h.read().decode(), re.M))
    grafana = json.loads((REPO / "docs" / "grafana-dashboard.json").read_text())
    exprs = " ".join(t["expr"] for p in grafana["panels"] for t in p["targets"])
    used = set(re.findall(r"\brmq_gateway_[a-z_]+", exprs))
    assert {"rmq_gateway_requests_total", "rmq_gateway_long_polls", "rmq_gateway_request_seconds_bucket"} <= used
    assert used <= exported, used - exported


def test_slow_headers_are_cut_off_without_harm_to_others(gw, sqs):
    """A client whose headers take over 10 s is disconnected; others are served meanwhile."""
    import socket
    s = socket.create_connection(("127.0.0.1", gw.port))
    s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AmazonSQS.ListQueues\r\n")
    t0 = time.monotonic()
    sqs.create_queue(QueueName="meanwhile")
    assert time.monotonic() - t0 < 5
    s.settimeout(30)
    data = s.recv(4096)
    # Closed (or answered with an error) around the 10 s header timeout, never served.
    assert time.monotonic() - t0 >= 9
    assert data == b"" or data.startswith(b"HTTP/1.1 408")
    s.close()
    # A fresh client: hyper times an idle keep-alive connection like a header read, so
    # `sqs`'s own connection, idle for these same 10 s, may be closed just as it is reused.
    assert gw.sqs().get_queue_url(QueueName="meanwhile")["QueueUrl"].endswith("/meanwhile")
