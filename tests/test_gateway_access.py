"""rmq-gateway's access rules: SigV4 with a credentials file (every refusal docs/gateway.md lists),
Redis users behind access keys, presigned URLs, the start refusal rules and the AWS CLI."""

import datetime
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from unittest import mock

import botocore.auth
import pytest
import redis
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from gateway_support import Gateway, error_code
from server_support import wait_for

CREDS = "# test keys\n\nAKIDGOOD s3cretGOOD\nAKIDLIMITED s3cretLIMITED limited limitedpw\n"


@pytest.fixture
def signed(r, start_gateway):
    # The limited key acts as a Redis user that may only use queues named pub* (the user
    # must exist when the gateway starts: it connects as each key's user).
    r.execute_command("ACL", "SETUSER", "limited", "reset", "on", ">limitedpw", "~pub*", "~*{pub*}*", "+@all")
    yield start_gateway(credentials=CREDS)
    r.execute_command("ACL", "DELUSER", "limited")


def raw_post(gw, action, body, headers):
    h = {"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0"}
    h.update(headers)
    req = urllib.request.Request(gw.url + "/", data=body, method="POST", headers=h)
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, resp.headers, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, e.headers, json.loads(e.read() or b"{}")


def signed_headers(gw, action, body, key="AKIDGOOD", secret="s3cretGOOD", region="us-east-1", when=None):
    req = AWSRequest(method="POST", url=gw.url + "/", data=body,
                     headers={"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0"})
    auth = botocore.auth.SigV4Auth(Credentials(key, secret), "sqs", region)
    if when is None:
        auth.add_auth(req)
    else:
        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            auth.add_auth(req)
    return dict(req.headers.items())


def test_valid_signatures_are_served(signed):
    sqs = signed.sqs(key="AKIDGOOD", secret="s3cretGOOD")
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hi")
    m = sqs.receive_message(QueueUrl=url, AttributeNames=["SenderId"])["Messages"][0]
    assert m["Attributes"]["SenderId"] == "AKIDGOOD"


@pytest.mark.parametrize("key,secret,region,expected", [
    ("AKIDGOOD", "wrong", "us-east-1", "SignatureDoesNotMatch"),
    ("AKIDNOBODY", "s3cretGOOD", "us-east-1", "InvalidClientTokenId"),
    ("AKIDGOOD", "s3cretGOOD", "eu-west-1", "SignatureDoesNotMatch"),
])
def test_refused_signatures(signed, key, secret, region, expected):
    sqs = signed.sqs(key=key, secret=secret, region=region)
    with pytest.raises(ClientError) as e:
        sqs.list_queues()
    assert error_code(e) == expected
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_unsigned_old_and_changed_requests(signed):
    body = b"{}"
    status, headers, out = raw_post(signed, "ListQueues", body, {})
    assert (status, out["__type"]) == (403, "com.amazonaws.sqs#MissingAuthenticationToken")
    assert headers["x-amzn-query-error"] == "MissingAuthenticationToken;Sender"
    old = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(minutes=20)
    status, _, out = raw_post(signed, "ListQueues", body, signed_headers(signed, "ListQueues", body, when=old))
    assert (status, out["__type"]) == (403, "com.amazonaws.sqs#RequestExpired")
    ahead = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) + datetime.timedelta(minutes=20)
    status, _, out = raw_post(signed, "ListQueues", body, signed_headers(signed, "ListQueues", body, when=ahead))
    assert (status, out["__type"]) == (403, "com.amazonaws.sqs#RequestExpired")
    # A request changed after signing (its body) no longer matches its signature.
    h = signed_headers(signed, "ListQueues", body)
    status, _, out = raw_post(signed, "ListQueues", b'{"QueueNamePrefix": "x"}', h)
    assert (status, out["__type"]) == (403, "com.amazonaws.sqs#SignatureDoesNotMatch")
    # Within 15 minutes is accepted.
    recent = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(minutes=10)
    status, _, out = raw_post(signed, "ListQueues", body, signed_headers(signed, "ListQueues", body, when=recent))
    assert status == 200


def test_secrets_never_logged(signed):
    sqs = signed.sqs(key="AKIDGOOD", secret="wrong")
    with pytest.raises(ClientError) as e:
        sqs.list_queues()
    assert "s3cretGOOD" not in json.dumps(e.value.response, default=str)
    signed.stop()
    assert "s3cret" not in signed.output()


