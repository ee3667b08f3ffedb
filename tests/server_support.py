"""The server processes of the tests and the benchmarks: the one implementation behind every
server either starts (bench/harness re-exports it; the tests never import from bench/).

Each `Server` is one redis-server (or Valkey: `server_bin.server_binary()` picks the binary)
started here, on a free port on 127.0.0.1, with its own temporary --dir and, unless
module=None, the RMQ module loaded.  It is stopped, killed, paused and resumed only through
the pid of the process started here -- never by name.  It can be restarted on the same port
and dir (gracefully or after a kill -9), paused (SIGSTOP), pinned to a core (taskset) or run
under another program (valgrind: bench/harness/callgrind.py).  conftest.py's fixtures
(`server`, `start_server`, `start_failing_server`) and cluster_support.Cluster start their
servers through it.  Besides: free_port, poll (a bounded wait), resp (a command for a raw
socket), and the tests' waits (wait_for, wait_replica_synced).

Environment: RMQ_MODULE (module path), RMQ_SERVER_BIN or REDIS_SERVER (server binary).
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

import redis

from server_bin import HarnessError, server_binary

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0
CLIENT_TIMEOUT = 15
CLK_TCK = os.sysconf("SC_CLK_TCK")

_live = []


class ServerError(RuntimeError):
    pass


def module_path():
    """The RMQ module: RMQ_MODULE, else this tree's target/release/librmq.so."""
    p = Path(os.environ.get("RMQ_MODULE", REPO / "target" / "release" / "librmq.so")).resolve()
    if not p.is_file():
        raise HarnessError(f"RMQ module not found at {p}: run `cargo build --release` or set RMQ_MODULE")
    return str(p)


