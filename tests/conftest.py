"""Test harness for the RMQ Redis module.

Every server used by the tests is a `redis-server` started here, on a free port bound to
127.0.0.1, with its own temporary --dir, no persistence, and
`--loadmodule <abs path of target/release/librmq.so> [module args]`.  Servers are stopped
by pid (terminate, wait, kill if needed) -- never by name.

Environment overrides:
  RMQ_MODULE    path of the module to load (default: <repo>/target/release/librmq.so)
  REDIS_SERVER  redis-server binary (default: `redis-server` on PATH)

Fixtures:
  server                 module-scoped default server (no module args)
  r                      a client of `server` (decode_responses=False); FLUSHALL before each test
  start_server           factory: start_server(module_args=[...], extra_conf=[...]) -> RedisServer
                         (stopped automatically at the end of the test)
  start_failing_server   factory: start_failing_server(module_args=[...]) -> log text of a server
                         that was expected to refuse to start (fails the test if it started)
"""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

from server_bin import server_binary

REPO = Path(__file__).resolve().parent.parent
MODULE_PATH = Path(os.environ.get("RMQ_MODULE", REPO / "target" / "release" / "librmq.so")).resolve()
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0

_live_servers = []


def _redis_server_binary():
    # RMQ_SERVER_BIN (e.g. Valkey's valkey-server), else REDIS_SERVER, else redis-server.
    return server_binary()


def _module_path():
    if not MODULE_PATH.is_file():
        pytest.fail(
            f"RMQ module not found at {MODULE_PATH}: build it first "
            f"(`cargo build --release`) or set RMQ_MODULE", pytrace=False)
    return str(MODULE_PATH)


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerStartError(RuntimeError):
    pass