def test_redis_user_acls(r, signed):
    good = signed.sqs(key="AKIDGOOD", secret="s3cretGOOD")
    good.create_queue(QueueName="private")
    limited = signed.sqs(key="AKIDLIMITED", secret="s3cretLIMITED")
    created = limited.create_queue(QueueName="pub1")
    assert created["ResponseMetadata"]["RetryAttempts"] == 0
    url = created["QueueUrl"]
    policy = dict(zip(*[iter(r.execute_command("RMQ.POLICY", "pub1", "GET"))] * 2))
    assert policy[b"retries"] == 1000
    limited.send_message(QueueUrl=url, MessageBody="ok")
    # A queue it may not use: refused, and nothing of it is made.
    with pytest.raises(ClientError) as e:
        limited.create_queue(QueueName="secret")
    assert error_code(e) == "AccessDenied"
    assert r.keys("*secret*") == []
    purl = url.replace("pub1", "private")
    with pytest.raises(ClientError) as e:
        limited.send_message(QueueUrl=purl, MessageBody="no")
    assert error_code(e) == "AccessDenied"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert r.zcard("private") == 0


def test_noperm_is_access_denied_for_every_action(r, signed):
    """A NOPERM from Redis, on a plain command, a pipeline or inside MULTI, is
    AccessDenied (403, which SDKs do not retry) whatever the action."""
    good = signed.sqs(key="AKIDGOOD", secret="s3cretGOOD")
    url = good.create_queue(QueueName="private")["QueueUrl"]
    dlq = good.create_queue(QueueName="private-dlq")["QueueUrl"]
    good.send_message(QueueUrl=url, MessageBody="m")
    handle = good.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"][0]["ReceiptHandle"]
    arn = good.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    limited = signed.sqs(key="AKIDLIMITED", secret="s3cretLIMITED")
    entry = {"Id": "a", "MessageBody": "x"}
    calls = {
        "CreateQueue": lambda: limited.create_queue(QueueName="private", Attributes={"DelaySeconds": "1"}),
        "GetQueueUrl": lambda: limited.get_queue_url(QueueName="private"),
        "DeleteQueue": lambda: limited.delete_queue(QueueUrl=url),
        "PurgeQueue": lambda: limited.purge_queue(QueueUrl=url),
        "GetQueueAttributes": lambda: limited.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]),
        "SetQueueAttributes": lambda: limited.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "2"}),
        "SendMessage": lambda: limited.send_message(QueueUrl=url, MessageBody="x"),
        "SendMessageBatch": lambda: limited.send_message_batch(QueueUrl=url, Entries=[entry]),
        "ReceiveMessage": lambda: limited.receive_message(QueueUrl=url),
        "DeleteMessage": lambda: limited.delete_message(QueueUrl=url, ReceiptHandle=handle),
        "DeleteMessageBatch": lambda: limited.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": handle}]),
        "ChangeMessageVisibility": lambda: limited.change_message_visibility(
            QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=5),
        "ChangeMessageVisibilityBatch": lambda: limited.change_message_visibility_batch(
            QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": handle, "VisibilityTimeout": 5}]),
        "ListDeadLetterSourceQueues": lambda: limited.list_dead_letter_source_queues(QueueUrl=dlq),
        "StartMessageMoveTask": lambda: limited.start_message_move_task(SourceArn=arn),
        "ListMessageMoveTasks": lambda: limited.list_message_move_tasks(SourceArn=arn),
        "TagQueue": lambda: limited.tag_queue(QueueUrl=url, Tags={"k": "v"}),
        "UntagQueue": lambda: limited.untag_queue(QueueUrl=url, TagKeys=["k"]),
        "ListQueueTags": lambda: limited.list_queue_tags(QueueUrl=url),
    }
    answers = {}
    for action, call in calls.items():
        try:
            call()
            answers[action] = "served"
        except ClientError as e:
            answers[action] = (e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"])
    assert answers == {a: ("AccessDenied", 403) for a in calls}
    assert good.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])["Attributes"] == {"DelaySeconds": "0"}
    assert r.zcard("private") + r.zcard("prepare{private}") == 1


