"""rmq-gateway's signatures cover the whole request: attacks by raw HTTP with pieces of a
validly signed request (a swapped body, with and without x-amz-content-sha256, an unsigned
target replayed as another action, a swapped CreateQueue name) and presigned requests'
expiry rules. Each is refused with the SQS code the contract names; nothing happens."""

import datetime
import hashlib
import http.client
import json
import urllib.parse
from unittest import mock

import botocore.auth
import pytest
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

CREDS = "AKIDGOOD s3cretGOOD\n"
JSON = "application/x-amz-json-1.0"


@pytest.fixture
def gw(start_gateway):
    return start_gateway(credentials=CREDS)


class PartialSigner(botocore.auth.SigV4Auth):
    """SigV4 that leaves the named headers out of SignedHeaders (as an attacker's
    signer, or a sloppy client, would)."""

    def __init__(self, leave_out, *a, **kw):
        super().__init__(*a, **kw)
        self.leave_out = {h.lower() for h in leave_out}

    def headers_to_sign(self, request):
        h = super().headers_to_sign(request)
        for name in self.leave_out:
            if name in h:
                del h[name]
        return h


def sign(gw, action, body, extra=None, leave_out=()):
    headers = {"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": JSON}
    headers.update(extra or {})
    req = AWSRequest(method="POST", url=gw.url + "/", data=body, headers=headers)
    auth = PartialSigner(leave_out, Credentials("AKIDGOOD", "s3cretGOOD"), "sqs", "us-east-1")
    auth.add_auth(req)
    return dict(req.headers.items())


def post(gw, body, headers, path="/"):
    """Sends exactly these headers and body; returns (status, JSON answer)."""
    c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
    try:
        c.request("POST", path, body=body, headers=headers)
        resp = c.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        c.close()


def error_code(answer):
    return answer.get("__type", "").rsplit("#", 1)[-1]


def queue_url(gw, name):
    return f"{gw.url}/000000000000/{name}"


