"""The repository's two import rules between tests/ and bench/, checked on the source:

  - no file in tests/ imports from bench/ (the server harness both use lives in tests/:
    server_support.py, server_bin.py, cluster_support.py, cluster_load_support.py);
  - no file in bench/ imports another benchmark (bench/*.py): what benchmarks share is in
    bench/harness/, and a benchmark may import only that and the tests' support modules
    (*_support.py, server_bin.py), never a test file.

An import is found in the syntax tree (import, from-import, importlib's
spec_from_file_location on a path naming bench/), so a comment or a string does not count.
"""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _imports(path):
    """(line, top-level module name) of every import in `path`, and (line, "bench/") for an
    importlib load of a file whose path names bench/."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module.split(".")[0]))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "spec_from_file_location":
            if any(isinstance(c, ast.Constant) and c.value == "bench" for a in node.args for c in ast.walk(a)):
                out.append((node.lineno, "bench/"))
    return out


def violations(repo):
    """Every import in `repo` that breaks one of the two rules, as "path:line: why"."""
    tests, bench = repo / "tests", repo / "bench"
    benchmarks = {p.stem for p in bench.glob("*.py")}
    bench_names = benchmarks | {p.name for p in bench.iterdir() if (p / "__init__.py").exists()} | {"bench/"}
    test_files = {p.stem for p in tests.rglob("test_*.py")}
    out = []
    for f in sorted(tests.rglob("*.py")):
        for line, name in _imports(f):
            if name in bench_names:
                out.append(f"{f.relative_to(repo)}:{line}: a test imports {name} from bench/")
    for f in sorted(bench.rglob("*.py")):
        if "driver" in f.relative_to(bench).parts:
            continue
        for line, name in _imports(f):
            if name in benchmarks and name != f.stem:
                out.append(f"{f.relative_to(repo)}:{line}: imports the benchmark {name}.py "
                           f"(shared parts go to bench/harness/)")
            elif name in test_files:
                out.append(f"{f.relative_to(repo)}:{line}: imports the test file {name}.py "
                           f"(only the tests' support modules are shared)")
    return out


def test_tests_do_not_import_bench_and_benchmarks_do_not_import_each_other():
    assert violations(REPO) == []


def test_the_check_finds_planted_violations(tmp_path):
    for d in ("tests", "bench/harness", "bench/driver/src"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "bench/harness/__init__.py").write_text("")
    (tmp_path / "bench/bench_a.py").write_text("import harness\nfrom server_support import Server\n")
    (tmp_path / "bench/bench_b.py").write_text("import os\nfrom bench_a import x\n")
    (tmp_path / "bench/bench_c.py").write_text("import test_cluster\n")
    (tmp_path / "bench/harness/meter.py").write_text("import bench_b  # a harness module too\n")
    (tmp_path / "tests/server_support.py").write_text("from harness import Callgrind\n")
    (tmp_path / "tests/test_cluster.py").write_text(
        "import importlib.util\n# import bench_a (a comment is no import)\n"
        "s = importlib.util.spec_from_file_location('b', REPO / 'bench' / 'bench_a.py')\n")
    (tmp_path / "tests/test_ok.py").write_text("import server_support\nx = 'bench_a'\n")
    assert violations(tmp_path) == [
        "tests/server_support.py:1: a test imports harness from bench/",
        "tests/test_cluster.py:3: a test imports bench/ from bench/",
        "bench/bench_b.py:2: imports the benchmark bench_a.py (shared parts go to bench/harness/)",
        "bench/bench_c.py:1: imports the test file test_cluster.py (only the tests' support modules are shared)",
        "bench/harness/meter.py:1: imports the benchmark bench_b.py (shared parts go to bench/harness/)",
    ]
