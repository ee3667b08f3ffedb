"""TLS end to end, against one redis-server serving TLS only and requiring a client
certificate (tls_support.TlsServer, certificates made by the test): rmq-gateway to Redis
over rediss:// with --redis-ca/--redis-cert/--redis-key, its own listener over HTTPS
(--tls-cert/--tls-key: boto3 verifying against the test CA; silent and stalled connections
still closed), its refusals for a wrong CA, a missing client certificate, files that are
missing or of the wrong kind; --cluster rediss://; and the dashboard and the exporter over rediss:// (--redis
URL and the TLS files), with their refusals of options that do not go together."""

import json
import os
import selectors
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import SSLError

from gateway_support import Gateway
from helpers import rmq_info
from server_support import REPO, free_port
from tls_support import Certs, TlsServer


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_server(certs):
    s = TlsServer(certs, auth_clients="yes").start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tls_gw(certs, tls_server):
    """A gateway reaching Redis over TLS with the client certificate, serving HTTPS."""
    g = Gateway(tls_server, redis_url=tls_server.url,
                extra=[*certs.redis_tls_args(), "--tls-cert", certs.server_cert,
                       "--tls-key", certs.server_key]).start()
    yield g
    g.stop()


def https_sqs(gw, verify):
    cfg = Config(retries={"total_max_attempts": 1}, read_timeout=60, connect_timeout=10)
    return boto3.client("sqs", endpoint_url=f"https://127.0.0.1:{gw.port}", region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test", config=cfg,
                        verify=verify)


def test_gateway_reaches_redis_over_tls_with_a_client_certificate(tls_gw, tls_server, certs):
    out = tls_gw.output()
    assert (f"waiting for Redis at 127.0.0.1:{tls_server.port} over TLS with a client "
            f"certificate") in out, out
    sqs = https_sqs(tls_gw, certs.ca)
    url = sqs.create_queue(QueueName="tls-orders")["QueueUrl"]
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"order {i}")
    # The messages are in the TLS server's queue (read over TLS too).
    assert rmq_info(tls_server.client(), "tls-orders")["waiting"] == 3
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)["Messages"]
    assert sorted(m["Body"] for m in got) == ["order 0", "order 1", "order 2"]
    for m in got:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert rmq_info(tls_server.client(), "tls-orders")["inflight"] == 0


def test_https_listener_is_verified_against_the_test_ca(tls_gw, certs):
    assert "listening on https://127.0.0.1:" in tls_gw.output()
    sqs = https_sqs(tls_gw, certs.ca)
    url = sqs.create_queue(QueueName="tls-https")["QueueUrl"]
    assert url == f"https://127.0.0.1:{tls_gw.port}/000000000000/tls-https"
    sqs.send_message(QueueUrl=url, MessageBody="over https")
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in got] == ["over https"]
    ctx = ssl.create_default_context(cafile=certs.ca)
    with urllib.request.urlopen(f"https://127.0.0.1:{tls_gw.port}/health", context=ctx,
                                timeout=30) as resp:
        assert resp.status == 200 and resp.read() == b"ok\n"
    # Checked against a CA that did not sign it: refused by the client.
    with pytest.raises(SSLError):
        https_sqs(tls_gw, certs.other_ca).list_queues()
    # Plain HTTP to the HTTPS port gets no HTTP answer.
    s = socket.create_connection(("127.0.0.1", tls_gw.port), timeout=30)
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert not s.recv(100).startswith(b"HTTP/")
    except OSError:
        pass
    finally:
        s.close()


