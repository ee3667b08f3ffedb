"""The examples of the README and docs, read as tests (tests/test_doc_examples.py runs them).

A fenced block whose info string names a language this file knows is an example, and runs:
  redis-cli   a recorded session: `host:port> COMMAND` lines, each followed by the reply as
              redis-cli prints it; replayed against a fresh server, reply by reply
  python, js, sh
              run as written (the docs' port 6380 becomes the test server's); a
              `text` block right after it, marked `<!-- example: output -->`, is what it
              must print
Every other block (`text`, `conf`, …) is prose. HTML comments just before a
block (invisible where the Markdown is rendered) steer it:
  <!-- example: skip REASON -->   not run (the reason is required: a long-running server)
  <!-- example: fresh -->         an empty server first (the blocks of one file otherwise
                                  share one server, in order, as a reader's session does)
  <!-- example: wait MS -->       wait MS milliseconds first (the prose says "5 s later")
  <!-- example: output -->        (on a `text` block) the output of the block before it
  <!-- example: gateway -->       an rmq-gateway runs beside the server (one per file), and
                                  the docs' 127.0.0.1:9324 becomes its address
  <!-- example: resp3 -->         (on a redis-cli block) the session speaks RESP3
                                  (`redis-cli -3`)
  <!-- example: user NAME PASS -->  (on a redis-cli block) the session logs in as that ACL
                                  user (the prose above it names the user)
  <!-- example: client NAME [PORT] -->  (on a redis-cli block; one line per client) lines
                                  prompted `NAME>` are typed by another connection, to the
                                  block's server (or to the doc's 127.0.0.1:PORT)
  <!-- example: continues [SECTION] -->  runs after the runnable block before it (or the
                                  last one under the heading whose anchor is SECTION), on
                                  its servers; a python, js or sh block runs with the code
                                  of its language along that chain first (a fragment)
  <!-- example: subscribe -->     (on a redis-cli block after a redis-cli block) a
                                  subscriber's transcript: its SUBSCRIBE or PSUBSCRIBE runs
                                  before the block above, and what it prints while that
                                  session runs must be this
Blocks that need servers of their own run on them, apart from the file's server (with the
blocks that `continue` them):
  <!-- example: server [NAME] -->  a server of its own: the tests' binary, or NAME's
                                  (scripts/install-server's names, e.g. valkey-9.1)
  <!-- example: loadargs ARGS -->  a server of its own, the module loaded with ARGS
                                  (`test-clock 1`)
  <!-- example: replica PORT -->   the doc's 127.0.0.1:PORT (in prompts and code) is a
                                  replica of the block's server; a replica's line waits
                                  until the replica has what the primary's lines wrote
  <!-- example: cluster PORT ... -->  a Redis Cluster of as many primaries (no replicas),
                                  the doc's 127.0.0.1:PORT each, in slot order
In a session, each `host:port>` prompt (and each client's) is one connection of its own.
A command whose reply the doc shows with redis-cli's timing line (`(0.51s)`) blocked:
the lines of other connections after it run while it waits (once the server counts it
blocked), and its reply is read before its connection's next line.
Every fence names its language: one without is refused (a session left untagged would
never be replayed). `text`, `conf`, ... are prose; an `output` block is usually `text`.
Clock-dependent values are masked on both sides before comparing (`mask`), never dropped:
Unix times in milliseconds, stream entry ids, delivery ids (`IDS`, made from the clock),
RMQ.QUEUES cursors (sealed with a key drawn at start), and durations written as `~N` (in
a session, `(integer) ~299881` stands for any count). A delivery id or cursor a session
repeats in a later command is replaced there by the one the server gave in its place.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

RUNNABLE = ("redis-cli", "python", "js", "sh")
DIRECTIVES = ("skip", "fresh", "wait", "output", "gateway", "resp3", "user", "client",
              "continues", "subscribe", "server", "loadargs", "replica", "cluster")
# directives that give a block servers of its own
OWN_SERVERS = ("server", "loadargs", "replica", "cluster")
SERVERS = ("redis-7.0", "redis-8.2", "valkey-8.1", "valkey-9.1")  # scripts/install-server's
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$")  # indented: inside a list item
DIRECTIVE = re.compile(r"^<!--\s*example:\s*(\w+)\s*(.*?)\s*-->\s*$")
PROMPT = re.compile(r"^([\w.-]+:(\d+))(?:\[\d+\])?> ?(.*)$")
TIMING = re.compile(r"^\(\d+\.\d+s\)$")  # redis-cli's line after a command that blocked
DOC_ADDRESS = "127.0.0.1:6380"
DOC_GATEWAY = "127.0.0.1:9324"


@dataclass
class Block:
    path: str
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    directives: dict = field(default_factory=dict)
    output: "Block | None" = None  # the expected-output block that follows, if any
    indent: str = ""  # the fence's (a block in a list item), taken off its lines
    section: str = ""  # the anchor of the heading it is under
    continues: "Block | None" = None  # the block it runs after (`continues`)
    subscriber: "Block | None" = None  # the `subscribe` transcript that follows, if any

    @property
    def clients(self):
        """{NAME: doc port or None} of the block's `client` directives."""
        out = {}
        for entry in self.directives.get("client", []):
            name, *port = entry.split()
            out[name] = int(port[0]) if port else None
        return out

    @property
    def head(self):
        """The first block of the chain of `continues` this block ends."""
        return self.continues.head if self.continues else self

    @property
    def where(self):
        return f"{self.path}:{self.line}"


