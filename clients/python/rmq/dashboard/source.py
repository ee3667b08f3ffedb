"""What the dashboard reads from the servers: every queue of every primary (RMQ.QUEUES),
their RMQ.INFO, each server's INFO rmq, and one queue's details."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import redis
from redis.exceptions import (AskError, ClusterDownError, MasterDownError, MovedError,
                              TryAgainError)

from .._util import Client, as_dict, is_cluster, to_str
from .text import as_bytes, show

#: RMQ.QUEUES per call (a hint to the server) and RMQ.INFO per pipeline round trip.
SCAN_COUNT = 1000
INFO_BATCH = 1000
#: Journal entries a queue's page shows, and how many of the newest it reads when filtered
#: (each refresh of an open page reads them again: bounded whatever the journal's length).
JOURNAL_ROWS = 100
JOURNAL_SCAN = 1000
#: A message's events its timeline shows at most (RMQ.TRACE's COUNT).
TRACE_COUNT = 1000
#: The journal's events (RMQ.TRACE's `event` field), for the page's filter.
JOURNAL_EVENTS = ("pushed", "merged", "popped", "acked", "nacked", "expired", "dead",
                  "replayed", "cancelled", "purged")

#: Errors about the server rather than the queue: a reply with one of them fails the whole
#: read (under Cluster the primaries are then learnt again), where any other error, such as
#: WRONGTYPE from a queue key of another type, stays with its queue.
SERVER_ERRORS = (redis.ConnectionError, redis.TimeoutError, MovedError, AskError,
                 ClusterDownError, TryAgainError, MasterDownError)

#: RMQ.INFO's per-queue counters (the v3 contract), the same names as INFO rmq's (`died`: `dead`).
QUEUE_COUNTERS = ("pushed", "merged", "popped", "acked", "nacked", "expired", "died",
                  "replayed", "cancelled")
#: Every RMQ.INFO field the pages show (None when the server's module does not give it).
INFO_FIELDS = ("kind", "waiting", "ready", "inflight", "dead", "next_due", "next_expiry",
               "paused", "lag_ms", "schedules", *QUEUE_COUNTERS)


def info_dict(reply: Any) -> dict[str, Any]:
    """An RMQ.INFO reply with every field of INFO_FIELDS present (all None for no reply)."""
    return {**dict.fromkeys(INFO_FIELDS), **as_dict(reply or ())}


@dataclass
class Node:
    """One primary: `label` is its host:port under Cluster, None on a standalone server."""
    label: Optional[str]
    client: redis.Redis


@dataclass
class QueueRow:
    """One queue's RMQ.INFO, or (info all None) the error its server gave for it."""
    name: str
    node: Optional[str]
    info: dict[str, Any]
    error: Optional[str] = None


@dataclass
class Snapshot:
    """Every queue's RMQ.INFO and every primary's INFO rmq, read at `taken` (Unix s)."""
    taken: float
    queues: dict[str, QueueRow]
    servers: dict[Optional[str], dict[str, Any]] = field(default_factory=dict)


