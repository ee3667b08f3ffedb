"""Small helpers shared by the package: value conversion and retried calls."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Optional, TypeVar, Union

import redis
from redis.cluster import RedisCluster
from redis.cluster import ClusterNode
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError

from ._protocol import BOUNDS
from .durable import Durable
from .module_missing import module_missing

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


def run_all(client: Client, commands: list[tuple], durable: Optional[Durable] = None,
            node: Optional[ClusterNode] = None) -> list:
    """Run commands, several in one pipeline (not a transaction: on a cluster they may go
    to different nodes). With `durable`, its WAIT follows them in the same pipeline (one
    connection), so it covers them; NotDurable when too few replicas confirm. On a cluster
    `node` sends them all there (a keyless TPOP), else each goes to its queue's node. A
    server without the module raises ModuleNotLoaded, which says how to load it."""
    try:
        return _run_all(client, commands, durable, node)
    except redis.ResponseError as e:
        missing = module_missing(e)
        if missing is None:
            raise
        raise missing from e


def _run_all(client: Client, commands: list[tuple], durable: Optional[Durable],
             node: Optional[ClusterNode]) -> list:
    if durable is not None and is_cluster(client):
        return _run_durable_on_cluster(client, commands, durable, node)
    if node is not None and is_cluster(client):
        return [client.execute_command(*c, target_nodes=node) for c in commands]
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


#: How often a durable cluster call follows MOVED / ASK before it gives up.
REDIRECTS = 5


def _run_durable_on_cluster(client: RedisCluster, commands: list[tuple], durable: Durable,
                            node: Optional[ClusterNode]) -> list:
    """run_all's durable path on a cluster. WAIT counts the replicas of the node it is sent
    to, for the writes of its connection, so each node's commands and their WAIT go down one
    pipeline on that node's own connection. A command answered MOVED or ASK was not run:
    it is sent again where the redirection points (the slot map updated as redis-py does);
    a lost connection or CLUSTERDOWN refreshes the slot map (the node may have failed over)
    and is raised, for the caller to retry: the commands on a lost connection may or may
    not have run."""
    replies: list = [None] * len(commands)
    asking: dict[int, ClusterNode] = {}         # command -> the node an ASK sent it to
    pending, done = list(range(len(commands))), []
    for _ in range(REDIRECTS):
        by_node: dict[str, tuple[ClusterNode, list[int]]] = {}
        for i in pending:
            target = asking.get(i) or node or client.get_node_from_key(commands[i][1])
            by_node.setdefault(target.name, (target, []))[1].append(i)
        asked, asking, pending, waits = asking, {}, [], []
        for target, idxs in by_node.values():
            pipe = client.get_redis_connection(target).pipeline(transaction=False)
            for i in idxs:
                if i in asked:
                    pipe.execute_command("ASKING")
                pipe.execute_command(*commands[i])
            pipe.execute_command(*durable.command())
            try:
                *got, waited = pipe.execute(raise_on_error=False)
            except (redis.ConnectionError, redis.TimeoutError):
                _refresh(client, target)
                raise
            got.reverse()
            ran = False
            for i in idxs:
                if i in asked:
                    got.pop()                   # ASKING's OK
                reply = got.pop()
                if isinstance(reply, MovedError):
                    client.nodes_manager.move_slot(reply)
                    pending.append(i)
                elif isinstance(reply, AskError):
                    asking[i] = (client.get_node(host=reply.host, port=reply.port)
                                 or ClusterNode(reply.host, reply.port))
                    pending.append(i)
                elif isinstance(reply, Exception):
                    if isinstance(reply, ClusterDownError):
                        _refresh(client, target)    # a node cut off from the majority
                    raise reply
                else:
                    replies[i], ran = reply, True
                    done.append(i)
            if ran:
                waits.append(waited)
        for waited in waits:
            if isinstance(waited, Exception):
                raise waited
            durable.check(waited, commands[0][0], [replies[i] for i in sorted(done)])
        if not pending:
            return replies
    raise ClusterDownError(f"{commands[0][0]} on {commands[0][1]!r} was redirected "
                           f"{REDIRECTS} times: the cluster is changing its slot map; retry")


def _refresh(client: RedisCluster, failed: ClusterNode) -> None:
    """The slot map read again, the failed node asked last (what redis-py does after a
    connection error); if no node answers now, the next call tries again."""
    try:
        client.nodes_manager.initialize(last_failed_node_name=failed.name)
    except redis.RedisError:
        pass


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
