"""The server harness (server_support.py, server_bin.py) that starts every server of the
tests and the benchmarks: what the benchmarks rely on beyond what the other tests exercise
(a server without the module, pinning, a wrapper program, the errors for a missing binary
or module). The benchmarks' own helpers are tested in bench/harness/test_bench_harness.py."""

import os
import shutil
import socket
import time

import pytest
import redis

import server_bin
import server_support


def test_free_port_is_bindable_with_its_cluster_bus():
    port = server_support.free_port(cluster_bus=True)
    for p in (port, port + 10000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_bare_server_has_no_module_and_stops_by_pid():
    s = server_support.Server(module=None, tag="rmq-harness").start()
    try:
        c = s.client()
        assert c.ping()
        # (Valkey 9 lists its built-in Lua engine as a module.)
        names = [dict(zip(m[::2], m[1::2]))[b"name"] for m in c.execute_command("MODULE", "LIST")]
        assert b"rmq" not in names
        with pytest.raises(redis.ResponseError):
            c.execute_command("RMQ.PUSH", "q", "PRIORITY", 1, "m")
        pid, d = s.pid, s.dir
    finally:
        s.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not os.path.exists(d)


def test_kept_server_leaves_its_directory_to_look_at():
    s = server_support.Server(module=None, tag="rmq-harness").start()
    s.keep = True
    s.stop()
    try:
        assert not s.alive()
        assert "Ready to accept connections" in s.log_text()
    finally:
        shutil.rmtree(s.dir)


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) not installed")
def test_pinned_server_runs_on_its_core():
    s = server_support.Server(pin=0, tag="rmq-harness").start()
    try:
        assert os.sched_getaffinity(s.pid) == {0}
        c = s.client()
        assert c.execute_command("RMQ.PUSH", "q", "PRIORITY", 1, "m") == 1
        # The server's CPU time counts in clock ticks: work until one has passed.
        deadline = time.monotonic() + 60
        while s.cpu_seconds() == 0 and time.monotonic() < deadline:
            p = c.pipeline(transaction=False)
            for i in range(2000):
                p.execute_command("RMQ.PUSH", "q", "PRIORITY", 1, f"m{i}")
            p.execute()
        assert s.cpu_seconds() > 0
    finally:
        s.stop()
    assert s.cpu_seconds() == 0


def test_server_env_reaches_the_server_and_nothing_else():
    # The server rewrites its own /proc environ (its process title): a wrapper that execs it
    # writes down what it was started with instead.
    record = 'printf %s "$RMQ_HARNESS_ENV" > started-with; exec "$0" "$@"'
    s = server_support.Server(env={"RMQ_HARNESS_ENV": "on"}, wrapper=["sh", "-c", record],
                       tag="rmq-harness").start()
    try:
        with open(os.path.join(s.dir, "started-with")) as f:
            assert f.read() == "on"
        assert s.client().ping()
        assert "RMQ_HARNESS_ENV" not in os.environ
    finally:
        s.stop()


def test_missing_module_and_binary_are_harness_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("RMQ_MODULE", str(tmp_path / "none.so"))
    with pytest.raises(server_bin.HarnessError, match="RMQ module not found"):
        server_support.module_path()
    monkeypatch.setenv("RMQ_SERVER_BIN", str(tmp_path / "no-server"))
    with pytest.raises(server_bin.HarnessError, match="not found or not executable"):
        server_bin.server_binary()


def test_poll_returns_the_first_true_value_or_the_last_one():
    calls = []
    assert server_support.poll(lambda: calls.append(1) or len(calls) >= 3 and "ok", 10, interval=0) == "ok"
    assert len(calls) == 3
    assert server_support.poll(lambda: 0, 0.05, interval=0.01) == 0


def test_resp_is_what_the_server_reads():
    assert server_support.resp("SET", b"k\r\n", 5) == b"*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$1\r\n5\r\n"
    s = server_support.Server(module=None, tag="rmq-harness").start()
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sk:
            sk.sendall(server_support.resp("SET", b"k\r\n", 5) + server_support.resp("GET", b"k\r\n"))
            got = b""
            while got.count(b"\r\n") < 3:
                got += sk.recv(100)
        assert got == b"+OK\r\n$1\r\n5\r\n"
    finally:
        s.stop()
