"""Examples are tests: every runnable block of the README and the docs (tests/doc_blocks.py
says which and how) runs here against a server with the module (one for all the files,
emptied before each), and every relative link of the docs leads to a file and heading of
this repository."""

import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import textwrap
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


def _has_examples(path):
    try:
        return bool(_runnable(path))
    except doc_blocks.DocError:
        return True  # a malformed doc: its test reports why


EXAMPLE_DOCS = [p for p in doc_files() if _has_examples(p)]


class RedisCli:
    """One `redis-cli` at its prompt for a whole session (one connection, as a reader has;
    in RESP3 or as an ACL user if the block's directives say so). `run` types lines and
    gives what it printed for them: each is followed by an ECHO of a mark, whose reply
    ends the answer."""

    MARK = "rmq-doc-example-answered"

    def __init__(self, port, directives):
        args = ["-3"] if "resp3" in directives else []
        if "user" in directives:
            name, password = directives["user"].split()
            args += ["--user", name, "--pass", password, "--no-auth-warning"]
        cli = shutil.which("redis-cli") or "redis-cli"
        self._p = subprocess.Popen([cli, "-h", "127.0.0.1", "-p", str(port), "--no-raw", *args],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        self._buf = b""

    def run(self, lines, timeout=30):
        self._p.stdin.write(f"{lines}\nECHO {self.MARK}\n".encode())
        self._p.stdin.flush()
        end, deadline = f'"{self.MARK}"\n'.encode(), time.monotonic() + timeout
        while True:
            i = self._buf.find(end)
            if i == 0 or (i > 0 and self._buf[i - 1:i] == b"\n"):
                out, self._buf = self._buf[:i], self._buf[i + len(end):]
                return out.decode(errors="replace").rstrip("\n")
            left = deadline - time.monotonic()
            ready = select.select([self._p.stdout], [], [], max(left, 0))[0] if left > 0 else []
            chunk = os.read(self._p.stdout.fileno(), 65536) if ready else b""
            if not chunk:  # no answer in time, or redis-cli ended
                return self._buf.decode(errors="replace") + f"\n(no answer within {timeout} s)"
            self._buf += chunk

    def close(self):
        self._p.stdin.close()
        try:
            self._p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._p.kill()
            self._p.wait()
        self._p.stdout.close()


def _steps(block):
    """The block's session as runs of (command, the doc's reply) typed at once: a
    transaction (MULTI ... EXEC or DISCARD) is one run, every other command its own."""
    runs, open_run = [], False
    for command, expected in doc_blocks.session(block):
        if not open_run:
            runs.append([])
        runs[-1].append((command, "\n".join(expected).rstrip("\n")))
        verb = command.split()[0].upper() if command.split() else ""
        open_run = verb == "MULTI" or (open_run and verb not in ("EXEC", "DISCARD"))
    return runs


def session_replies(block, port, ids=None):
    """[(command, the doc's reply, the server's reply)] for each step of a redis-cli block.
    Inside a transaction each command but the last answers one line (OK, QUEUED or an
    error); the last (EXEC) answers the rest. A delivery id or cursor the doc shows in a
    reply stands, in the commands after it, for the one the server gave in its place
    (`ids`, the doc's to the server's, lasts as long as the caller keeps it: one file)."""
    out, ids, cli = [], {} if ids is None else ids, RedisCli(port, block.directives)
    try:
        for run in _steps(block):
            lines = "\n".join(doc_blocks.OPAQUE.sub(lambda m: ids.get(m.group(), m.group()),
                                                    command) for command, _ in run)
            # redis-cli times a command that took over 0.5 s (a blocked pop, a loaded machine)
            got = [line for line in cli.run(lines).split("\n") if not doc_blocks.TIMING.match(line)]
            for n, (command, want) in enumerate(run):
                reply = "\n".join(got[n:n + 1] if n < len(run) - 1 else got[n:])
                theirs = [m.group() for m in doc_blocks.OPAQUE.finditer(reply)]
                mine = [m.group() for m in doc_blocks.OPAQUE.finditer(want)]
                if len(theirs) == len(mine):
                    ids.update(zip(mine, theirs))
                out.append((command, want, reply))
    finally:
        cli.close()
    return out


def replay(block, port, ids=None):
    """[(command, expected, got)] for each reply of a redis-cli block that differs."""
    return [(command, want, got) for command, want, got in session_replies(block, port, ids)
            if not doc_blocks.same(want, got, command)]


class DocServer:
    """The one server all the doc files' examples run on, a file after another (a server
    per file cost a start each). `fresh()` puts it back as it started: no keys, and the
    settings and ACL users it started with, which sessions change (CONFIG SET, ACL
    SETUSER), and no per-queue counters (RMQ.INFO's; INFO rmq's server-wide ones are the
    server's history and stay)."""

    def __init__(self):
        self.server = start_server()
        self._c = self.server.client(decode_responses=True)
        self._config = self._c.config_get("*")
        self._users = set(self._c.acl_users())

    def fresh(self):
        # the counters outlive their queues; a lowered stats-queues drops them at the next read
        self._c.config_set("rmq.stats-queues", 0)
        self._c.execute_command("RMQ.INFO", "fresh")
        now = self._c.config_get("*")
        for name, value in self._config.items():
            if now.get(name) != value:
                self._c.config_set(name, value)
        for user in set(self._c.acl_users()) - self._users:
            self._c.acl_deluser(user)
        self._c.flushall()

    def before(self, block):
        """What the block's directives ask for before it runs (`fresh`, `wait`)."""
        if "fresh" in block.directives:
            self.fresh()
        if "wait" in block.directives:
            time.sleep(int(block.directives["wait"]) / 1000)

    def stop(self):
        self.server.stop()


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


@pytest.fixture(scope="module")
def doc_server():
    doc = DocServer()
    yield doc
    doc.stop()


@pytest.mark.parametrize("path", EXAMPLE_DOCS, ids=_rel)
def test_examples_run_as_written(path, doc_server):
    doc_server.fresh()  # each file starts on an empty server
    server, gateway, ids = doc_server.server, None, {}
    try:
        failures = []
        for block in _runnable(path):
            if "gateway" in block.directives and gateway is None:
                gateway = Gateway(server).start()
            doc_server.before(block)
            if block.lang == "redis-cli":
                for command, want, got in replay(block, server.port, ids):
                    failures.append(f"{block.where}: {command}\n  doc says:\n{want}\n"
                                    f"  server says:\n{got}")
                continue
            code, output = run_code(block, server.port, gateway and gateway.port)
            if code != 0:
                failures.append(f"{block.where}: {block.lang} example exited {code}:\n{output}")
            elif block.output is not None and not doc_blocks.same(
                    block.output.text.rstrip("\n"), output.rstrip("\n")):
                failures.append(f"{block.where}: printed\n{output}\n  the doc says "
                                f"({block.output.where}):\n{block.output.text}")
        assert not failures, "\n\n".join(failures)
    finally:
        if gateway is not None:
            gateway.stop()


def test_a_drifted_example_fails(server):
    """The replay is a real comparison: a reply changed in the doc is reported."""
    block = doc_blocks.Block("drift.md", 1, "redis-cli",
                             "127.0.0.1:6380> RMQ.PUSH drift PRIORITY 5 a b\n(integer) 2\n"
                             "127.0.0.1:6380> RMQ.PUSH drift PRIORITY 5 a\n(integer) 1\n")
    server.client().flushall()
    diffs = replay(block, server.port)
    assert diffs == [("RMQ.PUSH drift PRIORITY 5 a", "(integer) 1", "(integer) 0")]


JAVA_README_TEST = ROOT / "clients/java/rmq-client/src/test/java/dev/rmq/ReadmeExampleTest.java"


def java_readme_example():
    """The lines ReadmeExampleTest runs between its README markers, as the READMEs write
    them (the docs' server for the test's)."""
    source = JAVA_README_TEST.read_text()
    body = source.split("// --- README example: begin")[1].split("\n", 1)[1]
    body = body.split("// --- README example: end")[0].rstrip(" ")
    return textwrap.dedent(body).replace("RmqClient.create(server.uri())",
                                         'RmqClient.create("redis://127.0.0.1:6380")')


@pytest.mark.parametrize("name", ["README.md", "clients/java/README.md"])
def test_the_java_example_is_the_one_the_java_suite_runs(name):
    """Java does not run here: the Java suite runs ReadmeExampleTest, and this holds the
    READMEs' first java block to its text."""
    java = [b for b in doc_blocks.blocks(ROOT / name) if b.lang == "java"]
    assert java and java[0].text == java_readme_example()


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
            "<!-- example: output -->\n```text\n1\n```\n```conf\nport 1\n```\n"
            "<!-- example: gateway -->\n```python\nx\n```\n"
            "<!-- example: resp3 -->\n<!-- example: user ann s3cret -->\n```redis-cli\n"
            "127.0.0.1:6380> PING\nPONG\n(0.50s)\n```\n")
    bs = doc_blocks.blocks("x.md", text)
    assert [(b.lang, b.line) for b in bs] == [("sh", 3), ("redis-cli", 8), ("python", 12),
                                              ("conf", 19), ("python", 23), ("redis-cli", 28)]
    assert bs[0].directives == {"skip": "needs make run"}
    assert bs[1].directives == {"fresh": "", "wait": "50"}
    assert bs[2].output.text == "1\n" and bs[3].directives == {}
    assert bs[4].directives == {"gateway": ""}
    assert bs[5].directives == {"resp3": "", "user": "ann s3cret"}
    assert doc_blocks.session(bs[5]) == [("PING", ["PONG"])]  # redis-cli's timing dropped
    assert doc_blocks.with_address("http://127.0.0.1:9324 redis://127.0.0.1:6380 Redis(6380) "
                                   "-p 6380 63801", 7001, 7002) \
        == "http://127.0.0.1:7002 redis://127.0.0.1:7001 Redis(7001) -p 7001 63801"
    assert doc_blocks.session(bs[1]) == [("PING", ["PONG"])]


