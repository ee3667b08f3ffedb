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

from gateway_support import error_code, error_message
from server_support import wait_for


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
    assert error_code(e) == "InvalidParameterValue"
    assert error_message(e) == ("Value 5 for parameter DelaySeconds is invalid. Reason: The request include "
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
        assert error_code(e) == "InvalidAttributeValue", k
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
    assert error_code(e) == "RequestEntityTooLarge"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413


def test_tag_limits(sqs):
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName="t", tags={f"k{i}": "v" for i in range(51)})
    assert error_code(e) == "InvalidParameterValue"
    url = sqs.create_queue(QueueName="t", tags={f"k{i}": "v" for i in range(49)})["QueueUrl"]
    # Retagging an existing key does not count twice; the 51st key is refused.
    sqs.tag_queue(QueueUrl=url, Tags={"k0": "w", "k49": "v"})
    with pytest.raises(ClientError) as e:
        sqs.tag_queue(QueueUrl=url, Tags={"k50": "v"})
    assert error_code(e) == "InvalidParameterValue" and error_message(e) == "Too many tags added for queue t."
    assert len(sqs.list_queue_tags(QueueUrl=url)["Tags"]) == 50
    url2 = sqs.create_queue(QueueName="t2")["QueueUrl"]
    sqs.tag_queue(QueueUrl=url2, Tags={"k" * 128: "v" * 256, "empty": ""})
    for tags in [{"k" * 129: "v"}, {"k": "v" * 257}, {"": "v"}]:
        with pytest.raises(ClientError) as e:
            sqs.tag_queue(QueueUrl=url2, Tags=tags)
        assert error_code(e) == "InvalidParameterValue", tags
    assert sqs.list_queue_tags(QueueUrl=url2)["Tags"] == {"k" * 128: "v" * 256, "empty": ""}


def test_number_attributes_must_be_numbers(sqs):
    url = sqs.create_queue(QueueName="n")["QueueUrl"]
    for v in ["42", "-1.5", "1e10", "0.000001"]:
        sqs.send_message(QueueUrl=url, MessageBody="m", MessageAttributes={"n": {"DataType": "Number", "StringValue": v}})
    sqs.send_message(QueueUrl=url, MessageBody="m", MessageAttributes={"n": {"DataType": "Number.int", "StringValue": "7"}})
    for v in ["abc", "1.2.3", "1e200", "1" * 39]:
        with pytest.raises(ClientError) as e:
            sqs.send_message(QueueUrl=url, MessageBody="m",
                             MessageAttributes={"n": {"DataType": "Number", "StringValue": v}})
        assert error_code(e) == "InvalidParameterValue", v
        assert error_message(e) == "Can't cast the value of message (user) attribute 'n' to a number.", v
    r = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "ok", "MessageBody": "m", "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "1"}}},
        {"Id": "bad", "MessageBody": "m", "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "x"}}}])
    assert [s["Id"] for s in r["Successful"]] == ["ok"] and [f["Id"] for f in r["Failed"]] == ["bad"]


def test_error_texts_are_aws_own(sqs):
    url = sqs.create_queue(QueueName="e")["QueueUrl"]
    cases = [
        (lambda: sqs.send_message_batch(QueueUrl=url, Entries=[]), "EmptyBatchRequest",
         "There should be at least one SendMessageBatchRequestEntry in the request."),
        (lambda: sqs.delete_message_batch(QueueUrl=url, Entries=[]), "EmptyBatchRequest",
         "There should be at least one DeleteMessageBatchRequestEntry in the request."),
        (lambda: sqs.change_message_visibility_batch(QueueUrl=url, Entries=[]), "EmptyBatchRequest",
         "There should be at least one ChangeMessageVisibilityBatchRequestEntry in the request."),
        (lambda: sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "m"} for i in range(11)]),
         "TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent 11."),
        (lambda: sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x" * 600_000},
                                                               {"Id": "b", "MessageBody": "y" * 448_577}]),
         "BatchRequestTooLong", "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes."),
        (lambda: sqs.send_message(QueueUrl=url, MessageBody="m", DelaySeconds=901), "InvalidParameterValue",
         "Value 901 for parameter DelaySeconds is invalid. Reason: Must be between 0 and 900, if provided."),
        (lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11), "InvalidParameterValue",
         "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided."),
    ]
    for call, want_code, want_message in cases:
        with pytest.raises(ClientError) as e:
            call()
        assert (e.value.response["Error"]["Code"].split(".")[-1], error_message(e)) == (want_code.split(".")[-1], want_message)
    # A batch of exactly 1 MiB in total is taken.
    r = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x" * 600_000},
                                                      {"Id": "b", "MessageBody": "y" * 448_576}])
    assert len(r["Successful"]) == 2


