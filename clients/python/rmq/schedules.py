"""Schedules (RMQ.SCHEDULE): repeating pushes the server fires by itself.

    q = rmq.Queue(redis.Redis(port=6380), "reports")
    q.schedule("nightly", cron="0 2 * * *", tz="Europe/Paris", priority=5, message="build")
    q.schedules()        # [Schedule(name='nightly', spec='CRON 0 2 * * * TZ ...', next=..., ...)]
    q.unschedule("nightly")
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from ._util import MAX_MS, Data, to_bytes, to_str

TWO53 = 2 ** 53
MIN_AT = 946_684_800_000
MAX_EVERY = 2 ** 41
MAX_NAME_BYTES = 1024


@dataclass(frozen=True)
class Schedule:
    """One entry of RMQ.SCHEDULE Q LIST: `spec` is the SET arguments after the name,
    `next` the next firing time (Unix ms, None when none is left), `fired` how many times
    it fired, `last` the planned time of the latest firing (None before the first). A
    stored schedule the module cannot use has `spec` "broken: <why>" and None for the
    other three (it never fires)."""

    queue: str
    name: str
    spec: str
    next: Optional[int]
    fired: Optional[int]
    last: Optional[int]


def _int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def set_args(queue: str, name: Data, message: Data, every: Optional[int] = None,
             cron: Optional[str] = None, tz: Optional[str] = None,
             priority: Optional[int] = None, delay: Optional[int] = None,
             range: Optional[int] = None, group: Optional[Data] = None,
             times: Optional[int] = None, start: Optional[int] = None,
             end: Optional[int] = None) -> list:
    """The RMQ.SCHEDULE Q SET command; what can be checked here raises before anything is
    sent (the server checks the cron expression, the zone and the queue's kind)."""
    n = to_bytes(name)
    if not n or len(n) > MAX_NAME_BYTES:
        raise ValueError(f"a schedule name is 1 to {MAX_NAME_BYTES} bytes")
    args: list = ["RMQ.SCHEDULE", queue, "SET", n]
    if (every is None) == (cron is None):
        raise ValueError("schedule needs exactly one of every, cron")
    if every is not None:
        if tz is not None:
            raise ValueError("tz goes with cron, not every")
        args += ["EVERY", _int("every", every, 1, MAX_EVERY)]
    else:
        args += ["CRON", cron] + ([] if tz is None else ["TZ", tz])
    for opt, v, low in (("START", start, MIN_AT), ("END", end, MIN_AT), ("TIMES", times, 1)):
        if v is not None:
            args += [opt, _int(opt.lower(), v, low, TWO53)]
    modes = [(k, v) for k, v in (("RANGE", range), ("PRIORITY", priority), ("DELAY", delay))
             if v is not None]
    if len(modes) != 1:
        raise ValueError("schedule needs exactly one of range, priority, delay")
    kind, value = modes[0]
    bounds = {"RANGE": (1, MAX_MS), "PRIORITY": (-TWO53, TWO53), "DELAY": (0, MAX_MS)}[kind]
    args += [kind, _int(kind.lower(), value, *bounds)]
    if group is not None:
        g = to_bytes(group)
        if not g or len(g) > 1024:
            raise ValueError("group must be 1 to 1024 bytes")
        args += ["GROUP", g]
    m = to_bytes(message)
    if not m:
        raise ValueError("a message must not be empty")
    return args + [m]


def parse_list(queue: str, reply: Any) -> list[Schedule]:
    return [Schedule(queue, to_str(n), to_str(s), nxt, None if f is None else int(f), last)
            for n, s, nxt, f, last in reply or ()]


def _when(ms: Optional[int]) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def schedules_table(entries: list[Schedule]) -> str:
    """Schedules as a text table: queue, name, next and last firing (UTC), fired, spec."""
    header = ("queue", "name", "next", "last", "fired", "spec")
    rows = [(e.queue, e.name, _when(e.next), _when(e.last), "-" if e.fired is None else str(e.fired), e.spec) for e in entries]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return "".join("  ".join([*(v.rjust(w) if i == 4 else v.ljust(w)
                                for i, (v, w) in enumerate(zip(r, widths))), r[-1]]).rstrip() + "\n"
                   for r in [header, *rows])
