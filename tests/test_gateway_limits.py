"""rmq-gateway under hostile load, bounded: made-up action names grow neither its memory
nor /metrics; idle connections are closed after 10 s and at most 10,000 are open while a
legitimate client keeps being served; a burst of long polls above --max-redis-connections
waits its turn and leaves Redis's client count at its baseline."""

import http.client
import json
import re
import resource
import selectors
import socket
import threading
import time
import urllib.request

import botocore.auth
import pytest
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

CREDS = "AKIDGOOD s3cretGOOD\n"
JSON = "application/x-amz-json-1.0"
MAX_CONNECTIONS = 10_000


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS:")).split()[1])


def metrics_text(gw):
    with urllib.request.urlopen(gw.url + "/metrics", timeout=60) as resp:
        return resp.read().decode()


def post(gw, headers, body=b"{}"):
    c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
    try:
        c.request("POST", "/", body=body, headers=headers)
        resp = c.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        c.close()


def made_up(gw, i, signed):
    """A request for a made-up action of 8 KB, with quotes and backslashes in it."""
    h = {"X-Amz-Target": f'AmazonSQS.Made"Up\\{i}' + "x" * 8000, "Content-Type": JSON}
    if signed:
        req = AWSRequest(method="POST", url=gw.url + "/", data=b"{}", headers=h)
        botocore.auth.SigV4Auth(Credentials("AKIDGOOD", "s3cretGOOD"), "sqs", "us-east-1").add_auth(req)
        h = dict(req.headers.items())
    return post(gw, h)


SERIES = re.compile(r'^[a-z_]+(\{[a-z_]+="([^"\\\n]|\\["\\n])*"(,[a-z_]+="([^"\\\n]|\\["\\n])*")*\})? \S+$')


def series(text):
    """The series of an exposition (each line checked against the text format)."""
    out = set()
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        assert SERIES.match(line), line[:300]
        out.add(line.rsplit(" ", 1)[0])
    return out


def test_made_up_actions_grow_neither_memory_nor_metrics(start_gateway):
    gw = start_gateway(credentials=CREDS)
    for i in range(50):
        assert made_up(gw, i, signed=False)[0] == 403
        assert made_up(gw, i, signed=True)[0] == 400
    before_text = metrics_text(gw)
    before_rss = rss_kb(gw.proc.pid)
    for i in range(50, 450):
        status, out = made_up(gw, i, signed=False)
        assert (status, out["__type"].rsplit("#")[-1]) == (403, "MissingAuthenticationToken")
        status, out = made_up(gw, i, signed=True)
        assert (status, out["__type"].rsplit("#")[-1]) == (400, "UnsupportedOperation")
    after_text = metrics_text(gw)
    after_rss = rss_kb(gw.proc.pid)
    assert series(after_text) == series(before_text)
    assert len(after_text) - len(before_text) < 200, (len(before_text), len(after_text))
    assert 'rmq_gateway_unauthenticated_total{code="MissingAuthenticationToken"} 450' in after_text
    assert 'rmq_gateway_requests_total{action="other",outcome="UnsupportedOperation"} 450' in after_text
    assert "Made" not in after_text
    # 800 requests of 8 KB names: kept, they would be 6 MB and /metrics ~50 MB.
    assert after_rss - before_rss < 4096, (before_rss, after_rss)