class DocError(ValueError):
    """A malformed example (unclosed fence, bad directive): the doc must be fixed."""


def blocks(path, text=None, name=None):
    """Every fenced block of a Markdown file, with the directives just before it; an
    `output` block is attached to the block before it instead of standing alone."""
    if text is None:
        text = Path(path).read_text()
    name = name or str(path)
    lines = text.split("\n")
    out, pending, i, section = [], {}, 0, ""
    while i < len(lines):
        line = lines[i]
        heading = HEADING.match(line)
        if heading:
            section = slug(heading.group(1))
        d = DIRECTIVE.match(line.strip())
        if d:
            key, value = d.group(1), d.group(2)
            _check_directive(f"{name}:{i + 1}", key, value)
            if key == "client":
                pending.setdefault("client", []).append(value)
            else:
                pending[key] = value
            i += 1
            continue
        m = FENCE.match(line)
        if not m:
            if line.strip():
                pending = {}
            i += 1
            continue
        indent, fence, lang, start = m.group(1), m.group(2), m.group(3).lower(), i
        if not lang:
            raise DocError(f"{name}:{i + 1}: a code fence without a language: name it "
                           f"({', '.join(RUNNABLE)} run; text, conf, ... do not)")
        body = []
        i += 1
        while i < len(lines) and not lines[i].lstrip().startswith(fence[:3]):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        if i == len(lines):
            raise DocError(f"{name}:{start + 1}: unclosed code fence")
        i += 1
        block = Block(name, start + 1, lang, "\n".join(body) + "\n", pending, indent=indent,
                      section=section)
        pending = {}
        if "output" in block.directives:
            if not out or out[-1].lang not in RUNNABLE or out[-1].lang == "redis-cli":
                raise DocError(f"{block.where}: an output block must follow a python, js or "
                               "sh example")
            out[-1].output = block
            continue
        if "subscribe" in block.directives:
            if block.lang != "redis-cli" or not out or out[-1].lang != "redis-cli":
                raise DocError(f"{block.where}: a subscribe block is a redis-cli block "
                               "right after the redis-cli session it listens to")
            out[-1].subscriber = block
            continue
        if "continues" in block.directives:
            wanted = block.directives["continues"]
            before = [b for b in out if b.lang in RUNNABLE and "skip" not in b.directives
                      and (not wanted or b.section == wanted)]
            if not before:
                raise DocError(f"{block.where}: `example: continues {wanted}` with no "
                               "runnable block before it" + (wanted and " under that heading"))
            if set(block.directives) & set(OWN_SERVERS):
                raise DocError(f"{block.where}: a block that continues another runs on its "
                               "servers: give them to the first block")
            block.continues = before[-1]
        out.append(block)
    return out


def _check_directive(where, key, value):
    """Refuses an unknown directive, or one whose value is not what it takes."""
    words = value.split()
    if key not in DIRECTIVES:
        raise DocError(f"{where}: unknown example directive {key!r}")
    problem = {
        "skip": not value and "needs a reason",
        "wait": not value.isdigit() and "needs milliseconds",
        "user": len(words) != 2 and "needs a name and a password",
        "client": not (1 <= len(words) <= 2 and re.fullmatch(r"[\w-]+", words[0])
                       and all(w.isdigit() for w in words[1:])) and "needs NAME [PORT]",
        "server": value not in ("", *SERVERS) and f"takes one of {', '.join(SERVERS)} or none",
        "loadargs": (not words or len(words) % 2) and "needs name/value pairs",
        "replica": not value.isdigit() and "needs the doc's port of the replica",
        "cluster": not (words and all(w.isdigit() for w in words))
                   and "needs the doc's ports of the primaries",
    }.get(key) or (key in ("fresh", "output", "gateway", "resp3", "subscribe")
                   and value and "takes no value")
    if problem:
        raise DocError(f"{where}: `example: {key}` {problem}")


@dataclass
class Step:
    who: str  # the prompt's address ("127.0.0.1:6380") or a client's name
    command: str
    reply: list  # the reply's lines, as the doc shows them
    timing: str = ""  # redis-cli's line for a command that blocked (`(0.51s)`), if shown