def test_noperm_inside_multi_is_access_denied(r, start_gateway):
    """A user that may write a queue's keys but only read its tags: CreateQueue with tags
    writes both in one MULTI, which Redis aborts (EXECABORT naming the NOPERM): 403
    AccessDenied, not a 500 the SDKs retry; nothing of the queue is made."""
    r.execute_command("ACL", "SETUSER", "partial", "reset", "on", ">partialpw", "+@all", "~pub*",
                      "~[^r]*{pub*}*", "~rmqgw:q{pub*}", "~rmqgw:gone{pub*}", "%R~rmqgw:t{pub*}")
    try:
        gw = start_gateway(credentials="AKIDPART s3cretPART partial partialpw\n")
        sqs = gw.sqs(key="AKIDPART", secret="s3cretPART")
        assert sqs.create_queue(QueueName="pub-plain")["ResponseMetadata"]["HTTPStatusCode"] == 200
        with pytest.raises(ClientError) as e:
            sqs.create_queue(QueueName="pub-tagged", tags={"team": "a"})
        assert error_code(e) == "AccessDenied"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert e.value.response["ResponseMetadata"]["RetryAttempts"] == 0
        assert r.exists("rmqgw:q{pub-tagged}", "rmqgw:t{pub-tagged}") == 0
    finally:
        r.execute_command("ACL", "DELUSER", "partial")


def test_start_refusals(server, tmp_path):
    # Without credentials, only a loopback address.
    g = Gateway(server, listen="0.0.0.0:0").launch()
    assert g.wait_exit() not in (None, 0)
    assert "refusing to listen on 0.0.0.0:0 without --credentials" in g.output()
    # An unreadable credentials file, an unreachable Redis, bad arguments.
    g = Gateway(server, extra=["--credentials", str(tmp_path / "missing")]).launch()
    assert g.wait_exit() not in (None, 0)
    assert "cannot read the credentials file" in g.output()
    g = Gateway(server, credentials="only-one-field\n").launch()
    assert g.wait_exit() not in (None, 0)
    assert "line 1" in g.output()
    from server_support import free_port
    g = Gateway(server, redis_url=f"redis://127.0.0.1:{free_port()}").launch()
    assert g.wait_exit() not in (None, 0)
    assert "cannot reach Redis" in g.output()
    g = Gateway(server, cluster_seeds=[f"redis://127.0.0.1:{free_port()}"]).launch()
    assert g.wait_exit() not in (None, 0)
    assert "cannot reach the Redis Cluster at redis://127.0.0.1:" in g.output()
    g = Gateway(server, extra=["--cluster", f"redis://{server.addr}"]).launch()
    assert g.wait_exit() not in (None, 0)
    assert "'--redis <REDIS>' cannot be used with '--cluster <CLUSTER>'" in g.output()
    g = Gateway(server, extra=["--account", "12"]).launch()
    assert g.wait_exit() not in (None, 0)
    g = Gateway(server, extra=["--threads", "0"]).launch()
    assert g.wait_exit() not in (None, 0)
    g = Gateway(server, extra=["--threads", "1"]).start()
    try:
        url = g.sqs().create_queue(QueueName="one-thread")["QueueUrl"]
        g.sqs().send_message(QueueUrl=url, MessageBody="x")
        assert g.sqs().receive_message(QueueUrl=url)["Messages"][0]["Body"] == "x"
        # One thread serves a send while a long poll waits, and the send wakes the poll.
        polled = {}
        poll = threading.Thread(target=lambda: polled.update(g.sqs().receive_message(QueueUrl=url, WaitTimeSeconds=20)))
        poll.start()
        wait_for(lambda: redis.Redis(port=server.port).info("clients")["blocked_clients"] == 1,
                 20, what="the long poll blocked")
        g.sqs().send_message(QueueUrl=url, MessageBody="woken")
        poll.join(timeout=30)
        assert [m["Body"] for m in polled["Messages"]] == ["woken"]
    finally:
        assert g.stop() == 0
    # With credentials, any address.
    g = Gateway(server, credentials="AKIDGOOD s3cretGOOD\n", listen=f"0.0.0.0:{free_port()}").launch()
    try:
        import time
        deadline = time.monotonic() + 30
        while "listening on" not in g.output() and time.monotonic() < deadline:
            assert g.proc.poll() is None, g.output()
            time.sleep(0.05)
        assert "listening on" in g.output()
    finally:
        assert g.stop() == 0