def raise_fd_limit(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < min(want, hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def refused(port):
    """Whether a new connection is closed unanswered."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        return s.recv(100) == b""
    except OSError:
        return True
    finally:
        s.close()


class IdleWatch:
    """The idle connections, and when the gateway closed each (read from the sockets)."""

    def __init__(self, socks):
        self.sel = selectors.DefaultSelector()
        for s in socks:
            s.setblocking(False)
            self.sel.register(s, selectors.EVENT_READ)
        self.times = []

    def collect(self, timeout):
        """Records the closes seen within `timeout` s; returns how many."""
        seen = 0
        for key, _ in self.sel.select(timeout=timeout):
            try:
                data = key.fileobj.recv(16)
            except ConnectionResetError:
                data = b""
            assert data == b"", "an idle connection got an answer"
            self.times.append(time.monotonic())
            self.sel.unregister(key.fileobj)
            key.fileobj.close()   # its descriptor is free for a replacement
            seen += 1
        return seen


def refused_at_the_cap(port, watch, extra, limit=60):
    """Whether a new connection is refused while 10,000 are open. On a loaded machine the
    first idle connections may reach their 10 s before the last ones are open, freeing their
    slots: every idle one the gateway has closed (read from the sockets, not guessed from the
    clock) is replaced by a new one in `extra` before the next probe, until one is refused."""
    deadline = time.monotonic() + limit
    closed = watch.collect(0)
    while time.monotonic() < deadline:
        for _ in range(closed):
            extra.append(socket.create_connection(("127.0.0.1", port), timeout=30))
        if refused(port):
            return True
        # Let the replacements past the cap be closed too, then count what closed since.
        time.sleep(0.2)
        closed = watch.collect(0) + sum(1 for s in extra if s.fileno() != -1 and gone(s))
    return False


def gone(s):
    """Whether the gateway closed `s` (a replacement past the cap); closes it here too."""
    s.setblocking(False)
    try:
        closed = s.recv(16) == b""
    except BlockingIOError:
        return False
    except OSError:
        closed = True
    if closed:
        s.close()
    return closed


def open_at_once(port, count, limit=30):
    """`count` connections, their handshakes in flight together: opened one after another, a
    SYN dropped while the gateway is slow to accept (a loaded machine) stalls the loop for its
    1 s retransmit, and 10,000 then take longer than the 10 s an idle one is kept (seen: 21 s),
    so the cap could never be reached."""
    socks = []
    sel = selectors.DefaultSelector()
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks.append(s)
        sel.register(s, selectors.EVENT_WRITE)
    pending = count
    deadline = time.monotonic() + limit
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            assert key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0, "a connection failed"
            sel.unregister(key.fileobj)
            pending -= 1
    sel.close()
    assert pending == 0, f"{pending} of {count} connections not open after {limit} s"
    for s in socks:
        s.setblocking(True)
        s.settimeout(30)
    return socks


def test_idle_connections_closed_and_capped_while_a_client_is_served(start_gateway):
    limit = raise_fd_limit(MAX_CONNECTIONS + 2000)
    n = min(MAX_CONNECTIONS + 50, limit - 1500)
    gw = start_gateway()
    sqs = gw.sqs()
    url = sqs.create_queue(QueueName="served")["QueueUrl"]   # its connection is open now
    idle, extra = [], []
    t0 = time.monotonic()
    try:
        for start in range(0, n, 500):
            idle += open_at_once(gw.port, min(500, n - start))
            # Served all along (and its keep-alive connection kept busy, not idle).
            assert sqs.get_queue_url(QueueName="served")["QueueUrl"] == url
        opened = time.monotonic()
        watch = IdleWatch(idle)
        # Every open connection is served; a new one is refused once 10,000 are open.
        for i in range(5):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert sorted(m["Body"] for m in got) == [f"m{i}" for i in range(5)]
        if n > MAX_CONNECTIONS:
            assert refused_at_the_cap(gw.port, watch, extra)
        # The idle ones are closed about 10 s after they opened: not before 8 s, all by 40 s.
        while len(watch.times) < n and time.monotonic() - opened < 60:
            watch.collect(1)
        watch.sel.close()
        times = watch.times
        assert len(times) == n, f"{n - len(times)} of {n} idle connections still open"
        # Those past 10,000 were closed at once; the others not before 8 s, all within 40 s.
        over = max(0, n - (MAX_CONNECTIONS - 1))   # the client holds one of the 10,000
        early = sum(1 for t in times if t - t0 < 8)
        assert early <= over, (early, over)
        assert max(times) - opened < 40
    finally:
        for s in idle + extra:
            s.close()
    assert not refused(gw.port)
    assert gw.sqs().get_queue_url(QueueName="served")["QueueUrl"] == url


def redis_clients(r):
    return len(r.client_list())


def test_long_poll_burst_within_the_connection_cap(r, start_gateway):
    cap = 4
    gw = start_gateway(extra=["--max-redis-connections", cap])
    sqs = gw.sqs(max_pool_connections=64)
    url = sqs.create_queue(QueueName="burst")["QueueUrl"]
    sqs.receive_message(QueueUrl=url)                      # the shared connection in use
    baseline = redis_clients(r)
    results, errors, peak = [], [], [0]

    def poll():
        try:
            results.append(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=3,
                                               MaxNumberOfMessages=1).get("Messages", []))
        except Exception as e:                        # noqa: BLE001 - any error fails below
            errors.append(e)

    threads = [threading.Thread(target=poll) for _ in range(40)]
    for t in threads:
        t.start()
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], redis_clients(r))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(0.5)
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    for t in threads:
        t.join(timeout=60)
    stop.set()
    watcher.join()
    assert errors == []
    assert len(results) == 40
    # The cap counts the shared connection: at most cap - 1 dedicated ones on top.
    assert peak[0] <= baseline + cap - 1, (baseline, peak[0])
    got = [m["Body"] for ms in results for m in ms]
    left = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]
    assert sorted(got + left) == ["m0", "m1", "m2"]
    # Idle dedicated connections are closed within 30 s (60 s window).
    deadline = time.monotonic() + 60
    while redis_clients(r) > baseline and time.monotonic() < deadline:
        time.sleep(0.5)
    assert redis_clients(r) == baseline
    assert "\nrmq_gateway_redis_connections 1\n" in metrics_text(gw)


def test_max_redis_connections_refusals(server, tmp_path):
    from gateway_support import Gateway
    for bad in ("1", "0", "x"):
        g = Gateway(server, extra=["--max-redis-connections", bad]).launch()
        assert g.wait_exit() not in (None, 0)
        assert "max-redis-connections" in g.output()
