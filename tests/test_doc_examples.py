"""Examples are tests: every runnable block of the README and the docs (tests/doc_blocks.py
says which and how) runs here against a fresh server with the module, and every relative
link of the docs leads to a file and heading of this repository."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import doc_blocks
from conftest import start_server
from gateway_support import Gateway

ROOT = Path(__file__).resolve().parent.parent


def doc_files():
    names = ["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md"]
    files = [ROOT / n for n in names if (ROOT / n).exists()]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted(ROOT.glob("clients/*/README.md")) + sorted(ROOT.glob("gateway/*.md"))
    return files


def _rel(p):
    return str(Path(p).relative_to(ROOT))


def _runnable(path):
    return [b for b in doc_blocks.blocks(path, name=_rel(path))
            if b.lang in doc_blocks.RUNNABLE and "skip" not in b.directives]


EXAMPLE_DOCS = [p for p in doc_files() if _runnable(p)]


def redis_cli(port, command):
    """What `redis-cli` prints for one command line, as a reader at its prompt sees it."""
    cli = shutil.which("redis-cli") or "redis-cli"
    out = subprocess.run([cli, "-h", "127.0.0.1", "-p", str(port), "--no-raw"],
                         input=command + "\n", capture_output=True, text=True, timeout=60)
    return (out.stdout + out.stderr).rstrip("\n")


def replay(block, port):
    """[(command, expected, got)] for each reply of a redis-cli block that differs."""
    diffs = []
    for command, expected in doc_blocks.session(block):
        got = redis_cli(port, command)
        want = "\n".join(expected).rstrip("\n")
        if doc_blocks.mask(got) != doc_blocks.mask(want):
            diffs.append((command, want, got))
    return diffs


def _node_client_built():
    """The Node client's dist/ as its sources are (`npm run build`, as `make test-node` does),
    for examples that import it: on a fresh clone the doc tests may run first."""
    node = ROOT / "clients" / "node"
    built = node / "dist" / "index.js"
    newest = max(p.stat().st_mtime for p in (node / "src").rglob("*.ts"))
    if not built.exists() or built.stat().st_mtime < newest:
        subprocess.run(["npm", "run", "build"], cwd=node, check=True, capture_output=True,
                       timeout=300)


def _node_dir(tmp):
    """A folder where an example's imports resolve as in a user's project: `rmq-redis` is
    the client of this repository, the other packages those its and the gateway's tests
    installed (ioredis, @aws-sdk/client-sqs, ...)."""
    mods = Path(tmp) / "node_modules"
    mods.mkdir(exist_ok=True)
    (mods / "rmq-redis").symlink_to(ROOT / "clients" / "node")
    for installed in (ROOT / "clients" / "node" / "node_modules", ROOT / "gateway" / "node_modules"):
        for pkg in installed.glob("*") if installed.is_dir() else ():
            scoped = pkg.name.startswith("@")
            for entry in (pkg.glob("*") if scoped else [pkg]):
                dest = mods / entry.relative_to(installed)
                if not dest.exists() and not entry.name.startswith("."):
                    dest.parent.mkdir(exist_ok=True)
                    dest.symlink_to(entry)
    return tmp


def run_code(block, port, gateway_port=None):
    """Runs a python, js or sh example; returns (exit status, output)."""
    code = doc_blocks.with_address(block.text, port, gateway_port)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "clients" / "python"),
               PATH=f"{ROOT / 'target' / 'release'}:{os.environ.get('PATH', '')}")
    with tempfile.TemporaryDirectory(prefix="rmq-doc-") as tmp:
        if block.lang == "python":
            cmd = [sys.executable, "-c", code]
        elif block.lang == "js":
            _node_client_built()
            script = Path(_node_dir(tmp)) / "example.mjs"
            script.write_text(code)
            cmd = ["node", str(script)]
        else:
            cmd = ["bash", "-euo", "pipefail", "-c", code]
        try:
            out = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                                 timeout=120)
        except subprocess.TimeoutExpired as e:
            return None, f"did not exit within 120 s; output so far: {e.stdout!r}"
    return out.returncode, out.stdout + out.stderr


@pytest.mark.parametrize("path", EXAMPLE_DOCS, ids=_rel)
def test_examples_run_as_written(path):
    server, gateway = start_server(), None
    try:
        failures = []
        for block in _runnable(path):
            if "gateway" in block.directives and gateway is None:
                gateway = Gateway(server).start()
            if "fresh" in block.directives:
                server.client().flushall()
            if "wait" in block.directives:
                time.sleep(int(block.directives["wait"]) / 1000)
            if block.lang == "redis-cli":
                for command, want, got in replay(block, server.port):
                    failures.append(f"{block.where}: {command}\n  doc says:\n{want}\n"
                                    f"  server says:\n{got}")
                continue
            code, output = run_code(block, server.port, gateway and gateway.port)
            if code != 0:
                failures.append(f"{block.where}: {block.lang} example exited {code}:\n{output}")
            elif block.output is not None and (doc_blocks.mask(output.rstrip("\n"))
                                               != doc_blocks.mask(block.output.text.rstrip("\n"))):
                failures.append(f"{block.where}: printed\n{output}\n  the doc says "
                                f"({block.output.where}):\n{block.output.text}")
        assert not failures, "\n\n".join(failures)
    finally:
        if gateway is not None:
            gateway.stop()
        server.stop()


def test_a_drifted_example_fails(server):
    """The replay is a real comparison: a reply changed in the doc is reported."""
    block = doc_blocks.Block("drift.md", 1, "redis-cli",
                             "127.0.0.1:6380> RMQ.PUSH drift PRIORITY 5 a b\n(integer) 2\n"
                             "127.0.0.1:6380> RMQ.PUSH drift PRIORITY 5 a\n(integer) 1\n")
    server.client().flushall()
    diffs = replay(block, server.port)
    assert diffs == [("RMQ.PUSH drift PRIORITY 5 a", "(integer) 1", "(integer) 0")]


@pytest.mark.parametrize("path", doc_files(), ids=_rel)
def test_relative_links_resolve(path):
    assert doc_blocks.broken_links(path, ROOT) == []


# Spelt in parts so that this file does not name them itself.
OUTSIDE = re.compile(r"\b(?:" + "|".join(w.upper() for w in ("spec", "gateway", "design"))
                     + r")(?:\.md|\b)|\.\." + "/shared/")


def test_the_repository_stands_alone():
    """Nothing tracked points at a contract kept outside the repository: its own docs
    (docs/COMMANDS.md, docs/gateway.md) are the contract."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    offenders = []
    for name in tracked:
        p = ROOT / name
        if p.suffix not in (".md", ".rs", ".py", ".ts", ".mjs", ".js", ".java", ".go", ".toml",
                            ".json", ".sh", "") or not p.is_file():
            continue
        for n, line in enumerate(p.read_text(errors="replace").split("\n"), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{name}:{n}: {line.strip()[:100]}")
    assert offenders == []


# --- the extractor itself, without a server ---------------------------------------------
def test_blocks_directives_and_outputs():
    text = ("intro\n<!-- example: skip needs make run -->\n```sh\nmake run\n```\n"
            "<!-- example: fresh -->\n<!-- example: wait 50 -->\n```redis-cli\n"
            "127.0.0.1:6380> PING\nPONG\n```\n```python\nprint(1)\n```\n"
            "<!-- example: output -->\n```\n1\n```\n```conf\nport 1\n```\n"
            "<!-- example: gateway -->\n```python\nx\n```\n")
    bs = doc_blocks.blocks("x.md", text)
    assert [(b.lang, b.line) for b in bs] == [("sh", 3), ("redis-cli", 8), ("python", 12),
                                              ("conf", 19), ("python", 23)]
    assert bs[0].directives == {"skip": "needs make run"}
    assert bs[1].directives == {"fresh": "", "wait": "50"}
    assert bs[2].output.text == "1\n" and bs[3].directives == {}
    assert bs[4].directives == {"gateway": ""}
    assert doc_blocks.with_address("http://127.0.0.1:9324 redis://127.0.0.1:6380 Redis(6380) "
                                   "-p 6380 63801", 7001, 7002) \
        == "http://127.0.0.1:7002 redis://127.0.0.1:7001 Redis(7001) -p 7001 63801"
    assert doc_blocks.session(bs[1]) == [("PING", ["PONG"])]


def test_prose_between_a_directive_and_a_block_cancels_the_directive():
    bs = doc_blocks.blocks("x.md", "<!-- example: fresh -->\nsome words\n```sh\nls\n```\n")
    assert bs[0].directives == {}


@pytest.mark.parametrize("text, why", [
    ("```sh\nls\n", "unclosed"),
    ("<!-- example: skip -->\n```sh\nls\n```\n", "needs a reason"),
    ("<!-- example: wait soon -->\n```sh\nls\n```\n", "milliseconds"),
    ("<!-- example: later -->\n```sh\nls\n```\n", "unknown example directive"),
    ("<!-- example: output -->\n```\n1\n```\n", "must follow"),
])
def test_malformed_examples_are_refused(text, why):
    with pytest.raises(doc_blocks.DocError, match=why):
        doc_blocks.blocks("x.md", text)


def test_a_session_needs_prompts():
    with pytest.raises(doc_blocks.DocError, match="before any prompt"):
        doc_blocks.session(doc_blocks.Block("x.md", 1, "redis-cli", "(integer) 1\n"))
    with pytest.raises(doc_blocks.DocError, match="no `host:port>` prompt"):
        doc_blocks.session(doc_blocks.Block("x.md", 1, "redis-cli", "\n"))


def test_masks_cover_clock_values_only():
    assert doc_blocks.mask("(integer) 1765000000123") == "(integer) <unix-ms>"
    assert doc_blocks.mask('1) "1765000000123-0"') == '1) "<entry-id>"'
    assert doc_blocks.mask("(integer) 5000") == "(integer) 5000"
    assert doc_blocks.mask("due in ~4998 ms") == "due in ~<n> ms"


def test_slugs_and_links(tmp_path):
    assert doc_blocks.slug("Durable mode: nothing acknowledged is lost") == \
        "durable-mode-nothing-acknowledged-is-lost"
    assert doc_blocks.slug("`RMQ.PUSH` and `RMQ.POP`") == "rmqpush-and-rmqpop"
    (tmp_path / "a.md").write_text("# Top\n## Top\n[ok](b.md#part) [self](#top-1) "
                                   "[gone](c.md) [bad](b.md#nope) [web](https://x.y/z) "
                                   "`[code](nowhere.md)`\n")
    (tmp_path / "b.md").write_text("## Part\n```\n# not a heading\n```\n")
    assert doc_blocks.broken_links(tmp_path / "a.md", tmp_path) == [
        ("c.md", "no such file"), ("b.md#nope", "no heading #nope in b.md")]
    (tmp_path / "d.md").write_text("[out](../../etc/passwd)\n")
    assert doc_blocks.broken_links(tmp_path / "d.md", tmp_path) == [
        ("../../etc/passwd", "points outside the repository")]