def steps(block):
    """A redis-cli block as [Step], each line typed at a prompt with the reply after it."""
    out, clients = [], block.clients
    for n, line in enumerate(block.text.rstrip("\n").split("\n")):
        m = PROMPT.match(line)
        who, _, name_line = line.partition("> ")
        if m:
            out.append(Step(m.group(1), m.group(3), []))
        elif who in clients:
            out.append(Step(who, name_line, []))
        elif not out and not line.strip():
            continue
        elif not out:
            raise DocError(f"{block.where}: line {n + 1} of the session comes before any "
                           f"prompt: {line!r}")
        elif TIMING.match(line):
            out[-1].timing = line  # how long it blocked: the clock's, not the reply's
        else:
            out[-1].reply.append(line)
    if not out:
        raise DocError(f"{block.where}: a redis-cli block with no `host:port>` prompt")
    return out


def doc_port(who):
    """The doc's port of a prompt's address (None for a client's name)."""
    m = PROMPT.match(who + ">")
    return int(m.group(2)) if m else None


# RMQ.POP ... IDS: (ms since 2023-11-14) << 10, then counting
DELIVERY_ID = re.compile(r"(?<!\d)\d{14,15}(?!\d)")
# RMQ.QUEUES: sealed with a key the server draws when it starts
CURSOR = re.compile(r"\b[0-9a-f]{64,}\b")
# values a session's later commands repeat from its replies (session_replies maps them)
OPAQUE = re.compile(f"{CURSOR.pattern}|{DELIVERY_ID.pattern}")  # a cursor may hold 14 digits
_MASKS = (
    (re.compile(r"\b1[6-9]\d{11}-\d+\b"), "<entry-id>"),
    (re.compile(r"\b1[6-9]\d{11}\b"), "<unix-ms>"),
    (CURSOR, "<cursor>"),
    (DELIVERY_ID, "<delivery-id>"),
    (re.compile(r"~\d+"), "~<n>"),
)


def mask(text):
    """The text with the values that depend on the clock replaced by placeholders."""
    for pattern, placeholder in _MASKS:
        text = pattern.sub(placeholder, text)
    return text


def same(want, got, command=""):
    """Whether a reply is the one the doc shows, clock values masked; the doc's `~N`
    stands for any number the server gives there. KEYS, ACL CAT and CONFIG GET answer in the order
    of the server's hash table (it differs from run to run): their elements (CONFIG GET's
    name/value pairs) are compared in any order."""
    verb = " ".join(command.upper().split()[:2])
    if verb.startswith("KEYS") or verb in ("CONFIG GET", "ACL CAT"):
        want, got = _sorted_flat(want, 2 if verb == "CONFIG GET" else 1), \
            _sorted_flat(got, 2 if verb == "CONFIG GET" else 1)
    pattern = re.escape(mask(want)).replace(re.escape("~<n>"), r"~?(?:\d+|<n>)")
    return re.fullmatch(pattern, mask(got).replace("~<n>", "<n>")) is not None


_ELEMENT = re.compile(r"^\s*\d+\) (.*)$")


def _sorted_flat(reply, width):
    """A flat array reply's elements, in groups of `width`, sorted (else the reply as is)."""
    items = [_ELEMENT.match(line) for line in reply.split("\n")]
    if not all(items):
        return reply
    values = [m.group(1) for m in items]
    groups = sorted(values[i:i + width] for i in range(0, len(values), width))
    return "\n".join(" ".join(g) for g in groups)


def with_address(code, port, gateway_port=None, others=None):
    """An example's code pointed at the test server (and gateway) instead of the docs'
    port 6380 (and 9324), and at the test's servers for the doc's ports in `others`
    ({doc port: port}: a replica, cluster nodes), however the example spells the address."""
    ports = {**(others or {}), 6380: port}
    if gateway_port is not None:
        ports[9324] = gateway_port
    pattern = re.compile(r"\b(" + "|".join(str(p) for p in ports) + r")\b")
    return pattern.sub(lambda m: str(ports[int(m.group(1))]), code)


# --- links ------------------------------------------------------------------------------
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`|\*|_(?=\w)|(?<=\w)_", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    seen, out = {}, set()
    in_fence = False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        m = None if in_fence else HEADING.match(line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def relative_links(text):
    """The link targets of a Markdown text outside code blocks and inline code."""
    out, in_fence = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        for target in LINK.findall(line):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                out.append(target)
    return out


def broken_links(path, root):
    """[(target, why)] for each relative link of `path` that leads nowhere."""
    path, root = Path(path), Path(root).resolve()
    text = path.read_text()
    bad = []
    for target in relative_links(text):
        file_part, _, anchor = target.partition("#")
        dest = path if not file_part else (path.parent / file_part)
        try:
            resolved = dest.resolve()
        except OSError as e:
            bad.append((target, str(e)))
            continue
        if root not in resolved.parents and resolved != root:
            bad.append((target, "points outside the repository"))
        elif not resolved.exists():
            bad.append((target, "no such file"))
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            bad.append((target, f"no heading #{anchor} in {resolved.relative_to(root)}"))
    return bad
