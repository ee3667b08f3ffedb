"""Which server binary the integration tests and the benchmarks run: Redis (default) or
Valkey, any version of the test matrix (`scripts/install-server redis-7.0|redis-8.2|valkey-8.1|valkey-9.1`).

    RMQ_SERVER_BIN   path or name of the server binary, e.g. the one printed by
                     `scripts/install-server valkey-9.1`; default `redis-server` on PATH.
    REDIS_SERVER     older name of the same setting (used when RMQ_SERVER_BIN is unset).
    RMQ_CLI_BIN      the cluster-admin client (default redis-cli, else valkey-cli).

`server_binary()` returns an absolute path and raises HarnessError when the binary cannot be
found. `server_name()` says which server it is ("redis"/"valkey"), `server_version()` its
version as a tuple, e.g. (8, 2, 3), and `server_label()` both ("Redis 8.2.3"), so that a test
can skip or adapt where servers genuinely differ (saying why in the skip message).
"""

import os
import re
import shutil
import subprocess
from functools import lru_cache


class HarnessError(RuntimeError):
    """Something the harness needs is missing (binary, module)."""


def server_binary():
    """The server binary, absolute: RMQ_SERVER_BIN, else REDIS_SERVER (its older name), else
    redis-server on PATH (scripts/install-server prints the paths of the others)."""
    name = os.environ.get("RMQ_SERVER_BIN") or os.environ.get("REDIS_SERVER") or "redis-server"
    exe = name if os.sep in name and os.path.isfile(name) else shutil.which(name)
    if not exe or not os.access(exe, os.X_OK):
        raise HarnessError(f"server binary {name!r} not found or not executable (set RMQ_SERVER_BIN, "
                           f"or install redis-server; scripts/install-server prints the others' paths)")
    return os.path.abspath(exe)


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
        raise HarnessError(f"cannot read the version of {server_binary()}")
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
    raise HarnessError("neither redis-cli nor valkey-cli found (install redis-tools)")
