"""Test harness for the RMQ Redis module.

Every server used by the tests is a server_support.Server: a `redis-server` (or Valkey, see
server_bin.py) started on a free port bound to 127.0.0.1, with its own temporary --dir, no
persistence, and `--loadmodule <abs path of target/release/librmq.so> [module args]`.
Servers are stopped by pid (terminate, wait, kill if needed) -- never by name.

Environment overrides:
  RMQ_MODULE      path of the module to load (default: <repo>/target/release/librmq.so)
  RMQ_SERVER_BIN  server binary (default: REDIS_SERVER, else `redis-server` on PATH)

Fixtures:
  server                 module-scoped default server (no module args)
  r                      a client of `server` (decode_responses=False); FLUSHALL before each test
  start_server           factory: start_server(module_args=[...], extra_conf=[...]) -> Server
                         (stopped automatically at the end of the test)
  start_failing_server   factory: start_failing_server(module_args=[...]) -> log text of a server
                         that was expected to refuse to start (fails the test if it started)
"""

import pytest

from server_bin import HarnessError, server_binary, server_label
from server_support import Server, module_path

# clients of these servers time out after 10 s (server_support's default is 15 s)
CLIENT_TIMEOUT = 10


def pytest_report_header(config):
    """Which server (and version) this run tests, at the top of pytest's output."""
    return f"server: {server_label()} ({server_binary()})"


def _server(module_args=(), extra_conf=()):
    return Server(conf=extra_conf, module_args=module_args, tag="rmq-test",
                  client_timeout=CLIENT_TIMEOUT)


def start_server(module_args=(), extra_conf=()):
    """Start a server with the module loaded (plain function; caller must stop it)."""
    return _server(module_args, extra_conf).start()


def start_failing_server(module_args=(), extra_conf=()):
    """Start a server that is expected NOT to come up (module refuses to load).

    Returns the server's log text (log file + stdout/stderr). Fails the current test if the
    server does start and answer PING.
    """
    s = _server(module_args, extra_conf).launch()
    try:
        code = s.wait_exit()
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

    def ensure(self):
        if self.server is None or not self.server.alive():
            if self.server is not None:
                self.server.stop(remove_dir=False)
            self.server = start_server()
        return self.server


@pytest.fixture(scope="module")
def _server_holder():
    try:
        module_path()
    except HarnessError as e:  # a missing build fails the tests with one line, no traceback
        pytest.fail(str(e), pytrace=False)
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
    "rmq.stats-queues": "100000",
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


# ---------------------------------------------------------------------------------------
# rmq-gateway (tests/test_gateway*.py)
# ---------------------------------------------------------------------------------------

@pytest.fixture
def start_gateway(server):
    """factory: start_gateway(credentials=None, extra=(), server=None) -> a running
    gateway_support.Gateway against `server` (or the given one), stopped at the end."""
    from gateway_support import Gateway
    started = []

    def start(credentials=None, extra=(), server=server):
        g = Gateway(server, credentials=credentials, extra=extra).start()
        started.append(g)
        return g

    yield start
    for g in started:
        g.stop()


@pytest.fixture
def gw(r, start_gateway):
    """A gateway without credentials against `server` (flushed by `r` first); test files
    that need another kind define their own `gw`."""
    return start_gateway()


@pytest.fixture
def sqs(gw):
    """A boto3 SQS client of `gw`."""
    return gw.sqs()