def test_aws_cli(r, start_gateway):
    gw = start_gateway()
    env = dict(os.environ, AWS_ACCESS_KEY_ID="cli", AWS_SECRET_ACCESS_KEY="cli", AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")

    def aws(*args):
        out = subprocess.run(["aws", "--endpoint-url", gw.url, "--output", "json", "sqs", *args],
                             env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout) if out.stdout.strip() else {}

    url = aws("create-queue", "--queue-name", "cli")["QueueUrl"]
    sent = aws("send-message", "--queue-url", url, "--message-body", "from the cli",
               "--message-attributes", '{"k": {"DataType": "String", "StringValue": "v"}}')
    got = aws("receive-message", "--queue-url", url, "--message-attribute-names", "All")["Messages"][0]
    assert got["Body"] == "from the cli" and got["MessageId"] == sent["MessageId"]
    aws("delete-message", "--queue-url", url, "--receipt-handle", got["ReceiptHandle"])
    assert r.zcard("prepare{cli}") == 0
    assert aws("list-queues")["QueueUrls"] == [url]


def test_presigned_query_string(signed):
    body = b"{}"
    req = AWSRequest(method="POST", url=signed.url + "/", data=body,
                     headers={"X-Amz-Target": "AmazonSQS.ListQueues", "Content-Type": "application/x-amz-json-1.0"})
    botocore.auth.SigV4QueryAuth(Credentials("AKIDGOOD", "s3cretGOOD"), "sqs", "us-east-1", expires=300).add_auth(req)
    prepared = req.prepare()
    r = urllib.request.Request(prepared.url, data=body, method="POST", headers=dict(prepared.headers.items()))
    with urllib.request.urlopen(r) as resp:
        assert resp.status == 200
    bad = prepared.url.replace("X-Amz-Signature=", "X-Amz-Signature=0")
    r = urllib.request.Request(bad, data=body, method="POST", headers=dict(prepared.headers.items()))
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(r)
    assert e.value.code == 403


def raw_exchange(gw, head, chunks=(), pause=0.0):
    """Sends `head` and `chunks` on a socket of its own (a send the gateway cuts short is
    fine) and returns (the answer's first bytes, the socket) for the caller to close."""
    s = socket.create_connection(("127.0.0.1", gw.port))
    s.settimeout(60)
    try:
        s.sendall(head)
        for c in chunks:
            s.sendall(c)
            time.sleep(pause)
    except OSError:
        pass
    try:
        return s.recv(4096), s
    except OSError:
        return b"", s


def test_oversized_requests_refused_without_harm_to_others(start_gateway):
    gw = start_gateway()
    sqs = gw.sqs()
    # A chunked body (no Content-Length to refuse it by) is cut off past 2 MiB.
    head = (b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AmazonSQS.ListQueues\r\n"
            b"Content-Type: application/x-amz-json-1.0\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b"x" * 64 * 1024)
    answer, s = raw_exchange(gw, head, [chunk] * 48 + [b"0\r\n\r\n"])
    s.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    # Headers of 1 MiB: refused too (hyper's header limit), not buffered.
    answer, s = raw_exchange(gw, b"POST / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
    s.close()
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:200]
    sqs.create_queue(QueueName="still-served")
    assert sqs.list_queues(QueueNamePrefix="still-served")["QueueUrls"] == [f"{gw.url}/000000000000/still-served"]


def test_slow_body_is_cut_off_without_harm_to_others(start_gateway):
    """A client that sends its headers, then its body a byte at a time, is answered 408
    after 10 s; meanwhile others are served at once."""
    gw = start_gateway()
    body = b'{"QueueNamePrefix": "x"}'
    head = (b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AmazonSQS.ListQueues\r\n"
            b"Content-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n\r\n" % len(body))
    result = {}
    t0 = time.monotonic()
    slow = threading.Thread(target=lambda: result.update(
        answer=raw_exchange(gw, head, [bytes([b]) for b in body], pause=1.0)))
    slow.start()
    sqs = gw.sqs()
    for i in range(3):
        t = time.monotonic()
        sqs.create_queue(QueueName=f"meanwhile{i}")
        assert time.monotonic() - t < 5
    slow.join(timeout=60)
    answer, s = result["answer"]
    s.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    # Cut off around the 10 s body timeout, well before it could have finished (24 s).
    assert 9 <= time.monotonic() - t0 < 24
    assert len(gw.sqs().list_queues(QueueNamePrefix="meanwhile")["QueueUrls"]) == 3
