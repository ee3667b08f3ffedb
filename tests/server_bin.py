"""Which server binary the integration tests run: Redis (default) or Valkey, any version of
the test matrix (`scripts/install-server redis-7.0|redis-8.2|valkey-8.1|valkey-9.1`).

    RMQ_SERVER_BIN   path or name of the server binary, e.g. the one printed by
                     `scripts/install-server valkey-9.1`; default `redis-server` on PATH.
    REDIS_SERVER     older name of the same setting (used when RMQ_SERVER_BIN is unset).

`server_binary()` (harness.server_binary, bench/harness/server.py, picks it) returns an
absolute path and fails the current test (pytest.fail) when the binary cannot be found.
`server_name()` says which server it is ("redis"/"valkey"), `server_version()` its version
as a tuple, e.g. (8, 2, 3), and `server_label()` both ("Redis 8.2.3"), so that a test can
skip or adapt where servers genuinely differ (saying why in the skip message).
"""

import os
import re
import shutil
import subprocess
from functools import lru_cache

import pytest

import server_support  # noqa: F401  (puts bench/ on sys.path)
from harness import HarnessError  # noqa: E402
from harness import server_binary as _server_binary  # noqa: E402


def server_binary():
    try:
        return _server_binary()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


@lru_cache(maxsize=None)
def _version_line(exe):
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, timeout=10, text=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def server_name():
    """"valkey" or "redis" (from `<binary> --version`)."""
    return "valkey" if "valkey" in _version_line(server_binary()).lower() else "redis"


def server_version():
    """The server's version as a tuple of ints (from `<binary> --version`: `v=8.2.3`)."""
    m = re.search(r"\bv=(\d+)\.(\d+)\.(\d+)", _version_line(server_binary()))
    if not m:
        pytest.fail(f"cannot read the version of {server_binary()}", pytrace=False)
    return tuple(int(x) for x in m.groups())


def server_label():
    """E.g. "Redis 8.2.3" or "Valkey 9.1.2"."""
    return f"{server_name().capitalize()} {'.'.join(map(str, server_version()))}"


def cli_binary():
    """The cluster-admin client: RMQ_CLI_BIN, else redis-cli, else valkey-cli on PATH."""
    for name in (os.environ.get("RMQ_CLI_BIN"), "redis-cli", "valkey-cli"):
        if name:
            exe = shutil.which(name)
            if exe:
                return exe
    pytest.fail("neither redis-cli nor valkey-cli found (install redis-tools)", pytrace=False)
