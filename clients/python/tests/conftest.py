"""Tests of the Python client against real servers, through the repository's harness.

The repository's tests/ (server_support.Server, cluster_support.Cluster, its conftest's
`server`, `r` and `start_server` fixtures) is put on sys.path and its conftest loaded under
another name, so these tests start the same redis-server processes with the module
(RMQ_MODULE, RMQ_SERVER_BIN as there). clients/python is put on sys.path for `import rmq`.

Module features that are still landing (GROUP on PUSH, RMQ.TPOP, RMQ.POLICY) are probed
on the running server; tests that need one call `require(client, feature)`, which skips
only when the loaded module lacks it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

HERE = Path(__file__).resolve().parent
PACKAGE_DIR = HERE.parent                  # clients/python
REPO_TESTS = HERE.parents[2] / "tests"     # the repository's harness
for p in (str(PACKAGE_DIR), str(REPO_TESTS), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

_spec = importlib.util.spec_from_file_location("rmq_repo_conftest", REPO_TESTS / "conftest.py")
_repo = importlib.util.module_from_spec(_spec)
sys.modules["rmq_repo_conftest"] = _repo
_spec.loader.exec_module(_repo)

# the repository's fixtures, used as they are
_server_holder = _repo._server_holder
server = _repo.server
r = _repo.r
start_server_factory = _repo.start_server_factory
_start_server_fixture = _repo._start_server_fixture


def subprocess_env() -> dict[str, str]:
    """Environment for a child Python process that imports rmq and the test helpers."""
    env = dict(os.environ)
    paths = [str(PACKAGE_DIR), str(HERE), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


_features: dict[tuple[str, int], bool] = {}


def _probe(client: Any, feature: str) -> bool:
    if feature in ("tpop", "policy"):
        # without arguments: an arity error if the command exists, else "unknown command"
        try:
            client.execute_command(f"RMQ.{feature.upper()}")
        except redis.ResponseError as e:
            return "unknown command" not in str(e).lower()
        return True
    if feature == "group":
        # a module without GROUP takes "GROUP", "g" and "m" for three messages
        q = "rmq-probe:group"
        added = client.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "GROUP", "g", "m")
        client.execute_command("RMQ.CANCEL", q, "GROUP", "g", "m")
        return added == 1
    raise ValueError(feature)


def has_feature(client: Any, feature: str) -> bool:
    """Whether the module on `client`'s server has `feature` (group, tpop or policy)."""
    key = (feature, id(client))
    if key not in _features:
        _features[key] = _probe(client, feature)
    return _features[key]


def require(client: Any, *features: str) -> None:
    """Skip the test when the loaded module lacks one of `features`."""
    for f in features:
        if not has_feature(client, f):
            pytest.skip(f"the loaded RMQ module has no {f.upper()} yet")