class Source:
    """The servers behind one dashboard: a standalone server, or a Redis Cluster whose
    primaries are found through redis-py's cluster client (CLUSTER SHARDS/SLOTS)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._has_schedules: Optional[bool] = None

    def nodes(self) -> list[Node]:
        if not is_cluster(self.client):
            return [Node(None, self.client)]
        return [Node(p.name, self.client.get_redis_connection(p))
                for p in self.client.get_primaries()]

    def snapshot(self) -> Snapshot:
        """Every queue's RMQ.INFO. Under Cluster the primaries are learnt afresh first: a
        primary turned replica by a failover answers RMQ.QUEUES with nothing, so no error
        would tell; and a failover seen while reading makes it learn them and read again."""
        if not is_cluster(self.client):
            return self._snapshot()
        self.client.nodes_manager.initialize()
        try:
            return self._snapshot()
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            self.client.nodes_manager.initialize()
            return self._snapshot()

    def _snapshot(self) -> Snapshot:
        taken = time.time()
        queues: dict[str, QueueRow] = {}
        servers: dict[Optional[str], dict[str, Any]] = {}
        for node in self.nodes():
            servers[node.label] = node.client.info("rmq")
            names = [n for n in queue_names(node.client) if n not in queues]
            for i in range(0, len(names), INFO_BATCH):
                chunk = names[i:i + INFO_BATCH]
                pipe = node.client.pipeline(transaction=False)
                for n in chunk:
                    pipe.execute_command("RMQ.INFO", n)
                # one queue whose keys hold a wrong type fails alone, not the whole sample
                for n, reply in zip(chunk, pipe.execute(raise_on_error=False)):
                    if isinstance(reply, SERVER_ERRORS):
                        raise reply
                    queues[n] = (QueueRow(n, node.label, info_dict(None), error_text(reply))
                                 if isinstance(reply, Exception)
                                 else QueueRow(n, node.label, info_dict(reply)))
        return Snapshot(taken, queues, servers)

    def has_schedules(self) -> bool:
        """Whether the servers know RMQ.SCHEDULE (COMMAND INFO answers nil for a command a
        server lacks)."""
        if self._has_schedules is None:
            # spelt as one word so that redis-py's COMMAND reply parser, which fails on a nil
            # entry, leaves the reply as it came
            reply = self.nodes()[0].client.execute_command("COMMAND INFO", "RMQ.SCHEDULE")
            self._has_schedules = bool(reply and reply[0])
        return self._has_schedules

    def queue(self, name: str, dead_offset: int = 0, dead_count: int = 50,
              pending_count: int = 100, waiting_count: int = 20) -> dict[str, Any]:
        """One queue's INFO, policy, in-flight deliveries, a page of its dead letters
        (oldest death first), the first waiting messages of its store and its schedules.
        A part its server refuses (a key of the wrong type) is left empty and its error
        listed in `errors`, so the rest still shows."""
        if not valid_name(name):
            raise ValueError(f"invalid queue name {name!r}: empty, or with {{ or }}")
        errors: list[str] = []

        def part(command: str, reply: Any, empty: Any) -> Any:
            if isinstance(reply, Exception):
                errors.append(f"{command}: {error_text(reply)}")
                return empty
            return reply

        pipe = self.client.pipeline(transaction=False)
        pipe.execute_command("RMQ.INFO", name)
        pipe.execute_command("RMQ.POLICY", name, "GET")
        pipe.execute_command("RMQ.PENDING", name, "COUNT", pending_count)
        pipe.execute_command("ZCARD", f"dead{{{name}}}")
        pipe.execute_command("ZRANGE", f"dead{{{name}}}", dead_offset,
                             dead_offset + dead_count - 1, "WITHSCORES")
        info_r, policy_r, pending_r, dead_total, dead_r = (
            part(c, reply, empty) for c, reply, empty in zip(
                ("RMQ.INFO", "RMQ.POLICY", "RMQ.PENDING", "ZCARD dead", "ZRANGE dead"),
                pipe.execute(raise_on_error=False), (None, (), None, 0, ())))
        info = info_dict(info_r)
        order = ("ZREVRANGE" if info.get("kind") == "priority" else "ZRANGE")
        pipe = self.client.pipeline(transaction=False)
        pipe.execute_command(order, name, 0, waiting_count - 1, "WITHSCORES")
        if self.has_schedules():
            pipe.execute_command("RMQ.SCHEDULE", name, "LIST")
        waiting_r, *schedules_r = pipe.execute(raise_on_error=False)
        waiting_r = part(order, waiting_r, ())
        schedules = None
        if schedules_r:
            schedules = [{"name": n, "spec": s, "next": nx, "fired": f, "last": last}
                         for n, s, nx, f, last in
                         part("RMQ.SCHEDULE LIST", schedules_r[0], None) or ()]
        return {
            "name": name,
            "info": info,
            "policy": as_dict(policy_r),
            "pending": [{"message": m, "deliveries": d, "deadline": dl, "group": g}
                        for m, d, dl, g in pending_r or ()],
            "dead": {"total": dead_total, "offset": dead_offset,
                     "items": [{"message": m, "died": int(s)} for m, s in dead_r]},
            "waiting": [{"message": m, "score": s} for m, s in waiting_r],
            "schedules": schedules,
            "errors": errors,
        }


    def journal(self, name: str, event: str = "", text: str = "") -> dict[str, Any]:
        """The newest entries of the queue's journal (the Stream journal{Q}), newest first;
        with `event` only that event's, with `text` only those whose message (as shown) or
        `by` holds it (case-insensitive). `length` is the journal's, `scanned` how many of
        its newest entries were read, `error` what its server refused (a key of the wrong
        type)."""
        if not valid_name(name):
            raise ValueError(f"invalid queue name {name!r}: empty, or with {{ or }}")
        key = f"journal{{{name}}}"
        filtered = bool(event or text)
        pipe = self.client.pipeline(transaction=False)
        pipe.execute_command("XLEN", key)
        pipe.execute_command("XREVRANGE", key, "+", "-", "COUNT",
                             JOURNAL_SCAN if filtered else JOURNAL_ROWS)
        length, entries = pipe.execute(raise_on_error=False)
        for reply in (length, entries):
            if isinstance(reply, SERVER_ERRORS):
                raise reply
            if isinstance(reply, Exception):
                return {"entries": [], "length": 0, "scanned": 0, "error": error_text(reply)}
        needle = text.lower()
        chosen = []
        for entry_id, fields in entries:
            e = journal_entry(entry_id, fields)
            if event and e["event"] != event:
                continue
            if needle and needle not in show(e["message"]).lower() \
                    and needle not in (e["by"] or "").lower():
                continue
            chosen.append(e)
            if len(chosen) == JOURNAL_ROWS:
                break
        return {"entries": chosen, "length": length, "scanned": len(entries), "error": None}

    def trace(self, name: str, message: bytes) -> dict[str, Any]:
        """RMQ.TRACE: the journal's events of one message, oldest first (a timeline reads
        down), or the error its server gave."""
        if not valid_name(name):
            raise ValueError(f"invalid queue name {name!r}: empty, or with {{ or }}")
        try:
            reply = self.client.execute_command("RMQ.TRACE", name, message,
                                                "COUNT", TRACE_COUNT)
        except SERVER_ERRORS:
            raise
        except redis.ResponseError as e:
            return {"events": [], "error": error_text(e)}
        return {"events": [journal_entry(i, f) for i, f in reversed(reply)], "error": None}


def journal_entry(entry_id: Any, fields: Any) -> dict[str, Any]:
    """One journal entry (its fields a flat list or a dict): its id and time (Unix ms, the
    id's first part), the message's bytes as stored (at most 256) and the other fields as
    text (None when absent)."""
    # XREVRANGE comes as a dict through redis-py's reply parsing, RMQ.TRACE as it is sent
    pairs = fields.items() if isinstance(fields, dict) else zip(fields[::2], fields[1::2])
    raw = {to_str(k): v for k, v in pairs}
    ident = to_str(entry_id)
    out: dict[str, Any] = {"entry": ident, "time": int(ident.partition("-")[0]),
                           "message": as_bytes(raw.get("message", b""))}
    for f in ("event", "sha1", "deliveries", "by", "id", "due", "priority"):
        v = raw.get(f)
        out[f] = None if v is None else as_bytes(v).decode("utf-8", "backslashreplace")
    return out


def valid_name(name: str) -> bool:
    """A queue name as the contract allows it: non-empty, without { or }."""
    return bool(name) and "{" not in name and "}" not in name


def error_text(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"


def name_str(name: Any) -> str:
    """A queue name as str; bytes that are not UTF-8 are kept as surrogates, which the
    dashboard's clients (encoding_errors="surrogateescape") send back as the same bytes."""
    return name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else str(name)


def queue_names(client: redis.Redis) -> list[str]:
    """Every queue the server holds, by RMQ.QUEUES's cursor (each name once)."""
    seen: dict[str, None] = {}
    cursor = 0
    while True:
        cursor, names = client.execute_command("RMQ.QUEUES", "COUNT", SCAN_COUNT,
                                               "CURSOR", cursor)
        for n in names:
            seen.setdefault(name_str(n), None)
        if cursor in (b"0", "0", 0):  # the cursor is opaque: only "0" means done
            return list(seen)
