"""Re-records the redis-cli sessions of Markdown files against fresh servers with the module:
each reply the file shows is replaced by what the server answers, except where the two are
equal once clock values are masked (the doc keeps its example times). Review the diff.

    python3 tests/record_doc_sessions.py docs/tour.md [more.md ...]

The same replay as tests/test_doc_examples.py (its directives: `fresh`, `wait`, `skip`,
`client`, and the blocks on servers of their own). A subscriber's transcript is left as
written (the test compares it)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import doc_blocks  # noqa: E402
from test_doc_examples import (DocServer, Servers, _on_the_doc_server,  # noqa: E402
                               _own_server_groups, own_servers, run_code, session_replies,
                               wait)


def recorded(block, servers, ids):
    """The block's lines with the server's replies, or None when all its replies stand."""
    out, changed = [], 0
    for step, want, got in session_replies(block, servers, ids):
        if doc_blocks.same(servers.addresses(want), got, step.command):
            got = want
        else:
            changed += 1
        out.append(f"{step.who}> {step.command}")
        out.extend(got.split("\n") if got else [])
        if step.timing:
            out.append(step.timing)
    return out if changed else None


def record(path):
    path = Path(path).resolve()
    text = path.read_text()
    lines = text.split("\n")
    replies = {}
    doc = DocServer()
    try:
        ids = {}
        for b in _on_the_doc_server(path):
            doc.before(b)
            if b.lang == "redis-cli":
                replies[b.line] = recorded(b, Servers(doc.server), ids)
    finally:
        doc.stop()
    for group in _own_server_groups(path):
        with own_servers(group[0]) as servers:
            ids = {}
            for b in group:
                wait(b)
                if b.lang == "redis-cli":
                    replies[b.line] = recorded(b, servers, ids)
                else:
                    run_code(b, servers)  # what the sessions after it find
    # rewrite from the last block up, so earlier line numbers stay valid
    blocks = {b.line: b for b in doc_blocks.blocks(path, text)}
    changed = sorted((n for n, new in replies.items() if new is not None), reverse=True)
    for n in changed:
        b = blocks[n]
        n_body = len(b.text.rstrip("\n").split("\n"))
        lines[n:n + n_body] = [b.indent + line for line in replies[n]]
    path.write_text("\n".join(lines))
    return len(changed)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(f"{p}: {record(p)} blocks re-recorded")
