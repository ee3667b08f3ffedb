"""Command line: ``python -m rmq stats TOPIC SLOTS [--redis URL] [--cluster]`` and
``python -m rmq schedules QUEUE [--redis URL] [--cluster]`` (the connection options:
rmq.redis_url); the ``dashboard`` and ``exporter`` subcommands come from
rmq.dashboard.commands."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional, Sequence

import redis

from . import redis_url
from ._util import Client
from .dashboard import commands as dashboard_commands
from .queues import Queue, Topic, sum_info
from .schedules import schedules_table

COLUMNS = ("waiting", "ready", "inflight", "dead")


def stats_table(per_queue: dict[str, dict[str, Any]], nonempty: bool = False) -> str:
    """The queues' counts as a text table, one row per queue and a `total` row."""
    rows = [(q, *(info.get(c) or 0 for c in COLUMNS)) for q, info in per_queue.items()
            if not nonempty or any(info.get(c) for c in ("waiting", "inflight", "dead"))]
    total = sum_info(per_queue.values())
    rows.append(("total", *(total.get(c, 0) for c in COLUMNS)))
    header = ("queue", *COLUMNS)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w)
                       for i, (v, w) in enumerate(zip(r, widths))) for r in [header, *rows]]
    return "\n".join(lines[:-1] + ["-" * len(lines[0]), lines[-1]]) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rmq", description="RMQ tools")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("stats", help="waiting, ready, in flight and dead per queue of a topic")
    s.add_argument("topic")
    s.add_argument("slots", type=int)
    s.add_argument("--nonempty", action="store_true", help="leave out empty queues")
    sc = sub.add_parser("schedules", help="a queue's schedules with their next and last firing")
    sc.add_argument("queue")
    for a in (s, sc):
        redis_url.add_arguments(a)
        a.add_argument("--cluster", action="store_true", help="the server is a Redis Cluster node")
    dashboard_commands.add_commands(sub)
    args = p.parse_args(argv)
    if hasattr(args, "run"):  # dashboard, exporter
        return args.run(args)
    try:
        client: Client = redis_url.connect(args, cluster=args.cluster, socket_timeout=10)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        if args.command == "schedules":
            sys.stdout.write(schedules_table(Queue(client, args.queue).schedules()))
        else:
            topic = Topic(client, args.topic, args.slots)
            sys.stdout.write(stats_table(topic.info_by_queue(), args.nonempty))
    except (ValueError, redis.RedisError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0