def test_swapped_body_without_payload_hash_header(gw):
    sqs = gw.sqs(key="AKIDGOOD", secret="s3cretGOOD")
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    body = json.dumps({"QueueUrl": url, "MessageBody": "order 42"}).encode()
    h = sign(gw, "SendMessage", body)
    assert post(gw, body, h)[0] == 200
    evil = json.dumps({"QueueUrl": url, "MessageBody": "PAY 1,000,000 to attacker"}).encode()
    status, out = post(gw, evil, h)
    assert (status, error_code(out)) == (403, "SignatureDoesNotMatch")
    # The same swap with a payload-hash header (unsigned) naming the signed body's hash.
    h2 = dict(h, **{"X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()})
    status, out = post(gw, evil, h2)
    assert (status, error_code(out)) == (403, "SignatureDoesNotMatch")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in got] == ["order 42"]


def test_swapped_body_with_signed_payload_hash_header(gw):
    sqs = gw.sqs(key="AKIDGOOD", secret="s3cretGOOD")
    url = sqs.create_queue(QueueName="orders2")["QueueUrl"]
    body = json.dumps({"QueueUrl": url, "MessageBody": "order 42"}).encode()
    h = sign(gw, "SendMessage", body, extra={"X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()})
    assert "x-amz-content-sha256" in h["Authorization"]
    evil = json.dumps({"QueueUrl": url, "MessageBody": "PAY 1,000,000 to attacker"}).encode()
    status, out = post(gw, evil, h)
    assert (status, error_code(out)) == (403, "SignatureDoesNotMatch")
    assert "x-amz-content-sha256" in out["message"]
    # The honest request with its (matching, signed) header is served.
    assert post(gw, body, h)[0] == 200
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in got] == ["order 42"]


def test_swapped_create_queue_name(gw, r):
    body = b'{"QueueName": "harmless"}'
    h = sign(gw, "CreateQueue", body, extra={"X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()})
    status, out = post(gw, b'{"QueueName": "attacker-made"}', h)
    assert (status, error_code(out)) == (403, "SignatureDoesNotMatch")
    assert r.exists("rmqgw:q{attacker-made}") == 0
    assert post(gw, body, h) == (200, {"QueueUrl": queue_url(gw, "harmless")})


def test_unsigned_target_replayed_as_another_action(gw):
    sqs = gw.sqs(key="AKIDGOOD", secret="s3cretGOOD")
    url = sqs.create_queue(QueueName="keep")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="precious")
    body = json.dumps({"QueueUrl": url, "AttributeNames": ["All"]}).encode()
    h = sign(gw, "GetQueueAttributes", body, leave_out=["X-Amz-Target"])
    assert "x-amz-target" not in h["Authorization"]
    status, out = post(gw, body, dict(h, **{"X-Amz-Target": "AmazonSQS.PurgeQueue"}))
    assert (status, error_code(out)) == (403, "SignatureDoesNotMatch")
    assert "x-amz-target" in out["message"]
    # A target that is signed cannot be swapped either.
    h = sign(gw, "GetQueueAttributes", body)
    status, out = post(gw, body, dict(h, **{"X-Amz-Target": "AmazonSQS.PurgeQueue"}))
    assert (status, error_code(out)) == (403, "SignatureDoesNotMatch")
    got = sqs.receive_message(QueueUrl=url)["Messages"]
    assert [m["Body"] for m in got] == ["precious"]


@pytest.mark.parametrize("left_out", ["Content-Type", "X-Amz-Date", "Host"])
def test_headers_that_must_be_signed(gw, left_out):
    body = b"{}"
    h = sign(gw, "ListQueues", body, leave_out=[left_out])
    assert left_out.lower() not in h["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    status, out = post(gw, body, h)
    assert (status, error_code(out)) == (403, "SignatureDoesNotMatch")
    assert left_out.lower() in out["message"]
    assert post(gw, body, sign(gw, "ListQueues", body))[0] == 200


def presigned_url(gw, action, expires=300, when=None):
    req = AWSRequest(method="POST", url=gw.url + "/", data=b"",
                     headers={"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": JSON})
    auth = botocore.auth.SigV4QueryAuth(Credentials("AKIDGOOD", "s3cretGOOD"), "sqs", "us-east-1", expires=expires)
    if when is not None:
        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            auth.add_auth(req)
    else:
        auth.add_auth(req)
    p = req.prepare()
    return p.url, dict(p.headers.items())


def post_url(gw, url, headers, body=b""):
    parts = urllib.parse.urlsplit(url)
    headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
    return post(gw, body, headers, path=f"{parts.path}?{parts.query}")


def test_presigned_expiry(gw):
    url, h = presigned_url(gw, "ListQueues")
    assert post_url(gw, url, h)[0] == 200
    # Its body is part of what it signs (the presigner signed an empty one).
    status, out = post_url(gw, url, h, body=b'{"QueueNamePrefix": "x"}')
    assert (status, error_code(out)) == (403, "SignatureDoesNotMatch")
    # X-Amz-Expires outside 1..604800 is refused.
    for bad in (0, 604801, -5):
        url, h = presigned_url(gw, "ListQueues", expires=bad)
        status, out = post_url(gw, url, h)
        assert status == 403, (bad, out)
    assert post_url(gw, *presigned_url(gw, "ListQueues", expires=604800))[0] == 200
    # Made 10 minutes ago, valid for 5: expired, though within the 15-minute window.
    ago = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(minutes=10)
    status, out = post_url(gw, *presigned_url(gw, "ListQueues", expires=300, when=ago))
    assert (status, error_code(out)) == (403, "RequestExpired")
    # Valid for a day but made 20 minutes ago: outside the 15-minute window.
    ago = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(minutes=20)
    status, out = post_url(gw, *presigned_url(gw, "ListQueues", expires=86400, when=ago))
    assert (status, error_code(out)) == (403, "RequestExpired")
    assert post_url(gw, *presigned_url(gw, "ListQueues", expires=900, when=ago + datetime.timedelta(minutes=12)))[0] == 200


def test_presigned_unicode_date_answers(gw):
    """A date with U+2000 (a space chrono skips before a number) across its 8th byte: its
    day was once sliced inside that character, and the handler panicked unanswered."""
    url, h = presigned_url(gw, "ListQueues")
    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    odd = url.replace(f"X-Amz-Date={day}", f"X-Amz-Date={day[:6]}%E2%80%80{day[6:]}")
    assert odd != url
    status, out = post_url(gw, odd, h)
    assert status == 403 and error_code(out) in ("SignatureDoesNotMatch", "MissingAuthenticationToken")
    assert post_url(gw, *presigned_url(gw, "ListQueues"))[0] == 200
