"""The queue checker (as Jepsen's): from every producer's and consumer's events, what an
acknowledged push or ACK promised and what happened.

- lost: pushes acknowledged to the producer that no consumer ever got and that are not in
  the queue at the end (waiting, in flight or dead);
- after_ack: deliveries of a message by a POP sent after an ACK of it was confirmed
  (durably, when the consumer was durable; a POP already in flight is concurrent with the
  ACK and may return the message, as a lease that ran out before the ACK lets it), not
  counting those a push of the same content may have queued again (after_ack_repushed): a
  push attempt that ended after the acked copy's POP was sent (docs/COMMANDS.md: a push of content in
  flight adds a new waiting copy; a producer's retry after an error does that), or one of
  unknown outcome (the connection lost or timed out: its packets may reach the server after
  the heal, as Jepsen's indeterminate operations may take effect at any later time);
- duplicates: deliveries beyond the first of a message (at least once allows them: counted);
- recovery: after each heal, how long until a push was acknowledged again on every queue
  pushes went to (the queue is the push event's `q`; on a cluster the other shards' queues
  take pushes all along, the faulted one's only once it serves again).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Iterable

#: Push errors after which the push may still take effect later (redis-py's names).
INDETERMINATE = ("ConnectionError", "TimeoutError")


def read_events(paths: Iterable[Path]) -> list[dict]:
    events = []
    for p in paths:
        if p.exists():
            for line in p.read_text().splitlines():
                if line.strip():
                    events.append(json.loads(line))
    return events


def check(events: list[dict], heals: Iterable[float] = ()) -> dict:
    acked: dict[str, float] = {}
    ok_by_queue: dict[str, list[float]] = defaultdict(list)
    last_attempt: dict[str, float] = defaultdict(float)
    deliveries: dict[str, list[float]] = defaultdict(list)    # when each such POP was sent
    confirmed_ack: dict[str, tuple[float, float]] = {}    # ack done, its copy's POP sent
    present: set[str] = set()
    unknown: set[str] = set()          # a push of it may land late
    finals = 0
    for e in events:
        ev = e["ev"]
        if ev == "push":
            last_attempt[e["m"]] = max(last_attempt[e["m"]], e["t1"])
            if e["ok"]:
                acked.setdefault(e["m"], e["t1"])
                ok_by_queue[e.get("q", "")].append(e["t1"])
            elif e.get("err") in INDETERMINATE:
                unknown.add(e["m"])
        elif ev == "deliver":
            deliveries[e["m"]].append(e["popped"])
        elif ev == "ack" and e["ok"] and e["confirmed"]:
            confirmed_ack.setdefault(e["m"], (e["t1"], e["popped"]))
        elif ev == "final":
            finals += 1
            present.update(e["store"], e["prepare"], e["dead"])
    lost = sorted(m for m in acked if m not in deliveries and m not in present)
    late = {m: sum(1 for t in deliveries[m] if t > done) for m, (done, _) in confirmed_ack.items()}
    repushed = {m for m, (_, popped) in confirmed_ack.items()
                if m in unknown or last_attempt[m] > popped}
    ok_times = sorted(acked.values())
    recovery = []
    for h in heals:
        firsts = [min((t for t in ts if t > h), default=None) for ts in ok_by_queue.values()]
        recovery.append(max(firsts) - h if firsts and None not in firsts else None)
    return {
        "acknowledged": len(acked),
        "lost": len(lost),
        "lost_sample": lost[:5],
        "lost_times": sorted(acked[m] for m in lost),
        "after_ack": sum(n for m, n in late.items() if m not in repushed),
        "after_ack_repushed": sum(n for m, n in late.items() if m in repushed),
        "duplicates": sum(len(ts) - 1 for ts in deliveries.values() if len(ts) > 1),
        "delivered": len(deliveries),
        "finals": finals,
        "ack_times": ok_times,
        "recovery_s": recovery,
    }