def test_racing_creates_with_different_attributes(gw, start_gateway, r):
    other = start_gateway()
    clients = [gw.sqs(), other.sqs()]
    for i in range(15):
        name = f"race{i}"
        barrier = threading.Barrier(2)
        results = [None, None]

        def create(k):
            barrier.wait()
            try:
                clients[k].create_queue(QueueName=name, Attributes={"VisibilityTimeout": str(10 + k)})
                results[k] = "ok"
            except ClientError as e:
                results[k] = e.response["Error"]["Code"]

        threads = [threading.Thread(target=create, args=(k,)) for k in range(2)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert sorted(results) == ["QueueAlreadyExists", "ok"], (name, results)
        winner = results.index("ok")
        assert r.hget(f"rmqgw:q{{{name}}}", "VisibilityTimeout") == str(10 + winner).encode()
    a = clients[0].get_queue_attributes(QueueUrl=f"{gw.url}/000000000000/race0", AttributeNames=["All"])["Attributes"]
    assert "created" not in a


def test_cancelled_move_task_stops_moving(r, sqs):
    sqs.create_queue(QueueName="dlq")
    sqs.create_queue(QueueName="src", Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn("dlq"), "maxReceiveCount": 1})})
    for i in range(10):
        r.execute_command("RMQ.PUSH", "dlq", "DELAY", 0, f"dead{i}")
    handle = sqs.start_message_move_task(SourceArn=arn("dlq"), MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    deadline = time.monotonic() + 30
    while r.zcard("src") < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]
    at_cancel = r.zcard("src")
    time.sleep(2.5)  # past the next message's turn at 1 per second
    assert r.zcard("src") == at_cancel and moved <= at_cancel <= moved + 1
    [task] = sqs.list_message_move_tasks(SourceArn=arn("dlq"))["Results"]
    assert task["Status"] == "CANCELLED"


def test_nothing_is_pushed_into_a_deleted_queue(r, sqs):
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    src = sqs.create_queue(QueueName="src", Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn("dlq"), "maxReceiveCount": 1})})["QueueUrl"]
    sqs.delete_queue(QueueUrl=dlq)
    sqs.send_message(QueueUrl=src, MessageBody="doomed")
    [m] = sqs.receive_message(QueueUrl=src)["Messages"]
    sqs.change_message_visibility(QueueUrl=src, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    time.sleep(1.5)  # several rounds of every gateway's mover
    assert r.exists("dlq", "rmqgw:q{dlq}") == 0
    assert r.zcard("dead{src}") == 1 and r.hlen("moving{src}") == 0
    # Once a target of the name exists again, the dead move there.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
            break
        except ClientError:
            time.sleep(0.5)
    got = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=20)["Messages"]
    assert [g["Body"] for g in got] == ["doomed"]


def test_move_task_into_a_deleted_queue_fails(r, sqs):
    sqs.create_queue(QueueName="dlq")
    src = sqs.create_queue(QueueName="src", Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn("dlq"), "maxReceiveCount": 1})})["QueueUrl"]
    for i in range(10):
        r.execute_command("RMQ.PUSH", "dlq", "DELAY", 0, f"dead{i}")
    sqs.start_message_move_task(SourceArn=arn("dlq"), MaxNumberOfMessagesPerSecond=1)
    deadline = time.monotonic() + 30
    while r.zcard("src") < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    sqs.delete_queue(QueueUrl=src)
    time.sleep(2.5)
    assert r.exists("src", "rmqgw:q{src}") == 0
    [task] = sqs.list_message_move_tasks(SourceArn=arn("dlq"))["Results"]
    assert task["Status"] == "FAILED" and "deleted" in task["FailureReason"]


def test_long_poll_never_takes_a_message_of_a_queue_made_later(r, sqs):
    """A poll that started before DeleteQueue (20 s, longer than the 5 s a new queue of the
    name must wait) answers empty, and leaves the new queue's message to its receivers."""
    url = sqs.create_queue(QueueName="lp")["QueueUrl"]
    result = {}
    poll = threading.Thread(target=lambda: result.update(
        got=sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20).get("Messages", [])))
    poll.start()
    time.sleep(0.5)
    sqs.delete_queue(QueueUrl=url)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            sqs.create_queue(QueueName="lp")
            break
        except ClientError:
            time.sleep(0.1)
    sqs.send_message(QueueUrl=url, MessageBody="for the new queue")
    poll.join(timeout=30)
    assert result["got"] == []
    [m] = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])["Messages"]
    assert (m["Body"], m["Attributes"]["ApproximateReceiveCount"]) == ("for the new queue", "1")