def test_silent_and_stalled_tls_connections_are_closed(tls_gw, certs):
    """One connection sending nothing, one stopping in the middle of its TLS handshake:
    both closed after about 10 s (not before 8 s, by 40 s) while requests are served."""
    silent = socket.create_connection(("127.0.0.1", tls_gw.port), timeout=30)
    stalled = socket.create_connection(("127.0.0.1", tls_gw.port), timeout=30)
    stalled.sendall(b"\x16\x03\x01\x02\x00")   # a ClientHello's record header, nothing more
    opened = time.monotonic()
    sel = selectors.DefaultSelector()
    for s in (silent, stalled):
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    sqs = https_sqs(tls_gw, certs.ca)
    assert sqs.create_queue(QueueName="tls-served")["QueueUrl"].endswith("/tls-served")
    closed = {}
    try:
        while len(closed) < 2 and time.monotonic() - opened < 40:
            for key, _ in sel.select(timeout=1):
                try:
                    data = key.fileobj.recv(16)
                except (ConnectionResetError, BlockingIOError):
                    data = b""
                if data == b"":
                    closed[key.fileobj] = time.monotonic() - opened
                    sel.unregister(key.fileobj)
    finally:
        sel.close()
        silent.close()
        stalled.close()
    assert len(closed) == 2, f"still open after 40 s: {2 - len(closed)}"
    assert min(closed.values()) >= 8, closed


def refusal(tls_server, *extra, url=None):
    """A gateway started with these flags: its exit code and output."""
    g = Gateway(tls_server, redis_url=url or tls_server.url, extra=extra).launch()
    code = g.wait_exit(timeout=40)
    if code is None:
        g.stop()
    return code, g.output()


def test_gateway_refuses_a_redis_certificate_from_another_ca(tls_server, certs):
    code, out = refusal(tls_server, "--redis-ca", certs.other_ca, "--redis-cert", certs.client_cert,
                        "--redis-key", certs.client_key)
    assert code not in (None, 0), out
    assert f"cannot reach Redis at 127.0.0.1:{tls_server.port}: TLS refused" in out, out
    assert "check --redis-ca" in out and "listening on" not in out


def test_gateway_without_the_client_certificate_redis_requires(tls_server, certs):
    code, out = refusal(tls_server, "--redis-ca", certs.ca)
    assert code not in (None, 0), out
    assert f"cannot reach Redis at 127.0.0.1:{tls_server.port}" in out, out
    assert "--redis-cert" in out and "listening on" not in out


@pytest.mark.parametrize("flags, says", [
    (["--redis-ca", "/nonexistent/ca.pem"], "cannot read --redis-ca /nonexistent/ca.pem: "),
    (["--redis-ca", "{client_key}"], "--redis-ca {client_key}: no certificate in it"),
    (["--redis-ca", "{ca}", "--redis-cert", "{client_cert}", "--redis-key", "{ca}"],
     "--redis-key {ca}: no PEM private key in it"),
    (["--redis-cert", "{client_cert}"], "--redis-key <REDIS_KEY>"),
    (["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "{server_key}"],
     "cannot read --tls-cert /nonexistent/cert.pem: "),
    (["--tls-cert", "{server_cert}", "--tls-key", "{client_key}"],
     "--tls-cert {server_cert} with --tls-key {client_key}: "),
    (["--tls-cert", "{server_cert}"], "--tls-key <TLS_KEY>"),
])
def test_gateway_names_the_tls_file_it_refuses(tls_server, certs, flags, says):
    paths = {k: getattr(certs, k) for k in ("ca", "client_cert", "client_key", "server_cert",
                                            "server_key")}
    code, out = refusal(tls_server, *(f.format(**paths) for f in flags))
    assert code not in (None, 0), out
    assert says.format(**paths) in out, out


def test_gateway_tls_files_need_a_rediss_url(tls_server, certs):
    code, out = refusal(tls_server, "--redis-ca", certs.ca, url=f"redis://127.0.0.1:{tls_server.port}")
    assert code not in (None, 0), out
    assert "give a rediss:// URL" in out, out


# -- the dashboard and the exporter ------------------------------------------------------

def tool_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RMQ_DASHBOARD_", "RMQ_REDIS_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO / "clients" / "python"),
                                                     env.get("PYTHONPATH", "")] if p)
    return env


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