def test_a_block_in_a_list_item_is_a_block():
    bs = doc_blocks.blocks("x.md", "- item:\n\n  ```redis-cli\n  127.0.0.1:6380> PING\n  PONG\n"
                                   "  ```\n- next\n")
    assert [(b.lang, b.text, b.indent) for b in bs] == \
        [("redis-cli", "127.0.0.1:6380> PING\nPONG\n", "  ")]


def test_prose_between_a_directive_and_a_block_cancels_the_directive():
    bs = doc_blocks.blocks("x.md", "<!-- example: fresh -->\nsome words\n```sh\nls\n```\n")
    assert bs[0].directives == {}


@pytest.mark.parametrize("text, why", [
    ("```sh\nls\n", "unclosed"),
    ("<!-- example: skip -->\n```sh\nls\n```\n", "needs a reason"),
    ("<!-- example: wait soon -->\n```sh\nls\n```\n", "milliseconds"),
    ("<!-- example: later -->\n```sh\nls\n```\n", "unknown example directive"),
    ("<!-- example: output -->\n```text\n1\n```\n", "must follow"),
    ("<!-- example: user ann -->\n```redis-cli\n```\n", "a name and a password"),
    ("text\n```\n127.0.0.1:6380> PING\nPONG\n```\n", "without a language"),
])
def test_malformed_examples_are_refused(text, why):
    with pytest.raises(doc_blocks.DocError, match=why):
        doc_blocks.blocks("x.md", text)


