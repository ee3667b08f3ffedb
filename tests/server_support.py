"""The test server processes: harness.server (bench/harness/server.py) is the one
implementation behind every server the tests and the benchmarks start; this module gives it
to the tests under the names they import, with pytest's failure for a missing module, and
the tests' own waits.

Each `Server` is one redis-server (or Valkey: see server_bin.py) started on a free port on
127.0.0.1, with its own temporary --dir and the RMQ module loaded, stopped, killed, paused
and resumed only through its pid -- never by name.  conftest.py's fixtures (`server`,
`start_server`, `start_failing_server`) and cluster_support.Cluster start their servers
through it.

Environment: RMQ_MODULE (module path), RMQ_SERVER_BIN (server binary, see server_bin.py).
"""

import sys
import time
from pathlib import Path

import pytest
import redis

# bench/ last: its scripts must not shadow the tests' modules.
sys.path.append(str(Path(__file__).resolve().parent.parent / "bench"))

from harness import HarnessError, REPO, Server, free_port, poll, resp  # noqa: E402,F401  (re-exported)
from harness import module_path as _module_path  # noqa: E402
from harness.server import CLIENT_TIMEOUT, START_TIMEOUT, STOP_TIMEOUT, ServerError  # noqa: E402,F401


def module_path():
    try:
        return _module_path()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


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
            pytest.fail(f"timed out after {timeout}s waiting for {what}"
                        + (f" (last error: {last_exc})" if last_exc else ""), pytrace=False)
        time.sleep(interval)