@pytest.mark.parametrize("command", ["exporter", "dashboard"])
def test_dashboard_and_exporter_over_rediss(tls_server, certs, command, tmp_path):
    queue = f"tls-{command}"
    c = tls_server.client()
    c.delete(queue)
    c.execute_command("RMQ.PUSH", queue, "PRIORITY", 1, "a", "b")
    port = free_port()
    log = open(tmp_path / "out.log", "wb")
    p = subprocess.Popen([sys.executable, "-m", "rmq", command, "--redis", tls_server.url,
                          *certs.redis_tls_args(), "--listen", f"127.0.0.1:{port}",
                          "--interval", "0.5"], stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, env=tool_env())
    try:
        line = f'rmq_queue_waiting{{queue="{queue}"}} 2.0'
        deadline = time.monotonic() + 30
        metrics = ""
        while line not in metrics and time.monotonic() < deadline:
            assert p.poll() is None, (tmp_path / "out.log").read_text()
            try:
                metrics = get(f"http://127.0.0.1:{port}/metrics")
            except OSError:
                pass
            time.sleep(0.2)
        assert line in metrics, (tmp_path / "out.log").read_text() + metrics
        if command == "dashboard":
            q = json.loads(get(f"http://127.0.0.1:{port}/api/queues/{queue}"))
            assert q["info"]["waiting"] == 2, q
            assert sorted(m["message"]["text"] for m in q["waiting"]) == ["a", "b"], q
        assert f"Redis {tls_server.url}" in (tmp_path / "out.log").read_text()
    finally:
        p.terminate()
        p.wait(timeout=15)
        log.close()


@pytest.mark.parametrize("flags, says", [
    (["--redis", "redis://127.0.0.1:1", "--redis-ca", "{ca}"], "give a rediss:// URL"),
    (["--redis", "rediss://127.0.0.1:1", "--redis-ca", "/nonexistent/ca.pem"],
     "cannot read --redis-ca /nonexistent/ca.pem"),
    (["--redis", "rediss://127.0.0.1:1", "--redis-cert", "{client_cert}"],
     "--redis-cert and --redis-key go together"),
    (["--redis", "redis://127.0.0.1:1", "--port", "1"], "not both"),
    (["--redis", "http://127.0.0.1:1"], "expected a redis://, rediss:// or unix:// URL"),
])
def test_tools_refuse_connection_options_that_do_not_go_together(certs, flags, says):
    paths = {"ca": certs.ca, "client_cert": certs.client_cert}
    p = subprocess.run([sys.executable, "-m", "rmq", "exporter", *(f.format(**paths) for f in flags),
                        "--listen", "127.0.0.1:1"], capture_output=True, text=True, timeout=60,
                       env=tool_env())
    assert p.returncode == 2 and says in p.stderr, p.stderr


def test_gateway_reaches_a_redis_cluster_over_tls(certs):
    """--cluster rediss://… with the TLS files: a one-node cluster serving TLS only (its
    bus too), whose slots map names its TLS port."""
    node = TlsServer(certs, cluster_bus=True,
                     conf=["--cluster-enabled", "yes", "--tls-cluster", "yes",
                           "--cluster-config-file", "nodes.conf"]).start()
    g = None
    try:
        c = node.client()
        c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        deadline = time.monotonic() + 30
        while c.cluster("info")["cluster_state"] != "ok" and time.monotonic() < deadline:
            time.sleep(0.1)
        g = Gateway(None, cluster_seeds=[node.url], extra=certs.redis_tls_args()).start()
        assert f"the Redis Cluster at rediss://127.0.0.1:{node.port} over TLS" in g.output()
        sqs = g.sqs()
        url = sqs.create_queue(QueueName="tls-cluster")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="clustered")
        assert rmq_info(c, "tls-cluster")["waiting"] == 1
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
        assert [m["Body"] for m in got] == ["clustered"]
    finally:
        if g is not None:
            g.stop()
        node.stop()