def test_a_session_needs_prompts():
    with pytest.raises(doc_blocks.DocError, match="before any prompt"):
        doc_blocks.session(doc_blocks.Block("x.md", 1, "redis-cli", "(integer) 1\n"))
    with pytest.raises(doc_blocks.DocError, match="no `host:port>` prompt"):
        doc_blocks.session(doc_blocks.Block("x.md", 1, "redis-cli", "\n"))


@pytest.mark.parametrize("path", doc_files(), ids=_rel)
def test_every_fence_names_its_language(path):
    """An untagged fence would be neither run nor knowingly left out: the extractor refuses it."""
    doc_blocks.blocks(path, name=_rel(path))


def test_masks_cover_clock_values_only():
    assert doc_blocks.mask("(integer) 1765000000123") == "(integer) <unix-ms>"
    assert doc_blocks.mask('3) (integer) 98141157046272 "n98141157046272"') \
        == '3) (integer) <delivery-id> "n<delivery-id>"'
    assert doc_blocks.same("(integer) ~299881", "(integer) 299004")
    assert not doc_blocks.same("(integer) ~299881", "(integer) -2")
    assert not doc_blocks.same("(integer) 5000", "(integer) 4999")
    assert doc_blocks.mask('1) "' + "7a" * 44 + '"') == '1) "<cursor>"'
    assert doc_blocks.mask('1) "' + "e" + "1" * 14 + "e" * 73 + '"') == '1) "<cursor>"'
    keys = '1) "q"\n2) "meta{q}"'
    assert doc_blocks.same(keys, '1) "meta{q}"\n2) "q"', "KEYS *")
    assert not doc_blocks.same(keys, '1) "meta{q}"\n2) "q"', "LRANGE l 0 -1")
    assert not doc_blocks.same(keys, '1) "meta{q}"\n2) "x"', "KEYS *")
    conf = '1) "rmq.retries"\n2) "16"\n3) "rmq.lease-ms"\n4) "30000"'
    assert doc_blocks.same(conf, '1) "rmq.lease-ms"\n2) "30000"\n3) "rmq.retries"\n4) "16"',
                           "CONFIG GET rmq.*")
    assert not doc_blocks.same(conf, '1) "rmq.lease-ms"\n2) "16"\n3) "rmq.retries"\n'
                               '4) "30000"', "CONFIG GET rmq.*")
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