class RedisServer:
    """One redis-server process with the RMQ module loaded."""

    def __init__(self, module_args=(), extra_conf=()):
        self.module_args = [str(a) for a in module_args]
        self.extra_conf = [str(a) for a in extra_conf]
        self.proc = None
        self.port = None
        self.dir = None
        self._clients = []

    # -- lifecycle -------------------------------------------------------------------
    def _argv(self):
        argv = [_redis_server_binary(),
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", self.dir,
                "--logfile", self.logfile,
                "--daemonize", "no",
                "--loadmodule", _module_path(), *self.module_args]
        argv += self.extra_conf
        return argv

    def _spawn(self, reuse=False):
        if not reuse:
            self.dir = tempfile.mkdtemp(prefix="rmq-test-")
            self.port = _free_port()
        self.logfile = os.path.join(self.dir, "redis.log")
        self.outfile = os.path.join(self.dir, "stdout.log")
        out = open(self.outfile, "ab")
        try:
            self.proc = subprocess.Popen(self._argv(), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.dir)
        finally:
            out.close()
        _live_servers.append(self)

    def start(self):
        """Start and wait until PING answers. Raises ServerStartError if it exits."""
        for attempt in range(5):
            self._spawn()
            try:
                self._wait_ready()
                return self
            except ServerStartError:
                log = self.log_text()
                self.stop(remove_dir=False)
                if "Address already in use" in log and attempt < 4:
                    shutil.rmtree(self.dir, ignore_errors=True)
                    continue
                raise
        raise ServerStartError("could not start redis-server")  # pragma: no cover

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerStartError(
                    f"redis-server exited with code {self.proc.returncode} during startup:\n"
                    + self.log_text())
            try:
                c = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1,
                                socket_connect_timeout=1)
                try:
                    if c.ping():
                        return
                finally:
                    c.close()
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass
            time.sleep(0.02)
        raise ServerStartError("redis-server did not answer PING in time:\n" + self.log_text())

    def restart(self):
        """Stop (SIGTERM; nothing is saved since save is off -- call SAVE first to keep
        data) and start again on the same port with the same --dir and arguments."""
        self.stop(remove_dir=False)
        self._spawn(reuse=True)
        self._wait_ready()
        return self

    def wait_exit(self, timeout=START_TIMEOUT):
        """Wait for the process to exit by itself; return its exit code or None."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL this server (by pid) to simulate a crash; keeps its --dir."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT)
        self.stop(remove_dir=False)

    def stop(self, remove_dir=True):
        for c in self._clients:
            try:
                c.close()
            except Exception:
                pass
        self._clients = []
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
            except ProcessLookupError:
                pass
        if self in _live_servers:
            _live_servers.remove(self)
        if remove_dir and self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- access ----------------------------------------------------------------------
    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def client(self, **kw):
        """redis.Redis(decode_responses=False). RESP2 unless protocol=3 is passed (redis-py
        8 would otherwise negotiate RESP3; the RESP3 shapes are tested explicitly)."""
        opts = dict(host="127.0.0.1", port=self.port, decode_responses=False,
                    socket_timeout=10, socket_connect_timeout=5, protocol=2)
        opts.update(kw)
        c = redis.Redis(**opts)
        self._clients.append(c)
        return c

    def log_text(self):
        parts = []
        for p in (getattr(self, "logfile", None), getattr(self, "outfile", None)):
            if p and os.path.exists(p):
                with open(p, "rb") as f:
                    parts.append(f.read().decode("utf-8", "replace"))
        return "\n".join(parts)

    def __repr__(self):
        return f"<RedisServer pid={self.pid} port={self.port} args={self.module_args}>"


@atexit.register
def _stop_all_servers():
    for s in list(_live_servers):
        try:
            s.stop()
        except Exception:
            pass


def start_server(module_args=(), extra_conf=()):
    """Start a server with the module loaded (plain function; caller must stop it)."""
    return RedisServer(module_args, extra_conf).start()


def start_failing_server(module_args=(), extra_conf=()):
    """Start a server that is expected NOT to come up (module refuses to load).

    Returns the server's log text (log file + stdout/stderr). Fails the current test if the
    server does start and answer PING.
    """
    s = RedisServer(module_args, extra_conf)
    s._spawn()
    try:
        code = s.wait_exit(START_TIMEOUT)
        if code is None:
            pytest.fail(f"redis-server with module args {s.module_args} did not exit; the "
                        f"module was expected to refuse to load", pytrace=False)
        assert code != 0, "redis-server exited with status 0 although the load should fail"
        return s.log_text()
    finally:
        s.stop()


# ---------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------

class _ServerHolder:
    def __init__(self):
        self.server = None
        self.crashes = []

    def ensure(self):
        if self.server is None or not self.server.alive():
            if self.server is not None:
                self.server.stop(remove_dir=False)
            self.server = start_server()
        return self.server


@pytest.fixture(scope="module")
def _server_holder():
    _module_path()
    holder = _ServerHolder()
    yield holder
    if holder.server is not None:
        holder.server.stop()


@pytest.fixture
def server(_server_holder):
    """The default server (module-scoped, restarted if a previous test crashed it)."""
    return _server_holder.ensure()


DEFAULT_SETTINGS = {
    "rmq.retries": "16",
    "rmq.lease-ms": "30000",
    "rmq.max-message-bytes": "1048576",
    "rmq.max-queue-length": "0",
}


def _reset_settings(c):
    """Put back any rmq.* setting a previous test changed on the shared server."""
    current = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
               for k, v in c.config_get("rmq.*").items()}
    for name, value in DEFAULT_SETTINGS.items():
        if name in current and current[name] != value:
            c.config_set(name, value)


@pytest.fixture
def r(server):
    """A client of the default server; the database is flushed before each test."""
    c = server.client()
    _reset_settings(c)
    c.flushall()
    yield c
    c.close()
    if not server.alive():
        pytest.fail(f"redis-server (pid {server.pid}) died during the test; log tail:\n"
                    + server.log_text()[-3000:], pytrace=False)


@pytest.fixture
def start_server_factory():
    started = []

    def factory(module_args=(), extra_conf=()):
        s = start_server(module_args, extra_conf)
        started.append(s)
        return s

    yield factory
    for s in started:
        s.stop()


# The brief names this factory `start_server`; expose it under that fixture name too.
@pytest.fixture(name="start_server")
def _start_server_fixture(start_server_factory):
    return start_server_factory


@pytest.fixture(name="start_failing_server")
def _start_failing_server_fixture():
    return start_failing_server
