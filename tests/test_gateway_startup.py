"""rmq-gateway at start and when its Redis goes away: it says which Redis it waits for,
refuses to start (non-zero exit, a message saying how to load the module) on a Redis
without the RMQ module, writes plain logs (no ANSI colour codes) when stderr is not a
terminal, names the Redis address in its warnings, and fails a request soon after Redis
goes away instead of waiting on a dead connection."""

import socket
import time

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from gateway_support import Gateway
from server_support import Server, free_port, wait_for


def test_says_which_redis_it_waits_for_then_listens(server, start_gateway):
    g = start_gateway()
    out = g.output()
    waiting = out.index(f"rmq-gateway: waiting for Redis at {server.addr}")
    assert waiting < out.index("listening on"), out


def test_refuses_a_redis_without_the_module():
    plain = Server(module=None, tag="rmq-gw-plain").start()
    try:
        g = Gateway(plain).launch()
        code = g.wait_exit()
        out = g.output()
    finally:
        plain.stop()
    assert code not in (None, 0), out
    assert f"Redis at {plain.addr} has no RMQ module" in out
    assert "--loadmodule /path/to/librmq.so" in out and "loadmodule /path/to/librmq.so` to its redis.conf" in out
    assert "listening on" not in out


def test_a_listen_address_in_use_is_refused_with_its_cause(server):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    addr = "127.0.0.1:%d" % taken.getsockname()[1]
    try:
        g = Gateway(server, listen=addr).launch()
        code = g.wait_exit()
        out = g.output()
    finally:
        taken.close()
    assert code not in (None, 0), out
    assert f"cannot listen on {addr}: " in out and "in use" in out, out
    assert "listening on" not in out


def test_no_redis_names_the_address_it_waited_for():
    port = free_port()
    g = Gateway(None, redis_url=f"redis://user:secret@127.0.0.1:{port}").launch()
    code = g.wait_exit(timeout=40)
    out = g.output()
    assert code not in (None, 0), out
    assert out.startswith(f"rmq-gateway: waiting for Redis at 127.0.0.1:{port}"), out
    assert f"cannot reach Redis at 127.0.0.1:{port}" in out and "--redis URL" in out
    assert "secret" not in out, "the password stays out of the log"


def test_a_request_fails_soon_after_redis_goes_away_with_plain_logs_naming_it(start_server):
    s = start_server()
    g = Gateway(s).start()
    try:
        sqs = g.sqs()
        url = sqs.create_queue(QueueName="gone")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="before")
        s.stop()
        t0 = time.monotonic()
        with pytest.raises((ClientError, EndpointConnectionError)) as got:
            sqs.send_message(QueueUrl=url, MessageBody="after")
        took = time.monotonic() - t0
        if isinstance(got.value, ClientError):
            assert got.value.response["ResponseMetadata"]["HTTPStatusCode"] >= 500
        # The promise is 2 s; the bound leaves room for a stalled 2-core machine.
        assert took < 6, f"the send took {took:.1f} s to fail"
        # The redrive task, which runs every second, warns that it cannot reach Redis.
        def warnings():
            return [ln for ln in g.output().splitlines() if " WARN " in ln or " ERROR " in ln]
        wait_for(warnings, timeout=30, what="a warning")
        out = g.output()
        assert "\x1b[" not in out, "no colour codes in a log that is not a terminal"
        assert all(f"(Redis at {s.addr})" in ln for ln in warnings()), out
    finally:
        g.stop()
