"""Re-records the redis-cli sessions of Markdown files against a fresh server with the module:
each reply the file shows is replaced by what the server answers, except where the two are
equal once clock values are masked (the doc keeps its example times). Review the diff.

    python3 tests/record_doc_sessions.py docs/tour.md [more.md ...]

The same replay as tests/test_doc_examples.py (directives `fresh`, `wait`, `skip`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import doc_blocks  # noqa: E402
from test_doc_examples import DocServer, session_replies  # noqa: E402


def record(path):
    text = Path(path).read_text()
    lines = text.split("\n")
    doc = DocServer()
    changed = 0
    try:
        blocks = [b for b in doc_blocks.blocks(path, text) if b.lang == "redis-cli"
                  and "skip" not in b.directives]
        replies, ids = {}, {}
        for b in blocks:
            doc.before(b)
            out, before = [], changed
            prompt = next(line for line in b.text.split("\n")
                          if doc_blocks.PROMPT.match(line)).split(">")[0]
            for command, want, got in session_replies(b, doc.server.port, ids):
                if doc_blocks.same(want, got, command):
                    got = want
                else:
                    changed += 1
                out.append(f"{prompt}> {command}")
                out.extend(got.split("\n") if got else [])
            if changed > before:  # a block whose replies all stand is left as written
                replies[b.line] = out
        # rewrite from the last block up, so earlier line numbers stay valid
        for b in sorted((b for b in blocks if b.line in replies), key=lambda b: -b.line):
            n_body = len(b.text.rstrip("\n").split("\n"))
            lines[b.line:b.line + n_body] = [b.indent + line for line in replies[b.line]]
    finally:
        doc.stop()
    Path(path).write_text("\n".join(lines))
    return changed


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(f"{p}: {record(p)} replies re-recorded")
