"""Queues and topics: routing, pushes, RMQ.INFO and RMQ.POLICY."""

from __future__ import annotations

import time
import zlib
from typing import Any, Iterable, Optional, Sequence

from ._protocol import BOUNDS, POLICY_FIELDS
from ._util import (Client, Data, as_dict, check_bytes, check_int, is_cluster, run_all, to_bytes,
                    to_str)
from .durable import Durable, DurableOption, durable_for
from .message import Message
from .schedules import Schedule, parse_list, set_args

#: RMQ.INFO fields that hold a time (summed over queues as the earliest, not added up).
_INFO_TIMES = ("next_due", "next_expiry")
#: RMQ.INFO fields summed over queues as the largest (the latest queue's lag).
_INFO_WORST = ("lag_ms",)


def check_slots(slots: Any) -> int:
    """A topic's slot count: a power of two from 1 to 16384."""
    check_int("slots", slots, *BOUNDS["slots"])
    if slots & (slots - 1):
        raise ValueError(f"slots must be a power of two, got {slots}")
    return slots


def check_queue_name(name: Any) -> str:
    if not isinstance(name, str) or not name or "{" in name or "}" in name:
        raise ValueError(f"a queue name is a non-empty str without '{{' or '}}', got {name!r}")
    return name


def route(topic: str, slots: int, basis: Data) -> str:
    """The queue of `topic` that `basis` goes to, as RMQ.ROUTE computes it:
    ``<topic>_<crc32(basis) mod slots>`` (zlib's CRC-32)."""
    return f"{topic}_{zlib.crc32(to_bytes(basis)) % check_slots(slots)}"


def _mode(range_: Optional[int], priority: Optional[int], at: Optional[int],
          delay: Optional[int]) -> list:
    """The PUSH mode arguments; exactly one mode, with a value in its bounds."""
    given = [(k, v) for k, v in (("RANGE", range_), ("PRIORITY", priority), ("AT", at),
                                 ("DELAY", delay)) if v is not None]
    if len(given) != 1:
        raise ValueError("push needs exactly one of range, priority, at, delay "
                         f"(got {', '.join(k for k, _ in given) or 'none'})")
    kind, value = given[0]
    return [kind, check_int(kind.lower(), value, *BOUNDS[kind.lower()])]


def _messages(messages: Sequence[Data]) -> list[bytes]:
    if not messages:
        raise ValueError("push needs at least one message")
    out = [to_bytes(m) for m in messages]
    if not all(out):
        raise ValueError("a message must not be empty")
    return out


def _group(group: Optional[Data]) -> Optional[bytes]:
    return None if group is None else check_bytes("group", group, "group_bytes")


def _push_commands(queue: str, mode: list, group: Optional[bytes],
                   messages: list[bytes]) -> list[tuple]:
    """The RMQ.PUSH command for one queue. `MESSAGES` ends its options, so every message,
    however it is spelt (`group`, `MESSAGES`, ...), arrives as a message."""
    options = [] if group is None else ["GROUP", group]
    return [("RMQ.PUSH", queue, *mode, *options, "MESSAGES", *messages)]


def _policy_args(fields: dict[str, int]) -> list:
    if not fields:
        raise ValueError("set_policy needs at least one field")
    args: list = []
    for name, value in fields.items():
        if name not in POLICY_FIELDS:
            raise ValueError(f"unknown policy field {name!r} (known: {', '.join(POLICY_FIELDS)})")
        if name == "paused" and isinstance(value, bool):
            value = int(value)
        args += [name.replace("_", "-"), check_int(name, value, *POLICY_FIELDS[name])]
    return args


def _policy_dict(reply: Any) -> dict[str, Any]:
    return {k.replace("-", "_"): v for k, v in as_dict(reply).items()}