def _bindable(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port(cluster_bus=False, avoid=()):
    """A free TCP port on 127.0.0.1; with cluster_bus, port + 10000 is free too."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port in avoid or (port + 10000) in avoid:
            continue
        if cluster_bus and (port + 10000 > 65535 or not _bindable(port + 10000)):
            continue
        return port
    raise RuntimeError("no free port found")


def poll(pred, timeout, interval=0.005):
    """Calls pred() until it returns a true value or `timeout` seconds have passed; its
    last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def resp(*args):
    """One command in RESP (an array of bulk strings), for a client written straight on a
    socket."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


# The module, unless the caller names another or None (a server without it).
DEFAULT = object()


class Server:
    """One server process, with the RMQ module loaded unless module=None.

    conf: extra `--name value` arguments (a list of strings), appended last so they override
    the defaults (no RDB saves, no AOF).  client_timeout: default socket timeout (s) of the
    clients made by client().  module: a path, or None for a bare server.  pin: a core to
    run it on (taskset -c).  wrapper: a command the server runs under (e.g. valgrind).
    binary: a server binary other than server_binary()'s (a benchmark comparing servers).
    env: variables added to this process's environment for the server (e.g. MALLOC_CONF).
    """

    def __init__(self, conf=(), module_args=(), port=None, cluster_bus=False, tag="rmq",
                 client_timeout=CLIENT_TIMEOUT, module=DEFAULT, pin=None, wrapper=(),
                 start_timeout=START_TIMEOUT, binary=None, env=None):
        self.binary = binary
        self.env = dict(env or {})
        self.conf = [str(a) for a in conf]
        self.module_args = [str(a) for a in module_args]
        self.module = module
        self.pin = pin
        self.wrapper = list(wrapper)
        self.start_timeout = start_timeout
        self.fixed_port = port is not None
        self.port = port
        self.cluster_bus = cluster_bus
        self.client_timeout = client_timeout
        self.dir = tempfile.mkdtemp(prefix=f"{tag}-")
        self.logfile = os.path.join(self.dir, "server.log")
        self.outfile = os.path.join(self.dir, "stdout.log")
        self.proc = None
        # Set when something went wrong: stop() then leaves the directory (log, dumps) to
        # be looked at.
        self.keep = False
        self._clients = []
        self._conn = None

    # -- lifecycle -------------------------------------------------------------------
    def argv(self):
        module = module_path() if self.module is DEFAULT else self.module
        pin = ["taskset", "-c", str(self.pin)] if self.pin is not None else []
        return [*pin, *self.wrapper, self.binary or server_binary(),
                "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--logfile", self.logfile, "--daemonize", "no",
                "--save", "", "--appendonly", "no",
                *(["--loadmodule", str(module), *self.module_args] if module else []),
                *self.conf]

    def _spawn(self):
        out = open(self.outfile, "ab")
        try:
            self.proc = subprocess.Popen(self.argv(), stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, **self.env} if self.env else None,
                                         stdin=subprocess.DEVNULL, cwd=self.dir)
        finally:
            out.close()
        if self not in _live:
            _live.append(self)

    def launch(self):
        """Start the process on a free port (or the fixed one) without waiting for it: for a
        server expected to exit by itself (see wait_exit()); start() waits for PING."""
        if not self.fixed_port:
            self.port = free_port(cluster_bus=self.cluster_bus)
        self._spawn()
        return self

    def start(self):
        """Start on a free port (or the fixed one) and wait until it answers PING."""
        return self._spawn_until_ready(attempts=1 if self.fixed_port else 5, new_port=True)

    def _spawn_until_ready(self, attempts, new_port, pause=0.0):
        """Spawn (through launch() when new_port, else on the same port) and wait until PING
        answers; when the port turns out to be taken ("Address already in use" in this
        attempt's log), stop by pid and try again, up to `attempts` times."""
        for attempt in range(attempts):
            marks = self._log_sizes()
            if new_port:
                self.launch()
            else:
                self._spawn()
            try:
                self.wait_ready()
                return self
            except ServerError:
                in_use = "Address already in use" in self.log_text(since=marks)
                self.stop(remove_dir=False)
                if not in_use or attempt == attempts - 1:
                    raise
                time.sleep(pause)
        raise ServerError(f"could not start the server in {attempts} attempts")

    def wait_ready(self, timeout=None):
        """Wait until PING answers (a server still loading its data answers LOADING)."""
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"server exited with code {self.proc.returncode} during "
                                  f"startup:\n{self.log_tail()}")
            try:
                c = self.connect(socket_timeout=1, socket_connect_timeout=1)
                try:
                    if c.ping():
                        return
                finally:
                    c.close()
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass
            except redis.ResponseError as e:  # e.g. LOADING on some versions
                if "LOADING" not in str(e):
                    raise
            time.sleep(0.02)
        raise ServerError(f"server did not answer PING within {timeout}s:\n{self.log_tail()}")

    def _close_clients(self):
        self._conn = None
        for c in self._clients:
            try:
                c.close()
            except Exception:
                pass
        self._clients = []

    def stop(self, remove_dir=True):
        """SIGTERM by pid, wait, SIGKILL if it does not exit in time (a server under
        valgrind gets its start timeout: it writes its last dump on the way out)."""
        self._close_clients()
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)  # in case it was paused
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=max(STOP_TIMEOUT, self.start_timeout if self.wrapper else 0))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
            except ProcessLookupError:
                pass
        if remove_dir:
            if self in _live:
                _live.remove(self)
            if not self.keep:
                shutil.rmtree(self.dir, ignore_errors=True)

    def kill9(self):
        """kill -9 by pid (no shutdown, no save) and reap it; keeps its dir."""
        self._close_clients()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=STOP_TIMEOUT)

    kill = kill9

    def wait_exit(self, timeout=START_TIMEOUT):
        """Wait for the process to exit by itself; return its exit code, or None if it is
        still running after `timeout` seconds."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self, graceful=True, downtime=0.0):
        """Stop (SIGTERM, or kill -9 when graceful=False), stay down `downtime` seconds and
        start again on the same port and dir with the same arguments; wait until it answers
        PING.  (With `--save ""`, a graceful stop writes no RDB: call SAVE first to keep
        data without AOF.)"""
        if graceful:
            self.stop(remove_dir=False)
        else:
            self.kill9()
        if downtime:
            time.sleep(downtime)
        # same port: the old listening socket may linger for a moment after a kill
        return self._spawn_until_ready(attempts=50, new_port=False, pause=0.1)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    # -- access ----------------------------------------------------------------------
    @property
    def pid(self):
        # taskset execs the server (and valgrind runs it in its own process): the pid is
        # the server's own.
        return self.proc.pid if self.proc else None

    @property
    def addr(self):
        return f"127.0.0.1:{self.port}"

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/"

    def connect(self, **kw):
        """redis.Redis(decode_responses=False), not closed at stop (the caller closes it).
        RESP2 unless protocol=3 is passed (redis-py 8 would otherwise negotiate RESP3; the
        RESP3 shapes are tested explicitly). A server reached otherwise (TLS) overrides it."""
        opts = dict(host="127.0.0.1", port=self.port, decode_responses=False,
                    socket_timeout=self.client_timeout, socket_connect_timeout=5, protocol=2)
        opts.update(kw)
        return redis.Redis(**opts)

    def client(self, **kw):
        """connect(**kw), closed when the server stops."""
        c = self.connect(**kw)
        self._clients.append(c)
        return c

    def conn(self):
        """One shared client of this server (made again after a restart)."""
        if self._conn is None:
            self._conn = self.client(socket_timeout=5)
        return self._conn

    def cpu_ticks(self):
        """utime + stime of the server process (all its threads), in clock ticks; 0 once it
        has exited."""
        if not self.alive():
            return 0
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        except OSError:
            return 0

    def cpu_seconds(self):
        return self.cpu_ticks() / CLK_TCK

    def _log_sizes(self):
        return [os.path.getsize(p) if os.path.exists(p) else 0
                for p in (self.logfile, self.outfile)]

    def log_text(self, since=None):
        """The server log and its stdout/stderr (from the offsets `since`, as returned by
        _log_sizes(), when given)."""
        parts = []
        for i, p in enumerate((self.logfile, self.outfile)):
            if os.path.exists(p):
                with open(p, "rb") as f:
                    if since:
                        f.seek(since[i])
                    parts.append(f.read().decode("utf-8", "replace"))
        return "\n".join(parts)

    def log_tail(self, n=3000):
        return self.log_text()[-n:]

    def __repr__(self):
        return f"<Server pid={self.pid} port={self.port} dir={self.dir}>"


def info_section(c, section):
    """INFO <section> as a dict of str -> value (redis-py parses it)."""
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in c.info(section).items()}


def wait_replica_synced(primary_client, replica_client, timeout=10.0, interval=0.05):
    """Wait until the replica reports its link up and the primary sees one replica online."""
    deadline = time.monotonic() + timeout
    ri = pi = None
    while time.monotonic() < deadline:
        try:
            ri = replica_client.info("replication")
            pi = primary_client.info("replication")
            if ri.get("master_link_status") == "up" and pi.get("connected_slaves", 0) >= 1 \
                    and "online" in str(pi.get("slave0", "")):
                return
        except (redis.ConnectionError, redis.BusyLoadingError):
            pass
        time.sleep(interval)
    raise AssertionError(f"replica did not sync with the primary in time: replica {ri!r} / "
                         f"primary {pi!r}")


def wait_for(pred, timeout, interval=0.02, what="condition"):
    """Poll pred() until it returns a true value; fail with `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as e:
            last_exc = e
        if time.monotonic() >= deadline:
            import pytest  # only a test waits with it: the benchmarks import this module too
            pytest.fail(f"timed out after {timeout}s waiting for {what}"
                        + (f" (last error: {last_exc})" if last_exc else ""), pytrace=False)
        time.sleep(interval)


@atexit.register
def _stop_all():
    for s in list(_live):
        try:
            s.stop()
        except Exception:
            pass
