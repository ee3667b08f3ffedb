"""Examples are tests: every runnable block of the README and the docs (tests/doc_blocks.py
says which and how) runs here against a server with the module (one for all the files,
emptied before each; a block asking for a replica, a cluster, another server or load
arguments, with the blocks continuing it, on servers of its own, a test of its own), and
every relative link of the docs leads to a file and heading of this repository."""

import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import shlex
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

import doc_blocks
from cluster_support import Cluster
from conftest import start_server
from gateway_support import Gateway
from server_support import Server, poll, wait_for, wait_replica_synced

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


def _own(block):
    return bool(set(block.head.directives) & set(doc_blocks.OWN_SERVERS))


def _on_the_doc_server(path):
    return [b for b in _runnable(path) if not _own(b)]


def _own_server_groups(path):
    """[[block, ...]]: each block with servers of its own, then the blocks continuing it."""
    groups = {}
    for b in _runnable(path):
        if _own(b):
            groups.setdefault(b.head.line, []).append(b)
    return list(groups.values())


def _has_examples(path):
    try:
        return bool(_on_the_doc_server(path))
    except doc_blocks.DocError:
        return True  # a malformed doc: its test reports why


def _groups_of(path):
    try:
        return [(path, g[0].line) for g in _own_server_groups(path)]
    except doc_blocks.DocError:
        return []  # reported by test_examples_run_as_written


EXAMPLE_DOCS = [p for p in doc_files() if _has_examples(p)]
OWN_SERVER_GROUPS = [g for p in doc_files() for g in _groups_of(p)]


