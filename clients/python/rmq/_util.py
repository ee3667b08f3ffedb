"""Small helpers shared by the package: value conversion and retried calls."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Optional, TypeVar, Union

import redis
from redis.cluster import RedisCluster
from redis.exceptions import ClusterDownError, TryAgainError

from ._protocol import BOUNDS
from .durable import Durable

log = logging.getLogger("rmq")

#: Either client works: commands name their queue as their only key, so a cluster client
#: routes them; the keyless RMQ.TPOP is sent to chosen nodes.
Client = Union[redis.Redis, RedisCluster]
Data = Union[bytes, str]

#: Errors worth retrying: the connection went away, or the cluster is between states.
TRANSIENT = (redis.ConnectionError, redis.TimeoutError, ClusterDownError, TryAgainError)

T = TypeVar("T")

#: Longest duration the module takes (RANGE, DELAY, LEASE, BLOCK, EXTEND), in ms.
MAX_MS = BOUNDS["delay"][1]


def to_bytes(x: Any) -> bytes:
    """A message, group or basis as bytes (str is encoded as UTF-8)."""
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode()
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    raise TypeError(f"expected bytes or str, got {type(x).__name__}")


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """`value` if it is an integer from `low` to `high`: else TypeError (not an integer) or
    ValueError, worded as the Node client words it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def check_bytes(name: str, x: Any, bound: str) -> bytes:
    """`x` as bytes, of a length within BOUNDS[bound] (a group, a schedule name)."""
    b = to_bytes(x)
    low, high = BOUNDS[bound]
    if not low <= len(b) <= high:
        raise ValueError(f"{name} must be {low} to {high} bytes, got {len(b)}")
    return b


def to_str(x: Any) -> str:
    return x.decode() if isinstance(x, (bytes, bytearray)) else str(x)


def is_cluster(client: Client) -> bool:
    return isinstance(client, RedisCluster)


def as_dict(reply: Any) -> dict[str, Any]:
    """A map reply (a dict in RESP3, a flat field/value list in RESP2) with str keys and
    bytes values decoded."""
    items = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])
    return {to_str(k): (to_str(v) if isinstance(v, bytes) else v) for k, v in items}


def run_all(client: Client, commands: list[tuple], durable: Optional[Durable] = None) -> list:
    """Run commands, several in one pipeline (not a transaction: on a cluster they may go
    to different nodes). With `durable`, its WAIT follows them in the same pipeline (one
    connection), so it covers them; NotDurable when too few replicas confirm."""
    if durable is None and len(commands) == 1:
        return [client.execute_command(*commands[0])]
    pipe = client.pipeline(transaction=False)
    for c in commands + ([durable.command()] if durable is not None else []):
        pipe.execute_command(*c)
    replies = pipe.execute()
    if durable is not None:
        *replies, waited = replies
        durable.check(waited, commands[0][0], replies)
    return replies


def retrying(call: Callable[[], T], what: str, attempts: int = 4, delay: float = 0.05) -> T:
    """Run `call`, retrying TRANSIENT errors with exponential backoff; the last error is
    raised once `attempts` are used up."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except TRANSIENT as e:
            if attempt == attempts:
                raise
            log.warning("%s failed (%s), retrying in %.2fs", what, e, delay)
            time.sleep(delay)
            delay *= 4
    raise AssertionError("unreachable")