def sum_info(infos: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """RMQ.INFO of several queues as one: counts added up (`paused`: how many are), `next_due` /
    `next_expiry` the earliest, `lag_ms` the largest, `kinds` the sorted distinct kinds
    (instead of `kind`)."""
    total: dict[str, Any] = {"kinds": set()}
    for info in infos:
        for k, v in info.items():
            if k == "kind":
                if v is not None:
                    total["kinds"].add(v)
            elif k in _INFO_TIMES or k in _INFO_WORST:
                pick = min if k in _INFO_TIMES else max
                if v is not None:
                    total[k] = v if total.get(k) is None else pick(total[k], v)
                else:
                    total.setdefault(k, None)
            elif isinstance(v, int):
                total[k] = total.get(k, 0) + v
    total["kinds"] = sorted(total["kinds"])
    return total


class _Target:
    """What Queue and Topic share: a client and the queue names they cover."""

    client: Client
    queues: list[str]
    #: durable mode of this queue's pushes and of the ACKs of messages taken from it
    durable: Optional[Durable]

    def info_by_queue(self) -> dict[str, dict[str, Any]]:
        """RMQ.INFO of each queue: {queue: {kind, waiting, ready, inflight, dead,
        next_due, next_expiry, ...}}."""
        replies = run_all(self.client, [("RMQ.INFO", q) for q in self.queues])
        return {q: as_dict(rep) for q, rep in zip(self.queues, replies)}

    def set_policy(self, **fields: int) -> None:
        """RMQ.POLICY Q SET on every queue, e.g. ``set_policy(retries=5, backoff_ms=1000)``.
        Fields: retries, lease_ms, max_queue_length, backoff_ms, backoff_max_ms, rate,
        rate_window_ms; names and bounds are checked before anything is sent."""
        args = _policy_args(fields)
        run_all(self.client, [("RMQ.POLICY", q, "SET", *args) for q in self.queues])

    def reset_policy(self) -> int:
        """RMQ.POLICY Q RESET on every queue; returns how many had a policy."""
        return sum(run_all(self.client, [("RMQ.POLICY", q, "RESET") for q in self.queues]))

    def pause(self) -> None:
        """Stop deliveries (RMQ.POLICY Q SET paused 1) on every queue: pushes, ACK, NACK and
        leases go on; blocked consumers wait until resume()."""
        self.set_policy(paused=1)

    def resume(self) -> None:
        """Deliver again (RMQ.POLICY Q SET paused 0) on every queue."""
        self.set_policy(paused=0)

    def replay(self, count: Optional[int] = None) -> int:
        """RMQ.REPLAY on every queue: dead messages back to waiting (at most `count` per
        queue); returns how many."""
        extra = [] if count is None else ["COUNT", check_int("count", count, *BOUNDS["replay_count"])]
        return sum(run_all(self.client, [("RMQ.REPLAY", q, *extra) for q in self.queues]))

    def purge(self, dead: bool = False) -> int:
        """RMQ.PURGE on every queue: every waiting and in-flight message goes (and, with
        `dead`, the dead ones); policy, schedules, sequence and deduplication stay. Returns
        how many messages were removed."""
        extra = ["DEAD"] if dead else []
        return sum(run_all(self.client, [("RMQ.PURGE", q, *extra) for q in self.queues]))

    def drop(self) -> int:
        """RMQ.DROP on every queue: each goes with every key the module keeps for it
        (messages, policy, schedules, sequence, deduplication, journal). Returns how many
        of the queues existed."""
        return sum(run_all(self.client, [("RMQ.DROP", q) for q in self.queues]))

    def schedules(self) -> list[Schedule]:
        """RMQ.SCHEDULE Q LIST of every queue, by queue then name."""
        replies = run_all(self.client, [("RMQ.SCHEDULE", q, "LIST") for q in self.queues])
        return [s for q, rep in zip(self.queues, replies) for s in parse_list(q, rep)]

    def unschedule(self, *names: Data) -> int:
        """RMQ.SCHEDULE Q DEL on every queue; returns how many schedules existed."""
        if not names:
            raise ValueError("unschedule needs at least one name")
        return sum(run_all(self.client, [("RMQ.SCHEDULE", q, "DEL", *names) for q in self.queues]))

    def _policies(self) -> dict[str, dict[str, Any]]:
        replies = run_all(self.client, [("RMQ.POLICY", q, "GET") for q in self.queues])
        return {q: _policy_dict(rep) for q, rep in zip(self.queues, replies)}

    def _wait(self, durable: DurableOption) -> Optional[Durable]:
        """The durable mode of one call: its own `durable`, else this queue's."""
        return self.durable if durable is None else durable_for(durable)

    def _push_all(self, by_queue: dict[str, list[bytes]], mode: list,
                  group: Optional[bytes], durable: DurableOption) -> int:
        commands = [c for q, msgs in by_queue.items() for c in _push_commands(q, mode, group, msgs)]
        return sum(run_all(self.client, commands, self._wait(durable)))

    def _pop(self, args: list, durable: DurableOption, node: Any = None) -> Any:
        """A POP or TPOP on the client's server (on a cluster: its queue's node, or `node`);
        durable, the WAIT behind it (so that what it hands out is not a stale primary's:
        NotDurable instead, the messages then stay in flight there until their leases run
        out)."""
        return run_all(self.client, [tuple(args)], self._wait(durable), node)[0]


class Queue(_Target):
    """One queue: ``rmq.Queue(redis.Redis(...), "prices_3")``. With `durable` (a replica
    count or an rmq.Durable), its pushes, pops and the ACKs of messages taken from it answer
    only once that many replicas hold them, else raise rmq.NotDurable (see rmq.durable)."""

    def __init__(self, client: Client, name: str, *, durable: DurableOption = None) -> None:
        self.client = client
        self.name = check_queue_name(name)
        self.queues = [name]
        self.durable = durable_for(durable)

    def __repr__(self) -> str:
        return f"rmq.Queue({self.name!r})"

    def push(self, *messages: Data, range: Optional[int] = None,
             priority: Optional[int] = None, at: Optional[int] = None,
             delay: Optional[int] = None, group: Optional[Data] = None,
             durable: DurableOption = None) -> int:
        """RMQ.PUSH: exactly one of `range` (ms), `priority`, `at` (Unix ms), `delay` (ms);
        `group` puts every message in that group. Returns how many were newly added (the
        others merged into a waiting copy). Bad arguments raise before anything is sent.
        `durable` overrides the queue's durable mode for this call (0: none)."""
        mode, group_b, msgs = _mode(range, priority, at, delay), _group(group), _messages(messages)
        return self._push_all({self.name: msgs}, mode, group_b, durable)

    def pop(self, count: int = 1, lease_ms: Optional[int] = None,
            block_ms: Optional[int] = None, durable: DurableOption = None) -> list[Message]:
        """RMQ.POP: up to `count` messages, each in flight under a lease of `lease_ms`
        (default: the queue's lease-ms); `block_ms` waits for one (0 = forever). Every
        message must then be acked or nacked (or it comes back when its lease runs out).
        In durable mode (the queue's, or `durable` here) it raises rmq.NotDurable when too
        few replicas confirm the POP: a primary cut off from its replicas may be stale, and
        handing out its messages could repeat work already acked on a promoted replica."""
        args = ["RMQ.POP", self.name, "COUNT", check_int("count", count, *BOUNDS["count"])]
        args += _lease_block(lease_ms, block_ms)
        start = time.monotonic()
        reply = self._pop(args, durable)
        end = None if lease_ms is None else start + lease_ms / 1000
        return [Message(self.client, self.name, to_bytes(m), int(d), end, self.durable)
                for m, d in reply or ()]

    def info(self) -> dict[str, Any]:
        """RMQ.INFO: {kind, waiting, ready, inflight, dead, next_due, next_expiry, ...}."""
        return self.info_by_queue()[self.name]

    def policy(self) -> dict[str, Any]:
        """RMQ.POLICY Q GET: every field's effective value (names with underscores)."""
        return self._policies()[self.name]

    def trace(self, message: Data, count: Optional[int] = None) -> list[tuple[str, dict[str, bytes]]]:
        """RMQ.TRACE: what happened to `message`, from the queue's journal (kept while its
        policy sets `journal`, e.g. ``set_policy(journal=10000)``): its events, newest first,
        at most `count` (default 100), each (entry id, {field: value}) with the fields
        event, message, [sha1,] deliveries, by[, id][, due | priority]."""
        args = ["RMQ.TRACE", self.name, to_bytes(message)]
        if count is not None:
            args += ["COUNT", check_int("count", count, 1, 1_000_000)]
        out = []
        for entry_id, flat in self.client.execute_command(*args):
            it = iter(flat)
            out.append((to_bytes(entry_id).decode(), {to_bytes(k).decode(): to_bytes(v) for k, v in zip(it, it)}))
        return out

    def schedule(self, name: Data, message: Data, *, every: Optional[int] = None,
                 cron: Optional[str] = None, tz: Optional[str] = None,
                 priority: Optional[int] = None, delay: Optional[int] = None,
                 range: Optional[int] = None, group: Optional[Data] = None,
                 times: Optional[int] = None, start: Optional[int] = None,
                 end: Optional[int] = None) -> int:
        """RMQ.SCHEDULE Q SET: the server pushes `message` every `every` ms or as the
        cron expression `cron` says in zone `tz` (default UTC), with exactly one of
        `priority`, `delay` (ms after each firing time), `range` (ms); `times` ends it after
        that many firings, `start`/`end` (Unix ms) bound it. Replaces a schedule of the same
        name. Returns the first firing time (Unix ms)."""
        return run_all(self.client, [tuple(set_args(
            self.name, name, message, every=every, cron=cron, tz=tz, priority=priority,
            delay=delay, range=range, group=group, times=times, start=start, end=end))])[0]


class Topic(_Target):
    """A topic of `slots` queues ``<name>_0 … <name>_<slots-1>``:
    ``rmq.Topic(redis.Redis(...), "orders", slots=16)``; `durable` as for Queue."""

    def __init__(self, client: Client, name: str, slots: int, *,
                 durable: DurableOption = None) -> None:
        self.client = client
        self.name = check_queue_name(name)
        self.slots = check_slots(slots)
        self.queues = [f"{name}_{i}" for i in range(slots)]
        self.durable = durable_for(durable)

    def __repr__(self) -> str:
        return f"rmq.Topic({self.name!r}, slots={self.slots})"

    def queue_for(self, basis: Data) -> str:
        """The queue that `basis` routes to (RMQ.ROUTE, computed locally)."""
        return route(self.name, self.slots, basis)

    def push(self, *messages: Data, range: Optional[int] = None,
             priority: Optional[int] = None, at: Optional[int] = None,
             delay: Optional[int] = None, group: Optional[Data] = None,
             basis: Optional[Data] = None, durable: DurableOption = None) -> int:
        """RMQ.PUSH into the topic, as Queue.push (`durable` too). Routing: by `basis` when
        given; else by `group` when given (so a group stays in one queue and is consumed
        serially); else each message by its own content, one PUSH per queue (in one
        pipeline: atomic per queue, not across queues). Returns how many were newly added."""
        mode, group_b, msgs = _mode(range, priority, at, delay), _group(group), _messages(messages)
        key = basis if basis is not None else group_b
        by_queue: dict[str, list[bytes]] = {}
        for m in msgs:
            by_queue.setdefault(self.queue_for(m if key is None else key), []).append(m)
        return self._push_all(by_queue, mode, group_b, durable)

    def pop(self, count: int = 1, lease_ms: Optional[int] = None,
            block_ms: Optional[int] = None, node: Any = None,
            quantum: Optional[int] = None, durable: DurableOption = None) -> list[Message]:
        """RMQ.TPOP: up to `count` messages from any of the topic's queues on one server
        (round-robin over the queues, `quantum` messages per queue per turn, default 1). On a
        cluster pass `node` (a primary's ClusterNode): TPOP takes only from the queues that
        node serves. `durable` as for Queue.pop."""
        args = ["RMQ.TPOP", self.name, self.slots, "COUNT", check_int("count", count, *BOUNDS["count"])]
        args += _lease_block(lease_ms, block_ms)
        if quantum is not None:
            args += ["QUANTUM", check_int("quantum", quantum, *BOUNDS["quantum"])]
        start = time.monotonic()
        if is_cluster(self.client) and node is None:
            raise ValueError("Topic.pop on a cluster needs node= (one of get_primaries())")
        reply = self._pop(args, durable, node)
        end = None if lease_ms is None else start + lease_ms / 1000
        return [Message(self.client, to_str(q), to_bytes(m), int(d), end, self.durable)
                for q, m, d in reply or ()]

    def info(self) -> dict[str, Any]:
        """RMQ.INFO summed over the slots: waiting, ready, inflight, dead added up,
        next_due / next_expiry the earliest, kinds the distinct kinds in use."""
        return sum_info(self.info_by_queue().values())

    def policy(self) -> dict[str, dict[str, Any]]:
        """RMQ.POLICY GET of every queue: {queue: {field: value}}."""
        return self._policies()

    def schedule(self, name: Data, message: Data, *, basis: Optional[Data] = None,
                 **options: Any) -> int:
        """A schedule whose pushes go where Topic.push would send them: to the queue of
        `basis`, else of `group`, else of the message (options as Queue.schedule).
        Returns the first firing time; `schedules()` shows it with its queue."""
        group = options.get("group")
        key = basis if basis is not None else (group if group is not None else message)
        queue = self.queue_for(key)
        return run_all(self.client, [tuple(set_args(queue, name, message, **options))])[0]


def _lease_block(lease_ms: Optional[int], block_ms: Optional[int]) -> list:
    args: list = []
    if lease_ms is not None:
        args += ["LEASE", check_int("lease_ms", lease_ms, *BOUNDS["lease_ms"])]
    if block_ms is not None:
        args += ["BLOCK", check_int("block_ms", block_ms, *BOUNDS["block_ms"])]
    return args
