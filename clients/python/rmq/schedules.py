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

from ._protocol import BOUNDS
from ._util import Data, check_bytes, check_int, to_bytes, to_str


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


def set_args(queue: str, name: Data, message: Data, every: Optional[int] = None,
             cron: Optional[str] = None, tz: Optional[str] = None,
             priority: Optional[int] = None, delay: Optional[int] = None,
             range: Optional[int] = None, group: Optional[Data] = None,
             times: Optional[int] = None, start: Optional[int] = None,
             end: Optional[int] = None) -> list:
    """The RMQ.SCHEDULE Q SET command; what can be checked here raises before anything is
    sent (the server checks the cron expression, the zone and the queue's kind)."""
    args: list = ["RMQ.SCHEDULE", queue, "SET", check_bytes("name", name, "schedule_name_bytes")]
    if (every is None) == (cron is None):
        raise ValueError("schedule needs exactly one of every, cron")
    if every is not None:
        if tz is not None:
            raise ValueError("tz goes with cron, not every")
        args += ["EVERY", check_int("every", every, *BOUNDS["every"])]
    else:
        args += ["CRON", cron] + ([] if tz is None else ["TZ", tz])
    for opt, v in (("START", start), ("END", end), ("TIMES", times)):
        if v is not None:
            args += [opt, check_int(opt.lower(), v, *BOUNDS[opt.lower()])]
    modes = [(k, v) for k, v in (("RANGE", range), ("PRIORITY", priority), ("DELAY", delay))
             if v is not None]
    if len(modes) != 1:
        raise ValueError("schedule needs exactly one of range, priority, delay")
    kind, value = modes[0]
    args += [kind, check_int(kind.lower(), value, *BOUNDS[kind.lower()])]
    if group is not None:
        args += ["GROUP", check_bytes("group", group, "group_bytes")]
    m = to_bytes(message)
    if not m:
        raise ValueError("a message must not be empty")
    return args + ["MESSAGES", m]


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
