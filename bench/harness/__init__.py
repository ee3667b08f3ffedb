"""The shared parts of the benchmarks (bench/*.py):

  (tests/)   the server harness, shared with the integration tests and re-exported here:
             free_port, the server binary, and `Server` (tests/server_support.py): one
             redis-server (or Valkey) on a free port of 127.0.0.1 in its own directory,
             stopped only by its pid; `Cluster` and the cluster load runs are in
             tests/cluster_support.py and tests/cluster_load_support.py;
  callgrind  `Callgrind`: the instructions a `Server` runs between two points (valgrind);
  pinned     the server under load pinned to core 0 and the load driver on core 1: driver
             runs re-run when the machine was disturbed, the load meter, the speed probe,
             the machine's description;
  phases     push / pop / ack phases sent from Python, timed (commandstats) or counted
             (callgrind);
  figures    `Fig` (a figure over rounds, disturbed rounds left out), fmt, ratio;
  stats      medians and spreads of repeated rounds;
  report     where reports go (bench/results/), the machine they ran on.

A script in bench/ imports it as `harness` (its own folder is on sys.path); one elsewhere
puts bench/ on sys.path first. Importing it puts tests/ on sys.path (last, so that no
module of tests/ shadows one of bench/): the benchmarks may import the tests' support
modules (*_support.py, server_bin.py), never the other way round (tests/test_import_rules.py).
"""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent.parent.parent / "tests")
if _TESTS not in sys.path:
    sys.path.append(_TESTS)

from server_bin import HarnessError, server_binary  # noqa: E402
from server_support import REPO, Server, ServerError, free_port, module_path, poll, resp  # noqa: E402

from .callgrind import Callgrind  # noqa: E402
from .report import RESULTS, cpu_model, write_report  # noqa: E402
from .stats import median, spread  # noqa: E402

__all__ = ["Callgrind", "HarnessError", "REPO", "RESULTS", "Server", "ServerError", "cpu_model",
           "free_port", "median", "module_path", "poll", "resp", "server_binary", "spread",
           "write_report"]
