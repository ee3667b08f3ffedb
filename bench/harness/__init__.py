"""The shared parts of the benchmarks (bench/*.py), the investigation tools
(bench/investigate/) and the integration tests (tests/server_support.py re-exports them):

  server     free_port, the server binary, and `Server`: one redis-server (or Valkey) started
             on a free port of 127.0.0.1 in its own directory, stopped only by its pid;
  callgrind  `Callgrind`: the instructions a `Server` runs between two points (valgrind);
  stats      medians and spreads of repeated rounds;
  report     where reports go (bench/results/), the machine they ran on.

A script in bench/ imports it as `harness` (its own folder is on sys.path); one elsewhere
puts bench/ on sys.path first.
"""

from .callgrind import Callgrind
from .report import RESULTS, cpu_model, write_report
from .server import REPO, HarnessError, Server, free_port, module_path, poll, resp, server_binary
from .stats import median, spread

__all__ = ["Callgrind", "HarnessError", "REPO", "RESULTS", "Server", "cpu_model", "free_port",
           "median", "module_path", "poll", "resp", "server_binary", "spread", "write_report"]
