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
    """A Unix-ms time as ISO 8601 UTC (to the millisecond)."""
    if ms is None or ms == b"":
        return "–"
    t = dt.datetime.fromtimestamp(int(float(ms)) / 1000, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