class RedisCli:
    """One `redis-cli` at its prompt for a whole session (one connection, as a reader has;
    in RESP3 or as an ACL user if the block's directives say so). `send` types lines and
    `receive` gives what it printed for them: each is followed by an ECHO of a mark, whose
    reply ends the answer."""

    MARK = "rmq-doc-example-answered"

    def __init__(self, port, directives):
        args = ["-3"] if "resp3" in directives else []
        if "user" in directives:
            name, password = directives["user"].split()
            args += ["--user", name, "--pass", password, "--no-auth-warning"]
        self._p = subprocess.Popen([_cli(), "-h", "127.0.0.1", "-p", str(port), "--no-raw",
                                    *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        self._buf = b""

    def send(self, lines):
        self._p.stdin.write(f"{lines}\nECHO {self.MARK}\n".encode())
        self._p.stdin.flush()

    def printing(self):
        """Whether it has printed something not read yet (a blocked command answered)."""
        return bool(self._buf) or bool(select.select([self._p.stdout], [], [], 0)[0])

    def receive(self, timeout=30):
        end, deadline = f'"{self.MARK}"\n'.encode(), time.monotonic() + timeout
        while True:
            i = self._buf.find(end)
            if i == 0 or (i > 0 and self._buf[i - 1:i] == b"\n"):
                out, self._buf = self._buf[:i], self._buf[i + len(end):]
                # a verbatim string (INFO) ends its lines with \r\n; a reader sees lines
                return out.decode(errors="replace").replace("\r\n", "\n").rstrip("\n")
            left = deadline - time.monotonic()
            ready = select.select([self._p.stdout], [], [], max(left, 0))[0] if left > 0 else []
            chunk = os.read(self._p.stdout.fileno(), 65536) if ready else b""
            if not chunk:  # no answer in time, or redis-cli ended
                return self._buf.decode(errors="replace") + f"\n(no answer within {timeout} s)"
            self._buf += chunk

    def run(self, lines, timeout=30):
        self.send(lines)
        return self.receive(timeout)

    def close(self):
        self._p.stdin.close()
        try:
            self._p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._p.kill()
            self._p.wait()
        self._p.stdout.close()


def _cli():
    return shutil.which("redis-cli") or "redis-cli"


def _runs(block):
    """The block's session as runs of steps typed at once on one connection: a transaction
    (MULTI ... EXEC or DISCARD) is one run, every other command its own."""
    runs, open_run = [], False
    for step in doc_blocks.steps(block):
        if not open_run:
            runs.append([])
        elif step.who != runs[-1][-1].who:
            raise doc_blocks.DocError(f"{block.where}: {step.who} types {step.command!r} "
                                      f"inside {runs[-1][-1].who}'s transaction")
        runs[-1].append(step)
        verb = step.command.split()[0].upper() if step.command.split() else ""
        open_run = verb == "MULTI" or (open_run and verb not in ("EXEC", "DISCARD"))
    return runs


class Servers:
    """The servers a block's connections go to, by the doc's port of each prompt: `main`
    (the doc's 6380, and every address of a block on one server), a replica (`replica
    PORT`) and a cluster's primaries (`cluster PORT ...`) in `by_port`; `primary_of` maps a
    replica to its primary."""

    def __init__(self, main, by_port=None, primary_of=None):
        self.main, self.by_port, self.primary_of = main, by_port or {}, primary_of or {}

    def of(self, block, who):
        port = doc_blocks.doc_port(who)
        if port is None:  # a client's name: to its port, else to the block's server
            port = block.clients[who]
        if port is None:
            return self.main
        if port in self.by_port:
            return self.by_port[port]
        if "cluster" in block.head.directives:
            raise doc_blocks.DocError(f"{block.where}: 127.0.0.1:{port} is none of the "
                                      "cluster's primaries (`example: cluster PORT ...`)")
        return self.main

    def addresses(self, reply):
        """A reply the doc shows, with the addresses of its replica or cluster nodes (a
        MOVED error names one) those of the test's servers."""
        def test_address(m):
            server = self.by_port.get(int(m.group(1)))
            return f"127.0.0.1:{server.port}" if server else m.group()
        return re.sub(r"\b127\.0\.0\.1:(\d+)\b", test_address, reply)

    def others(self):
        """{doc port: port} for the code of examples."""
        return {doc: s.port for doc, s in self.by_port.items()}

    def caught_up(self, server):
        """Waits until a replica has all its primary wrote (a reader's replica catches up
        in milliseconds; the doc shows it after the primary's lines)."""
        primary = self.primary_of.get(server)
        if primary is None:
            return
        offset = primary.conn().info("replication")["master_repl_offset"]
        wait_for(lambda: server.conn().info("replication").get("slave_repl_offset", -1)
                 >= offset, 10, what=f"the replica to reach offset {offset}")


def _blocked_clients(server):
    return server.conn().info("clients")["blocked_clients"]


def session_replies(block, servers, ids=None):
    """[(step, the doc's reply, the server's reply)] for each step of a redis-cli block, in
    the doc's order. Each prompt (address or client) is a connection of its own. Inside a
    transaction each command but the last answers one line (OK, QUEUED or an error); the
    last (EXEC) answers the rest. A command the doc shows blocking is sent, and once the
    server counts it blocked the other connections' lines go on; its reply is read before
    its connection's next line (or at the end). A delivery id or cursor the doc shows in a
    reply stands, in the commands after it, for the one the server gave in its place
    (`ids`, the doc's to the server's, lasts as long as the caller keeps it: one file)."""
    ids = {} if ids is None else ids
    got, clis, waiting = {}, {}, {}  # step index -> reply; who -> RedisCli; who -> run
    runs = _runs(block)
    order = {id(step): n for n, step in enumerate(s for run in runs for s in run)}

    def read(who, run):
        lines = [line for line in clis[who].receive().split("\n")
                 if not doc_blocks.TIMING.match(line)]
        for n, step in enumerate(run):
            reply = "\n".join(lines[n:n + 1] if n < len(run) - 1 else lines[n:])
            want = "\n".join(step.reply).rstrip("\n")
            theirs = [m.group() for m in doc_blocks.OPAQUE.finditer(reply)]
            mine = [m.group() for m in doc_blocks.OPAQUE.finditer(want)]
            if len(theirs) == len(mine):
                ids.update(zip(mine, theirs))
            got[order[id(step)]] = (step, want, reply)

    try:
        for run in runs:
            who = run[0].who
            if who in waiting:
                read(who, waiting.pop(who))
            server = servers.of(block, who)
            if who not in clis:
                clis[who] = RedisCli(server.port, block.directives)
            servers.caught_up(server)
            lines = "\n".join(doc_blocks.OPAQUE.sub(lambda m: ids.get(m.group(), m.group()),
                                                    step.command) for step in run)
            if not run[-1].timing:
                clis[who].send(lines)
                read(who, run)
                continue
            before = _blocked_clients(server)
            clis[who].send(lines)
            poll(lambda: _blocked_clients(server) > before or clis[who].printing(), 10)
            waiting[who] = run
        for who, run in list(waiting.items()):
            read(who, run)
    finally:
        for cli in clis.values():
            cli.close()
    return [got[n] for n in sorted(got)]


def replay(block, servers, ids=None):
    """[(command, expected, got)] for each reply of a redis-cli block that differs."""
    return [(step.command, want, got) for step, want, got in session_replies(block, servers, ids)
            if not doc_blocks.same(servers.addresses(want), got, step.command)]


class Subscriber:
    """A `redis-cli SUBSCRIBE ...` (or PSUBSCRIBE) started before the session it listens to;
    `transcript()` is what it printed by the time it printed as many lines as the doc
    shows (or 10 s passed), and a moment after, for a message the doc does not show."""

    def __init__(self, block, servers):
        steps = doc_blocks.steps(block)
        if len(steps) != 1:
            raise doc_blocks.DocError(f"{block.where}: a subscriber types one line, its "
                                      f"SUBSCRIBE or PSUBSCRIBE (not {len(steps)})")
        (step,) = steps
        self.command, self.want = step.command, "\n".join(step.reply).rstrip("\n")
        server = servers.of(block, step.who)
        before = self._subscribed(server)
        self._p = subprocess.Popen([_cli(), "-h", "127.0.0.1", "-p", str(server.port),
                                    "--no-raw", *shlex.split(step.command)],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        poll(lambda: self._subscribed(server) > before or self._p.poll() is not None, 10)

    @staticmethod
    def _subscribed(server):
        return sum(1 for c in server.conn().client_list()
                   if int(c.get("sub", 0)) + int(c.get("psub", 0)) > 0)

    def transcript(self, timeout=10, grace=0.3):
        buf, want_lines = b"", self.want.count("\n") + 1
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if buf.count(b"\n") >= want_lines:
                left = min(left, grace)
            ready = select.select([self._p.stdout], [], [], max(left, 0))[0] if left > 0 else []
            chunk = os.read(self._p.stdout.fileno(), 65536) if ready else b""
            if not chunk:
                break
            buf += chunk
        self._p.terminate()
        self._p.wait(timeout=10)
        self._p.stdout.close()
        return buf.decode(errors="replace").rstrip("\n")


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
        wait(block)

    def stop(self):
        self.server.stop()


def wait(block):
    if "wait" in block.directives:
        time.sleep(int(block.directives["wait"]) / 1000)


def _install_server(name):
    """The binary of a server of the test matrix (scripts/install-server)."""
    out = subprocess.run(["bash", str(ROOT / "scripts" / "install-server"), name],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        pytest.fail(f"scripts/install-server {name}: {out.stderr}", pytrace=False)
    return out.stdout.strip()


@contextmanager
def own_servers(head):
    """The servers a block with `server`, `loadargs`, `replica` or `cluster` runs on (and
    the blocks that continue it), stopped by pid after."""
    d = head.directives
    args = d.get("loadargs", "").split()
    binary = _install_server(d["server"]) if d.get("server") else None
    started = []
    try:
        if "cluster" in d:
            cluster = Cluster(masters=len(d["cluster"].split()), replicas=0, module_args=args,
                              tag="rmq-doc")
            started.append(cluster)
            cluster.start()
            nodes = [s for s, _, slots in sorted(cluster.primaries(), key=lambda p: p[2])]
            servers = Servers(nodes[0], dict(zip(map(int, d["cluster"].split()), nodes)))
        else:
            # a replica syncs at once, not after the default 5 s of waiting for others
            main = Server(conf=["--repl-diskless-sync-delay", 0], module_args=args,
                          binary=binary, tag="rmq-doc")
            started.append(main)
            main.start()
            servers = Servers(main)
            if "replica" in d:
                replica = Server(conf=["--replicaof", "127.0.0.1", main.port],
                                 module_args=args, binary=binary, tag="rmq-doc")
                started.append(replica)
                replica.start()
                wait_replica_synced(main.conn(), replica.conn())
                servers = Servers(main, {int(d["replica"]): replica}, {replica: main})
        yield servers
    finally:
        for s in reversed(started):
            s.stop()


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


def _chain(block):
    """The blocks whose code runs for `block`: those of its language along the chain of
    blocks it continues, then it."""
    chain, b = [], block
    while b is not None:
        if b.lang == block.lang:
            chain.insert(0, b)
        b = b.continues
    return chain


def run_code(block, servers, gateway_port=None):
    """Runs a python, js or sh example (after the code it continues); returns (exit
    status, what it printed on stdout, on stderr)."""
    code = doc_blocks.with_address("\n".join(b.text for b in _chain(block)), servers.main.port,
                                   gateway_port, servers.others())
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
            return None, "", f"did not exit within 120 s; output so far: {e.stdout!r}"
    return out.returncode, out.stdout, out.stderr


def check_session(block, servers, ids=None):
    """The differences between a redis-cli block (and the subscriber listening to it) and
    what the servers answer, as failure texts."""
    subscriber = Subscriber(block.subscriber, servers) if block.subscriber else None
    try:
        diffs = replay(block, servers, ids)
    finally:
        heard = subscriber.transcript() if subscriber else None
    failures = [f"{block.where}: {command}\n  doc says:\n{want}\n  server says:\n{got}"
                for command, want, got in diffs]
    if subscriber and not doc_blocks.same(subscriber.want, heard):
        failures.append(f"{block.subscriber.where}: {subscriber.command}\n  doc says:\n"
                        f"{subscriber.want}\n  the subscriber printed:\n{heard}")
    return failures


def check_code(block, servers, gateway_port=None):
    code, output, errors = run_code(block, servers, gateway_port)
    if code != 0:
        return [f"{block.where}: {block.lang} example exited {code}:\n{output}{errors}"]
    outputs = [b.output for b in _chain(block) if b.output is not None]
    want = "".join(o.text for o in outputs).rstrip("\n")
    # its output is what it prints on stdout (a runtime's warnings on stderr are not)
    if block.output is not None and not doc_blocks.same(want, output.rstrip("\n")):
        return [f"{block.where}: printed\n{output}{errors}\n  the doc says "
                f"({', '.join(o.where for o in outputs)}):\n{want}"]
    return []


def run_blocks(blocks, servers, before=wait):
    """Runs the blocks in order on `servers` (`before(block)` first: its directives); the
    failures, as texts."""
    failures, gateway, ids = [], None, {}
    try:
        for block in blocks:
            if "gateway" in block.directives and gateway is None:
                gateway = Gateway(servers.main).start()
            before(block)
            if block.lang == "redis-cli":
                failures += check_session(block, servers, ids)
            else:
                failures += check_code(block, servers, gateway and gateway.port)
    finally:
        if gateway is not None:
            gateway.stop()
    return failures


@pytest.fixture(scope="module")
def doc_server():
    doc = DocServer()
    yield doc
    doc.stop()


@pytest.mark.parametrize("path", EXAMPLE_DOCS, ids=_rel)
def test_examples_run_as_written(path, doc_server):
    """The file's blocks, in order, on the one doc server (emptied first)."""
    doc_server.fresh()
    failures = run_blocks(_on_the_doc_server(path), Servers(doc_server.server),
                          doc_server.before)
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("path, line", OWN_SERVER_GROUPS,
                         ids=[f"{_rel(p)}:{n}" for p, n in OWN_SERVER_GROUPS])
def test_examples_on_servers_of_their_own(path, line):
    """A block with `server`, `loadargs`, `replica` or `cluster`, and the blocks that
    continue it, on the servers it asks for."""
    (group,) = [g for g in _own_server_groups(path) if g[0].line == line]
    with own_servers(group[0]) as servers:
        failures = run_blocks(group, servers)
    assert not failures, "\n\n".join(failures)


def test_a_drifted_example_fails(server):
    """The replay is a real comparison: a reply changed in the doc is reported."""
    block = doc_blocks.Block("drift.md", 1, "redis-cli",
                             "127.0.0.1:6380> RMQ.PUSH drift PRIORITY 5 a b\n(integer) 2\n"
                             "127.0.0.1:6380> RMQ.PUSH drift PRIORITY 5 a\n(integer) 1\n")
    server.client().flushall()
    diffs = replay(block, Servers(server))
    assert diffs == [("RMQ.PUSH drift PRIORITY 5 a", "(integer) 1", "(integer) 0")]


def _doc(text):
    """The runnable blocks of a Markdown text."""
    return [b for b in doc_blocks.blocks("drift.md", text) if b.lang in doc_blocks.RUNNABLE]


def _drifted(text, right, wrong):
    """The text as written and with one reply changed (`right` to `wrong`)."""
    assert text.count(right) == 1
    return text, text.replace(right, wrong)


def test_a_drifted_session_of_two_connections_fails(server):
    """Client A's transaction is broken by B's write between its WATCH and EXEC, and a pop
    blocked on A is served by B's push: a changed reply of either connection is reported."""
    good, bad = _drifted(
        "<!-- example: client A -->\n```redis-cli\n"
        "A> WATCH q\nOK\n127.0.0.1:6380> RMQ.PUSH q DELAY 0 m\n(integer) 1\n"
        "A> MULTI\nOK\nA> PING\nQUEUED\nA> EXEC\n(nil)\n"
        "A> RMQ.POP w BLOCK 0\n1) 1) \"late\"\n   2) (integer) 1\n(0.20s)\n"
        "127.0.0.1:6380> RMQ.PUSH w DELAY 0 late\n(integer) 1\n```\n",
        'A> EXEC\n(nil)', 'A> EXEC\n1) PONG')
    server.client().flushall()
    assert replay(_doc(good)[0], Servers(server)) == []
    server.client().flushall()
    assert replay(_doc(bad)[0], Servers(server)) == [("EXEC", "1) PONG", "(nil)")]
    server.client().flushall()
    late = bad.replace('1) "late"', '1) "early"').replace("1) PONG", "(nil)")
    assert replay(_doc(late)[0], Servers(server)) == [
        ("RMQ.POP w BLOCK 0", '1) 1) "early"\n   2) (integer) 1',
         '1) 1) "late"\n   2) (integer) 1')]


@pytest.mark.parametrize("text, right, wrong, failure", [
    # a replica: its line waits until it has the primary's push
    ("<!-- example: replica 6381 -->\n```redis-cli\n127.0.0.1:6380> RMQ.PUSH q DELAY 0 a b\n"
     "(integer) 2\n127.0.0.1:6381> ZCARD q\n(integer) 2\n127.0.0.1:6381> RMQ.POP q\n"
     "(error) READONLY You can't write against a read only replica.\n```\n",
     "ZCARD q\n(integer) 2", "ZCARD q\n(integer) 3", "ZCARD q\n  doc says:\n(integer) 3\n"
     "  server says:\n(integer) 2"),
    # the module's load arguments
    ("<!-- example: loadargs test-clock 1 -->\n```redis-cli\n"
     "127.0.0.1:6380> RMQ.TESTCLOCK SET 5000\n(integer) 5000\n```\n",
     "(integer) 5000\n```", "(integer) 5001\n```", "SET 5000\n  doc says:\n(integer) 5001\n"
     "  server says:\n(integer) 5000"),
    # a cluster's primaries, each its own prompt (orders_13 is in slot 13273, the third's;
    # the doc's addresses in a reply stand for the test's)
    ("<!-- example: cluster 7101 7102 7103 -->\n```redis-cli\n"
     "127.0.0.1:7103> RMQ.PUSH orders_13 DELAY 0 o1\n(integer) 1\n"
     "127.0.0.1:7101> RMQ.PUSH orders_13 DELAY 0 o1\n"
     "(error) MOVED 13273 127.0.0.1:7103\n```\n",
     "MOVED 13273 127.0.0.1:7103", "MOVED 13273 127.0.0.1:7102",
     "o1\n  doc says:\n(error) MOVED 13273 127.0.0.1:7102\n  server says:\n"
     "(error) MOVED 13273 127.0.0.1:{7103}"),
], ids=["replica", "loadargs", "cluster"])
def test_a_drifted_session_on_servers_of_its_own_fails(text, right, wrong, failure):
    """Run as written on the servers it asks for, the session passes; changed, it fails
    (`failure` ends the report; {7103} stands for the test's port of the doc's 7103)."""
    good, bad = _drifted(text, right, wrong)
    (block,) = _doc(good)
    with own_servers(block) as servers:
        assert run_blocks(_doc(good), servers) == []
        for primary in {servers.main, *servers.by_port.values()} - set(servers.primary_of):
            primary.conn().flushall()
        failures = run_blocks(_doc(bad), servers)
    for doc, test in servers.by_port.items():
        failure = failure.replace(f"{{{doc}}}", str(test.port))
    assert len(failures) == 1 and failures[0].endswith(failure)


def test_a_drifted_subscriber_fails(server):
    """The subscriber's transcript is what it printed while the session ran: a message
    changed, or one the session no longer publishes, is reported."""
    good, bad = _drifted(
        "```redis-cli\n127.0.0.1:6380> PUBLISH news hi\n(integer) 1\n```\n"
        "<!-- example: subscribe -->\n```redis-cli\n127.0.0.1:6380> SUBSCRIBE news\n"
        "Reading messages... (press Ctrl-C to quit)\n1) \"subscribe\"\n2) \"news\"\n"
        "3) (integer) 1\n1) \"message\"\n2) \"news\"\n3) \"hi\"\n```\n", '3) "hi"', '3) "ho"')
    assert check_session(_doc(good)[0], Servers(server)) == []
    (failure,) = check_session(_doc(bad)[0], Servers(server))
    assert "SUBSCRIBE news" in failure and '3) "ho"' in failure and '3) "hi"' in failure
    two = good.replace("SUBSCRIBE news\n", "SUBSCRIBE news\n127.0.0.1:6380> PING\n")
    with pytest.raises(doc_blocks.DocError, match="a subscriber types one line"):
        check_session(_doc(two)[0], Servers(server))


def test_a_drifted_fragment_fails(server):
    """A fragment runs after the code it continues: its output is checked."""
    good, bad = _drifted("## Start\n```python\nx = 20\nprint(x)\n```\n"
                         "<!-- example: output -->\n```text\n20\n```\n"
                         "<!-- example: continues start -->\n```python\nprint(x + 1)\n```\n"
                         "<!-- example: output -->\n```text\n21\n```\n", "21", "22")
    assert run_blocks(_doc(good), Servers(server)) == []
    (failure,) = run_blocks(_doc(bad), Servers(server))
    assert failure.startswith("drift.md:11: printed\n20\n21\n") and "says" in failure \
        and failure.endswith(":\n20\n22")


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
    # redis-cli's timing is not the reply
    assert doc_blocks.steps(bs[5]) == [doc_blocks.Step("127.0.0.1:6380", "PING", ["PONG"],
                                                       "(0.50s)")]
    assert doc_blocks.with_address("http://127.0.0.1:9324 redis://127.0.0.1:6380 Redis(6380) "
                                   "-p 6380 63801", 7001, 7002) \
        == "http://127.0.0.1:7002 redis://127.0.0.1:7001 Redis(7001) -p 7001 63801"
    assert doc_blocks.steps(bs[1]) == [doc_blocks.Step("127.0.0.1:6380", "PING", ["PONG"])]


def test_connections_servers_and_continued_blocks():
    text = ("## Setup\n<!-- example: replica 6381 -->\n```python\nx = 1\n```\n"
            "<!-- example: client B 7103 -->\n<!-- example: client worker-1 -->\n"
            "<!-- example: continues setup -->\n```redis-cli\n127.0.0.1:6381> RMQ.POP q BLOCK 0\n"
            "(nil)\n(0.51s)\nB> PING\nPONG\nworker-1> PING\nPONG\n```\n"
            "<!-- example: subscribe -->\n```redis-cli\n127.0.0.1:6380> SUBSCRIBE c\nx\n```\n"
            "## Later\n<!-- example: continues -->\n```python\nprint(x)\n```\n")
    setup, session, fragment = doc_blocks.blocks("x.md", text)
    assert setup.directives == {"replica": "6381"} and setup.section == "setup"
    assert session.clients == {"B": 7103, "worker-1": None}
    assert session.continues is setup and session.head is setup
    assert fragment.continues is session and fragment.head is setup
    assert [_chain(fragment)[0].text, _chain(fragment)[1].text] == ["x = 1\n", "print(x)\n"]
    assert doc_blocks.steps(session) == [
        doc_blocks.Step("127.0.0.1:6381", "RMQ.POP q BLOCK 0", ["(nil)"], "(0.51s)"),
        doc_blocks.Step("B", "PING", ["PONG"]), doc_blocks.Step("worker-1", "PING", ["PONG"])]
    assert session.subscriber.directives == {"subscribe": ""}
    assert doc_blocks.with_address("6380 6381 7101", 1, None, {6381: 2, 7101: 3}) == "1 2 3"


def test_a_session_refuses_lines_it_cannot_place():
    (inside,) = _doc("<!-- example: client B -->\n```redis-cli\n127.0.0.1:6380> MULTI\nOK\n"
                     "B> PING\nPONG\n```\n")
    with pytest.raises(doc_blocks.DocError, match="inside 127.0.0.1:6380's transaction"):
        _runs(inside)
    (elsewhere,) = _doc("<!-- example: cluster 7101 -->\n```redis-cli\n127.0.0.1:7109> PING\n"
                        "PONG\n```\n")
    with pytest.raises(doc_blocks.DocError, match="none of the cluster's primaries"):
        Servers("main", {7101: "node"}).of(elsewhere, "127.0.0.1:7109")
    assert Servers("main", {7101: "node"}).of(inside, "B") == "main"


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
    ("<!-- example: client -->\n```redis-cli\n```\n", "needs NAME"),
    ("<!-- example: client b c -->\n```redis-cli\n```\n", "needs NAME"),
    ("<!-- example: replica -->\n```redis-cli\n```\n", "port of the replica"),
    ("<!-- example: cluster 7101 x -->\n```redis-cli\n```\n", "ports of the primaries"),
    ("<!-- example: loadargs test-clock -->\n```redis-cli\n```\n", "name/value pairs"),
    ("<!-- example: server redis-6 -->\n```redis-cli\n```\n", "takes one of"),
    ("<!-- example: fresh now -->\n```redis-cli\n```\n", "takes no value"),
    ("<!-- example: continues -->\n```sh\nls\n```\n", "no runnable block before"),
    ("```sh\nls\n```\n<!-- example: continues nowhere -->\n```sh\nls\n```\n",
     "under that heading"),
    ("```sh\nls\n```\n<!-- example: continues -->\n<!-- example: server -->\n```sh\nls\n```\n",
     "give them to the first block"),
    ("```sh\nls\n```\n<!-- example: subscribe -->\n```redis-cli\n```\n",
     "right after the redis-cli session"),
    ("text\n```\n127.0.0.1:6380> PING\nPONG\n```\n", "without a language"),
])
def test_malformed_examples_are_refused(text, why):
    with pytest.raises(doc_blocks.DocError, match=why):
        doc_blocks.blocks("x.md", text)


def test_a_session_needs_prompts():
    with pytest.raises(doc_blocks.DocError, match="before any prompt"):
        doc_blocks.steps(doc_blocks.Block("x.md", 1, "redis-cli", "(integer) 1\n"))
    with pytest.raises(doc_blocks.DocError, match="no `host:port>` prompt"):
        doc_blocks.steps(doc_blocks.Block("x.md", 1, "redis-cli", "\n"))


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
