"""Presigned requests as the SDKs' presigners write them: botocore's generate_presigned_url
puts every parameter in the query string (a structured one as Python writes it) and signs
the target header; a query-protocol style URL names its action in the query. Opened by raw
HTTP, GET or POST, they are served; a changed parameter is refused."""

import hashlib
import http.client
import json
import urllib.parse

import botocore.auth
import pytest
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

CREDS = "AKIDGOOD s3cretGOOD\n"


@pytest.fixture
def gw(r, start_gateway):
    return start_gateway(credentials=CREDS)


def sdk(gw):
    return gw.sqs(key="AKIDGOOD", secret="s3cretGOOD")


def open_url(gw, url, method="GET", headers=None):
    """Sends the URL's path and query as they are; (status, JSON answer)."""
    parts = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
    try:
        c.request(method, f"{parts.path}?{parts.query}", body=b"", headers=headers or {})
        resp = c.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        c.close()


def botocore_headers(action):
    """The headers botocore's presigner signed (they travel beside the URL)."""
    return {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}",
            "x-amzn-query-mode": "true"}


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_botocore_presigned_urls_carry_their_parameters(r, gw, method):
    sqs = sdk(gw)
    url = sqs.create_queue(QueueName="pre")["QueueUrl"]
    attrs = {"k": {"DataType": "String", "StringValue": "it's"}, "n": {"DataType": "Number", "StringValue": "7"}}
    signed = sqs.generate_presigned_url("send_message", HttpMethod=method, Params={
        "QueueUrl": url, "MessageBody": '{"order": 42} & more', "DelaySeconds": 0, "MessageAttributes": attrs})
    status, out = open_url(gw, signed, method, botocore_headers("SendMessage"))
    assert status == 200, out
    assert out["MD5OfMessageBody"] == hashlib.md5(b'{"order": 42} & more').hexdigest()
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], VisibilityTimeout=0)["Messages"][0]
    assert got["MessageId"] == out["MessageId"]
    assert got["Body"] == '{"order": 42} & more'
    assert got["MessageAttributes"] == {"k": {"DataType": "String", "StringValue": "it's"},
                                        "n": {"DataType": "Number", "StringValue": "7"}}
    assert got["MD5OfMessageAttributes"] == out["MD5OfMessageAttributes"]
    # A receive with numbers and a list in the query.
    signed = sqs.generate_presigned_url("receive_message", HttpMethod=method, Params={
        "QueueUrl": url, "MaxNumberOfMessages": 5, "AttributeNames": ["ApproximateReceiveCount"],
        "WaitTimeSeconds": 0})
    status, out = open_url(gw, signed, method, botocore_headers("ReceiveMessage"))
    assert status == 200, out
    assert [m["Body"] for m in out["Messages"]] == ['{"order": 42} & more']
    assert out["Messages"][0]["Attributes"] == {"ApproximateReceiveCount": "2"}
    # A parameter changed after signing: refused, nothing sent.
    signed = sqs.generate_presigned_url("send_message", HttpMethod=method, Params={"QueueUrl": url, "MessageBody": "a"})
    status, out = open_url(gw, signed.replace("MessageBody=a", "MessageBody=b"), method, botocore_headers("SendMessage"))
    assert (status, out["__type"]) == (403, "com.amazonaws.sqs#SignatureDoesNotMatch")
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])[
        "Attributes"] == {"ApproximateNumberOfMessagesNotVisible": "1"}


def query_presigned(gw, query, expires=300):
    """A URL presigned with its action in the query (no target header), as a query-protocol
    client or the JS SDK's hoisting presigner writes it."""
    req = AWSRequest(method="GET", url=f"{gw.url}/?{query}", data=b"")
    botocore.auth.SigV4QueryAuth(Credentials("AKIDGOOD", "s3cretGOOD"), "sqs", "us-east-1", expires=expires).add_auth(req)
    return req.prepare().url


def test_action_in_the_query(r, gw):
    sqs = sdk(gw)
    url = sqs.create_queue(QueueName="pq")["QueueUrl"]
    q = urllib.parse.quote(url, safe="")
    status, out = open_url(gw, query_presigned(gw, f"Action=SendMessage&QueueUrl={q}&MessageBody=hello&Version=2012-11-05"))
    assert status == 200, out
    status, out = open_url(gw, query_presigned(gw, f"X-Amz-Target=AmazonSQS.GetQueueAttributes&QueueUrl={q}"
                                                   "&AttributeNames=ApproximateNumberOfMessages"))
    assert (status, out) == (200, {"Attributes": {"ApproximateNumberOfMessages": "1"}})
    # The signed query decides the action: an unsigned target header added to it is no
    # way to replay the URL as another action.
    status, out = open_url(gw, query_presigned(gw, f"Action=GetQueueUrl&QueueName=pq"),
                           headers={"X-Amz-Target": "AmazonSQS.PurgeQueue"})
    assert (status, out) == (200, {"QueueUrl": url})
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "hello"
    # Without an action in the query, the target header names it and must be signed.
    status, out = open_url(gw, query_presigned(gw, f"QueueUrl={q}"), headers={"X-Amz-Target": "AmazonSQS.PurgeQueue"})
    assert (status, out["__type"]) == (403, "com.amazonaws.sqs#SignatureDoesNotMatch")
    assert "x-amz-target" in out["message"]
    # A map that is no value: refused as SQS refuses a bad body.
    status, out = open_url(gw, query_presigned(gw, f"Action=SetQueueAttributes&QueueUrl={q}&Attributes=%7B"))
    assert (status, out["__type"]) == (400, "com.amazonaws.sqs#SerializationException")
