"""``python -m rmq dashboard`` and ``python -m rmq exporter``: their arguments and start-up
(the security rules are checked before anything listens)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from .. import redis_url
from .security import TOKEN_ENV, Auth, start_refusal

DEFAULT_LISTEN = {"dashboard": "127.0.0.1:8080", "exporter": "127.0.0.1:9808"}


def listen_address(text: str) -> tuple[str, int]:
    """ADDR:PORT, IPv6 in brackets ([::1]:8080)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise argparse.ArgumentTypeError(f"expected ADDR:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def add_commands(sub: Any) -> None:
    """The two subcommands, on the subparsers of rmq.cli."""
    for name, text in (("dashboard", "web dashboard of every queue, with /metrics and /api"),
                       ("exporter", "Prometheus exporter: /metrics alone")):
        # no abbreviations: `--token SECRET` must not pass for `--token-file`
        p = sub.add_parser(name, help=text, description=text, allow_abbrev=False)
        redis_url.add_arguments(p)
        p.add_argument("--cluster", action="store_true",
                       help="Redis Cluster: read the queues of every primary")
        p.add_argument("--listen", type=listen_address, default=DEFAULT_LISTEN[name],
                       metavar="ADDR:PORT",
                       help=f"where to serve HTTP (default {DEFAULT_LISTEN[name]}); any "
                            "non-loopback address needs authentication")
        p.add_argument("--token-file", metavar="FILE",
                       help=f"a file holding the access token (or set {TOKEN_ENV}): "
                            "'Authorization: Bearer TOKEN', or basic auth with it as password")
        p.add_argument("--basic-auth-file", metavar="FILE",
                       help="a file holding user:password for HTTP basic auth (or set "
                            "RMQ_DASHBOARD_BASIC_AUTH)")
        p.add_argument("--interval", type=float, default=2.0,
                       help="seconds between two reads of every queue (default 2; at least "
                            "4 times the last read's duration); pages and /metrics serve "
                            "the last read")
        if name == "dashboard":
            p.add_argument("--writable", action="store_true",
                           help="allow replay, cancel, pause/resume, policy edits, purge and drop")
        p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from waitress import serve

    from .app import create_app
    from .sampler import Sampler
    from .source import Source

    writable = getattr(args, "writable", False)
    host, port = args.listen
    try:
        auth = Auth.load(args.token_file, args.basic_auth_file)
    except (OSError, ValueError) as e:
        print(f"error: authentication: {e}", file=sys.stderr)
        return 2
    refusal = start_refusal(host, writable, auth)
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    client = None
    sampler = None
    try:
        where = redis_url.shown(redis_url.url_of(args))
        # queue names that are not UTF-8 go back to the server as the bytes they came as
        client = redis_url.connect(args, cluster=args.cluster, socket_timeout=10,
                                   encoding_errors="surrogateescape")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        client.ping()  # a wrong address or password stops it here, said plainly
        source = Source(client)
        sampler = Sampler(source, interval=args.interval).start()
        app = create_app(source, sampler, writable=writable, auth=auth, listen_host=host,
                         metrics_only=args.command == "exporter")
        shown = f"[{host}]" if ":" in host else host
        print(f"rmq {args.command}: http://{shown}:{port}/ "
              f"({'writable' if writable else 'read-only'}), Redis {where}"
              f"{' (cluster)' if args.cluster else ''}", flush=True)
        serve(app, host=host, port=port, threads=8, ident="rmq")
    except (redis.RedisError, RedisClusterException) as e:
        print(f"error: Redis {where}: {e}", file=sys.stderr)
        return 1
    finally:
        if sampler:
            sampler.stop()
        if client is not None:
            client.close()
    return 0
