"""Showing message contents and times safely, whatever their bytes."""

from __future__ import annotations

import base64
import datetime as dt
import re
from typing import Any, Optional

#: Shown as escapes: control characters but tab and line feed, and the characters that
#: change the direction or flow of text (they could disguise what is shown)...
_UNSEEN = r"\x0b-\x1f\x7f\u0080-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(rf"[\x00-\x08{_UNSEEN}]")
#: ... and in content that is not UTF-8, tab and line feed too.
_BINARY_CONTROL = re.compile(rf"[\x00-\x0a{_UNSEEN}]")


def as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogateescape")


def url_name(name: Any) -> str:
    """A queue name for a URL (the web server decodes paths as UTF-8, so a name that is not
    UTF-8 cannot be linked exactly)."""
    return as_bytes(name).decode("utf-8", "replace")


def show(value: Any) -> str:
    """Readable text: UTF-8 as it is, invalid bytes as \\xNN, control and direction-changing
    characters as escapes too (HTML escaping is the template's job)."""
    raw = as_bytes(value)
    text = raw.decode("utf-8", "backslashreplace")
    # in binary content a line break is one more byte, not layout
    pattern = _CONTROL if is_utf8(raw) else _BINARY_CONTROL
    return pattern.sub(lambda m: _escape(m.group()), text)


#: What a Prometheus label escapes: the backslash itself (so that an escape in the label
#: always stands for the byte or character it names), bytes that are not UTF-8 (surrogates
#: after decoding), and what show() escapes, CR and NUL included (prometheus_client would
#: write them raw and its own parser refuse the scrape).
_LABEL_ESCAPE = re.compile(rf"[\\\udc80-\udcff\x00-\x0a{_UNSEEN}]")


def label(value: Any) -> str:
    """A queue name as a Prometheus label: readable, and one label per name (b"\\xff" and
    the four characters `\\xff` differ: the latter's backslash is doubled)."""
    text = as_bytes(value).decode("utf-8", "surrogateescape")
    return _LABEL_ESCAPE.sub(lambda m: _label_escape(m.group()), text)


def _label_escape(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    if "\udc80" <= ch <= "\udcff":
        return f"\\x{ord(ch) - 0xdc00:02x}"
    return _escape(ch)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def is_plain(value: Any) -> bool:
    """Whether show() gives the content back unchanged (valid UTF-8, no control chars)."""
    raw = as_bytes(value)
    return is_utf8(raw) and not _CONTROL.search(raw.decode("utf-8"))


def hexdump(value: Any, limit: int = 4096) -> str:
    b = as_bytes(value)
    more = "…" if len(b) > limit else ""
    return b[:limit].hex(" ") + more


def message_json(value: Any) -> dict[str, Any]:
    """A message in the JSON API: `text` as show() makes it, `base64` the exact bytes."""
    b = as_bytes(value)
    return {"text": show(b), "base64": base64.b64encode(b).decode("ascii"), "plain": is_plain(b)}


def ms_time(ms: Optional[Any]) -> str:
    """A Unix-ms time as ISO 8601 UTC (to the millisecond); one past what datetime can
    show (the module takes times up to 2^53 ms, year 287396) as its number of ms."""
    if ms is None or ms == b"":
        return "–"
    value = int(float(ms))
    try:
        t = EPOCH + dt.timedelta(milliseconds=value)
    except OverflowError:
        if value > 0:
            return f"{value} ms after 1970 (past year 9999)"
        return f"{-value} ms before 1970 (before year 1)"
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def duration(seconds: float) -> str:
    """A span of time the same way everywhere: 0.4 s, 12.0 s, 3 min 05 s, 2 h 10 min,
    4 d 03 h."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86400} d {whole % 86400 // 3600:02d} h"


def lag(ms: Optional[Any], kind: Optional[str]) -> str:
    """A queue's lag (RMQ.INFO lag_ms), one way for every kind: a priority queue has no
    due times, so none, said so rather than a bare dash."""
    if kind == "priority":
        return "none (priority)"
    if ms is None:
        return "–"
    return duration(max(0, int(ms)) / 1000)

