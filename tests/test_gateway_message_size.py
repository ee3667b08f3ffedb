"""MaximumMessageSize is what SQS counts (body + message attributes' names, types and
values): every message within it is accepted, whatever its stored form adds (JSON
escaping, base64, the gateway's own fields), with the module loaded at its default
max-message-bytes; SQS's largest is 1,048,576."""

import pytest
from botocore.exceptions import ClientError

from gateway_support import Gateway, error_code

NEEDED = 2 * 1024 * 1024 + 64 * 1024


def max_message_bytes(r):
    return int(r.config_get("rmq.max-message-bytes")["rmq.max-message-bytes"])


def test_every_message_within_maximum_message_size_is_accepted(r, start_gateway):
    assert max_message_bytes(r) == 1_048_576
    gw = start_gateway()
    assert max_message_bytes(r) == NEEDED
    assert f"raised the module's max-message-bytes from 1048576 to {NEEDED}" in gw.output()
    sqs = gw.sqs()
    url = sqs.create_queue(QueueName="big")["QueueUrl"]
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])["Attributes"] == {
        "MaximumMessageSize": "1048576"}
    attrs = {"a" * 256: {"DataType": "Binary", "BinaryValue": b"\x00" * 1000},
             "s": {"DataType": "String", "StringValue": '"' * 1000}}
    counted = 256 + len("Binary") + 1000 + 1 + len("String") + 1000
    bodies = [
        "z" * 1_048_576,
        # Characters the stored JSON escapes: half a megabyte of them doubles.
        '"\\' * 250_000 + "x" * (1_048_576 - 500_000),
        # 1 MiB of UTF-8 (boto3 sends each ü as \u00fc: 6 bytes of a 2 MiB request at most).
        "ü" * 200_000 + "x" * (1_048_576 - 400_000),
        "y" * (1_048_576 - counted),
    ]
    for i, body in enumerate(bodies):
        a = attrs if i == 3 else {}
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=a)
        got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"][0]
        assert got["Body"] == body, i
        assert len(got.get("MessageAttributes", {})) == len(a)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])
    # One byte more than SQS counts is refused as SQS refuses it.
    for body, a in (("z" * 1_048_577, {}), ("y" * (1_048_577 - counted), attrs)):
        with pytest.raises(ClientError) as e:
            sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=a)
        assert error_code(e) == "InvalidParameterValue"
    # A larger setting is left as it is.
    r.config_set("rmq.max-message-bytes", 4 * 1024 * 1024)
    start_gateway()
    assert max_message_bytes(r) == 4 * 1024 * 1024


def test_a_server_that_refuses_the_setting_is_named(r, server):
    """A Redis user without CONFIG: the gateway starts and says what to load the module
    with."""
    r.execute_command("ACL", "SETUSER", "nocfg", "reset", "on", ">nocfgpw", "~*", "&*", "+@all", "-config")
    g = Gateway(server, redis_url=f"redis://nocfg:nocfgpw@{server.addr}").start()
    try:
        assert f"load the module with `max-message-bytes {NEEDED}`" in g.output()
        assert max_message_bytes(r) == 1_048_576
        sqs = g.sqs()
        url = sqs.create_queue(QueueName="small")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="still served")
    finally:
        g.stop()
        r.execute_command("ACL", "DELUSER", "nocfg")
