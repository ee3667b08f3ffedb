"""rmq-gateway's cache of queue attributes (gateway/src/queue.rs): a send to a queue another
gateway deleted meanwhile leaves no keys, DeleteQueue's tombstone (QueueDeletedRecently),
attribute changes reaching another gateway within --queue-cache-ms, and 0 reading them for
every request."""

import time

import pytest
from botocore.exceptions import ClientError

from gateway_support import Gateway, error_code

# The longest freshness the gateway takes: the stale-entry tests use it so that the
# deletion and the stale send fall inside it even on a stalled machine.
LONGEST_MS = 2000


def lease_left_ms(r, queue):
    """The in-flight delivery's lease deadline minus the server's time (TIME in the same
    MULTI as the read)."""
    p = r.pipeline(transaction=True)
    p.zrange(f"prepare{{{queue}}}", 0, -1, withscores=True)
    p.time()
    (entries, (s, us)) = p.execute()
    assert len(entries) == 1, entries
    return entries[0][1] - (s * 1000 + us // 1000)


def pushes(r):
    return r.info("commandstats").get("cmdstat_rmq.push", {}).get("calls", 0)


def test_a_send_after_another_gateway_deleted_the_queue_leaves_nothing(r, start_gateway):
    a = start_gateway().sqs()
    b = start_gateway(extra=["--queue-cache-ms", LONGEST_MS]).sqs()
    url = a.create_queue(QueueName="q")["QueueUrl"]
    fifo = a.create_queue(QueueName="f.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    # b reads (and keeps) both queues.
    cached = time.monotonic()
    b.send_message(QueueUrl=url, MessageBody="first")
    b.send_message(QueueUrl=fifo, MessageBody="first", MessageGroupId="g", MessageDeduplicationId="d0")
    a.delete_queue(QueueUrl=url)
    a.delete_queue(QueueUrl=fifo)
    before = pushes(r)
    # While b still holds them (or, on a machine stalled past the freshness, once it has
    # read them again) a receive finds nothing, and the sends fail; b's pushes are made,
    # found by the check that follows them to be of a deleted queue, and taken back with
    # the keys they made (sequence, deduplication records).
    try:
        assert "Messages" not in b.receive_message(QueueUrl=url)
    except b.exceptions.QueueDoesNotExist:
        pass
    with pytest.raises(b.exceptions.QueueDoesNotExist):
        b.send_message(QueueUrl=url, MessageBody="late")
    with pytest.raises(b.exceptions.QueueDoesNotExist):
        b.send_message_batch(QueueUrl=fifo, Entries=[
            {"Id": "1", "MessageBody": "late", "MessageGroupId": "g", "MessageDeduplicationId": "d1"}])
    if time.monotonic() - cached < LONGEST_MS / 1000:
        assert pushes(r) - before == 2, "the sends went through b's cached queues"
    assert sorted(r.keys("*{q}*")) == [b"rmqgw:gone{q}"]
    assert sorted(r.keys("*{f.fifo}*")) == [b"rmqgw:gone{f.fifo}"]
    # Having found them gone, b reads them again: gone.
    with pytest.raises(b.exceptions.QueueDoesNotExist):
        b.receive_message(QueueUrl=fifo)
    with pytest.raises(b.exceptions.QueueDoesNotExist):
        b.send_message(QueueUrl=url, MessageBody="later")


def test_a_deleted_queue_cannot_be_created_again_for_a_while(r, start_gateway):
    sqs = start_gateway().sqs()
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    sqs.delete_queue(QueueUrl=url)
    assert r.keys("*{q}*") == [b"rmqgw:gone{q}"]
    assert 0 < r.pttl("rmqgw:gone{q}") <= 5000
    with pytest.raises(sqs.exceptions.QueueDeletedRecently) as e:
        sqs.create_queue(QueueName="q")
    assert "5 seconds" in e.value.response["Error"]["Message"]
    assert r.keys("*{q}*") == [b"rmqgw:gone{q}"], "the refusal made nothing"
    deadline = time.monotonic() + 30
    while r.exists("rmqgw:gone{q}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sqs.create_queue(QueueName="q")["QueueUrl"] == url
    assert "Messages" not in sqs.receive_message(QueueUrl=url), "nothing of the old queue"
    # Other names were never held back.
    sqs.create_queue(QueueName="other")
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName="other")["QueueUrl"])
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName="other")
    assert error_code(e) == "AWS.SimpleQueueService.QueueDeletedRecently"


def test_attribute_changes_reach_another_gateway_within_its_freshness(r, start_gateway):
    a = start_gateway().sqs()
    b = start_gateway().sqs()  # the default: 1 s
    url = a.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "600"})["QueueUrl"]
    a.send_message(QueueUrl=url, MessageBody="m1")
    m = b.receive_message(QueueUrl=url)["Messages"][0]
    assert 590_000 < lease_left_ms(r, "q") <= 600_000
    b.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    a.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "120"})
    # The gateway that made the change acts on it at once.
    a.send_message(QueueUrl=url, MessageBody="m2")
    m = a.receive_message(QueueUrl=url)["Messages"][0]
    assert 110_000 < lease_left_ms(r, "q") <= 120_000
    a.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    # The other once its entry, read before the change, is older than a second.
    time.sleep(1.1)
    a.send_message(QueueUrl=url, MessageBody="m3")
    m = b.receive_message(QueueUrl=url)["Messages"][0]
    assert m["Body"] == "m3"
    assert 110_000 < lease_left_ms(r, "q") <= 120_000


def test_queue_cache_ms_0_reads_the_attributes_every_time(r, start_gateway):
    a = start_gateway().sqs()
    b = start_gateway(extra=["--queue-cache-ms", 0]).sqs()
    url = a.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "600"})["QueueUrl"]
    a.send_message(QueueUrl=url, MessageBody="m1")
    m = b.receive_message(QueueUrl=url)["Messages"][0]
    b.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    a.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "120"})
    a.send_message(QueueUrl=url, MessageBody="m2")
    b.receive_message(QueueUrl=url)["Messages"]
    assert 110_000 < lease_left_ms(r, "q") <= 120_000
    a.delete_queue(QueueUrl=url)
    with pytest.raises(b.exceptions.QueueDoesNotExist):
        b.send_message(QueueUrl=url, MessageBody="x")


def test_queue_cache_ms_is_bounded(server):
    for bad in ("2001", "x"):
        g = Gateway(server, extra=["--queue-cache-ms", bad]).launch()
        assert g.wait_exit() not in (None, 0)
        assert "--queue-cache-ms" in g.output()