def test_approximate_first_receive_timestamp(r, sqs):
    """Reported (with All or by name), kept across deliveries, its record deleted with the
    message, and by PurgeQueue and DeleteQueue for messages never deleted."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    before = r.time()[0] * 1000
    first = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, AttributeNames=["All"])["Messages"][0]
    after = r.time()[0] * 1000 + 1000
    t = int(first["Attributes"]["ApproximateFirstReceiveTimestamp"])
    assert before <= t <= after
    assert r.hgetall("rmqgw:first{q}") == {first["MessageId"].replace("-", "").encode(): str(t).encode()}
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    time.sleep(0.01)
    again = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, MessageSystemAttributeNames=[
        "ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount"])["Messages"][0]
    assert again["Attributes"] == {"ApproximateFirstReceiveTimestamp": str(t), "ApproximateReceiveCount": "2"}
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    assert r.exists("rmqgw:first{q}") == 0
    for purge in (True, False):
        sqs.send_message(QueueUrl=url, MessageBody="kept")
        assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
        # Not asked for, the record is written a moment later, with other receives'.
        wait_for(lambda: r.hlen("rmqgw:first{q}") == 1, 10, what="the first receive recorded")
        if purge:
            sqs.purge_queue(QueueUrl=url)
        else:
            sqs.delete_queue(QueueUrl=url)
        assert r.exists("rmqgw:first{q}") == 0


def test_first_receive_found_recorded_and_recorded_again(r, sqs):
    """A first delivery of a message that has a record (moved back from its dead-letter
    queue, say) reports the recorded time; a later delivery whose record is gone reports
    its own and records it; a receive that does not ask for the attribute records it too."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": b, "MessageBody": b} for b in "abc"])["Successful"]
    field = {e["Id"]: e["MessageId"].replace("-", "") for e in sent}
    r.hset("rmqgw:first{q}", field["a"], "1234")
    asked = ["ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount"]

    def receive():
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, AttributeNames=asked)
        return {m["Body"]: m["Attributes"] for m in got["Messages"]}

    before = r.time()[0] * 1000
    first = receive()
    assert sorted(first) == ["a", "b", "c"]
    assert first["a"] == {"ApproximateFirstReceiveTimestamp": "1234", "ApproximateReceiveCount": "1"}
    for b in "bc":
        assert before <= int(first[b]["ApproximateFirstReceiveTimestamp"]) <= r.time()[0] * 1000 + 1000
        assert first[b]["ApproximateReceiveCount"] == "1"
    assert r.hgetall("rmqgw:first{q}") == {field[b].encode(): first[b]["ApproximateFirstReceiveTimestamp"].encode()
                                            for b in "abc"}
    r.hdel("rmqgw:first{q}", field["b"])
    time.sleep(0.01)
    again = receive()
    assert {b: again[b]["ApproximateReceiveCount"] for b in "abc"} == {"a": "2", "b": "2", "c": "2"}
    assert again["a"]["ApproximateFirstReceiveTimestamp"] == "1234"
    assert again["c"]["ApproximateFirstReceiveTimestamp"] == first["c"]["ApproximateFirstReceiveTimestamp"]
    b_first = again["b"]["ApproximateFirstReceiveTimestamp"]
    assert int(b_first) > int(first["b"]["ApproximateFirstReceiveTimestamp"])
    assert r.hget("rmqgw:first{q}", field["b"]) == b_first.encode()
    r.delete("rmqgw:first{q}")
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]) == 3
    wait_for(lambda: r.hlen("rmqgw:first{q}") == 3, 10, what="the three first receives recorded")


def test_first_receives_not_asked_for_are_written_later_and_read_in_order(r, gw, sqs):
    """A receive that does not ask for ApproximateFirstReceiveTimestamp leaves its records to be
    written a moment later: a receive that asks right after reads them, a delete right after
    leaves no record behind, and a gateway stopped (SIGTERM) before writing them writes them."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    before = r.time()[0] * 1000
    quiet = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, VisibilityTimeout=0)["Messages"]
    after = r.time()[0] * 1000 + 1000
    assert [m["Body"] for m in quiet] == ["m"] and "Attributes" not in quiet[0]
    again = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, AttributeNames=["All"])["Messages"][0]
    t = again["Attributes"]["ApproximateFirstReceiveTimestamp"]
    assert before <= int(t) <= after and again["Attributes"]["ApproximateReceiveCount"] == "2"
    field = again["MessageId"].replace("-", "")
    assert r.hgetall("rmqgw:first{q}") == {field.encode(): t.encode()}
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    assert r.exists("rmqgw:first{q}") == 0

    # Deleted at once (within the writer's few ms or after them): no record is left.
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": str(i)} for i in range(10)])
    assert len(sent["Successful"]) == 10
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)["Messages"]
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": m["MessageId"], "ReceiptHandle": m["ReceiptHandle"]}
                                                              for m in got])
    assert len(deleted["Successful"]) == len(got) and deleted.get("Failed", []) == []
    kept = sqs.send_message(QueueUrl=url, MessageBody="kept")["MessageId"].replace("-", "")
    while len(got) < 10:  # a receive may return fewer than are waiting
        more = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)["Messages"]
        for m in more:
            if m["Body"] == "kept":
                continue
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        got += [m for m in more if m["Body"] != "kept"]
    rest = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
    assert [m["Body"] for m in rest] in ([], ["kept"])
    # Records are written in order, so once the last receive's is there every earlier one is
    # written or was taken out.
    wait_for(lambda: r.hexists("rmqgw:first{q}", kept), 10, what="the kept message's record")
    assert r.hkeys("rmqgw:first{q}") == [kept.encode()]

    # Stopped before the writer's moment: written on the way out.
    sqs.send_message(QueueUrl=url, MessageBody="last")
    last = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)["Messages"]
    assert gw.stop() == 0
    assert sorted(r.hkeys("rmqgw:first{q}")) == sorted({kept.encode()} | {m["MessageId"].replace("-", "").encode() for m in last})
