"""Durable mode: a push or an ACK that answers only once replicas (and, asked, the AOFs)
hold it.

Redis replicates asynchronously: a write the primary acknowledged is lost if the primary
fails before a replica got it. In durable mode the write is followed, on the same
connection, by ``WAIT n timeout`` (or ``WAITAOF 1 n timeout`` with ``aof=True``), which
answers once `n` replicas hold every write that connection made; fewer in time raises
NotDurable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

import redis

#: Most replicas one can wait for (far more than any deployment has).
MAX_REPLICAS = 1000
#: Longest wait (ms); 0, which WAIT reads as "forever", is refused so a call always ends.
MAX_TIMEOUT_MS = 2 ** 31


#: What the caller of each command should do about a NotDurable.
_ADVICE = {
    "RMQ.PUSH": "retry (a retried push of the same content merges)",
    "RMQ.POP": "its messages are not handed out (this primary may be stale); they stay in "
               "flight here until their leases run out",
}
_ADVICE["RMQ.TPOP"] = _ADVICE["RMQ.POP"]


class NotDurable(redis.RedisError):
    """The write is done on the primary, but fewer replicas than asked confirmed it in time:
    it is not safe against a failover yet. Retry the call. A retried push of the same
    content merges with the copy already stored (range: kept as it is; priority and fixed:
    its score set again), so it adds nothing, except when the copy was consumed in between
    (a retry then pushes the content again) or when the primary failed over and the new one
    never got the write (the retry then stores it, which is the point). A retried ACK of a
    message already acked answers 0. A POP or TPOP that is not confirmed hands out nothing:
    a primary cut off from its replicas may be stale. `replies` holds the replies of the commands before the
    wait (e.g. how many messages a push added)."""

    def __init__(self, what: str, confirmed: int, wanted: int, timeout_ms: int, aof: bool,
                 replies: list) -> None:
        self.confirmed, self.wanted, self.replies = confirmed, wanted, replies
        held = "wrote to their AOF" if aof else "acknowledged"
        super().__init__(f"{what} is done on the primary but only {confirmed} of {wanted} "
                         f"replicas {held} it within {timeout_ms} ms, so a failover now could "
                         f"undo it: {_ADVICE.get(what, 'retry')}")


@dataclass(frozen=True)
class Durable:
    """How durable a write must be: `replicas` replicas acknowledge it within `timeout_ms`;
    with `aof`, the primary and those replicas have also written it to their AOF (WAITAOF,
    Redis >= 7.2 with appendonly on; fsynced when appendfsync is always)."""

    replicas: int = 1
    timeout_ms: int = 1000
    aof: bool = False

    def __post_init__(self) -> None:
        for name, value, high in (("replicas", self.replicas, MAX_REPLICAS),
                                  ("timeout_ms", self.timeout_ms, MAX_TIMEOUT_MS)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ValueError(f"durable {name} must be an integer from 1 to {high}, "
                                 f"got {value!r}")
        if not isinstance(self.aof, bool):
            raise TypeError(f"durable aof must be a bool, got {self.aof!r}")

    def command(self) -> tuple:
        if self.aof:
            return ("WAITAOF", 1, self.replicas, self.timeout_ms)
        return ("WAIT", self.replicas, self.timeout_ms)

    def check(self, reply: Any, what: str, replies: list) -> None:
        """Raise NotDurable unless the WAIT / WAITAOF `reply` confirms enough copies."""
        if self.aof:
            local, confirmed = int(reply[0]), int(reply[1])
            if local < 1:
                # the primary's own AOF has not got it either: no copy is safe yet
                confirmed = 0
        else:
            confirmed = int(reply)
        if confirmed < self.replicas:
            raise NotDurable(what, confirmed, self.replicas, self.timeout_ms, self.aof, replies)


DurableOption = Union[None, int, Durable]


def durable_for(value: DurableOption) -> Optional[Durable]:
    """The Durable a `durable=` option asks for: None or 0 for none, an int for that many
    replicas (1 s timeout), or a Durable."""
    if value is None:
        return None
    if isinstance(value, Durable):
        durable = value
    elif isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"durable must be a replica count or an rmq.Durable, got {value!r}")
    elif value == 0:
        return None
    else:
        durable = Durable(value)
    return durable
