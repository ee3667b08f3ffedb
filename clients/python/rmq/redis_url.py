"""How the command-line tools (``stats``, ``schedules``, ``dashboard``, ``exporter``) reach
Redis: ``--redis URL`` (``redis://``, ``rediss://`` for TLS, ``unix://``; the user and
password in the URL, or in RMQ_REDIS_USERNAME and RMQ_REDIS_PASSWORD when it has none), the
TLS files ``--redis-ca``, ``--redis-cert`` and ``--redis-key``, and the older ``--host`` and
``--port`` (deprecated: they still work, with a warning)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Mapping, Optional
from urllib.parse import urlsplit

import redis
from redis.cluster import RedisCluster

#: The Redis server's credentials (ACL user, password) when the URL has none.
REDIS_USER_ENV = "RMQ_REDIS_USERNAME"
REDIS_PASSWORD_ENV = "RMQ_REDIS_PASSWORD"
DEFAULT_URL = "redis://127.0.0.1:6379"
SCHEMES = ("redis", "rediss", "unix")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The connection options, on a subcommand's parser (--cluster is the caller's)."""
    p.add_argument("--redis", metavar="URL",
                   help=f"the Redis server: redis://[USER:PASSWORD@]HOST:PORT[/DB], "
                        f"rediss://... (TLS) or unix:///PATH (default {DEFAULT_URL}; "
                        f"without credentials in it, {REDIS_USER_ENV} and {REDIS_PASSWORD_ENV})")
    p.add_argument("--redis-ca", metavar="FILE",
                   help="with rediss://: the CA certificates (PEM) to check the server's "
                        "against (default: the system's)")
    p.add_argument("--redis-cert", metavar="FILE",
                   help="with rediss://: a client certificate (PEM), with --redis-key")
    p.add_argument("--redis-key", metavar="FILE", help="the private key (PEM) of --redis-cert")
    p.add_argument("--host", help="deprecated, use --redis: the Redis host (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="deprecated, use --redis: the Redis port "
                                            "(default 6379)")


def url_of(args: argparse.Namespace) -> str:
    """The URL the arguments name (--host/--port make a redis:// one)."""
    if args.host is not None or args.port is not None:
        if args.redis is not None:
            raise ValueError("give --redis URL or the deprecated --host/--port, not both")
        host = args.host or "127.0.0.1"
        return f"redis://{'[' + host + ']' if ':' in host else host}:{args.port or 6379}"
    return args.redis or DEFAULT_URL


def shown(url: str) -> str:
    """The URL for people: its password left out."""
    u = urlsplit(url)
    if u.password is None:
        return url
    return u._replace(netloc=u.netloc.replace(f":{u.password}@", ":***@", 1)).geturl()


def _readable(flag: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise ValueError(f"cannot read {flag} {path}: {e.strerror or e}") from None


def tls_options(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """redis-py's ssl_* options from the TLS files (checked readable here, so that a wrong
    path is said plainly rather than as a failed handshake)."""
    files = {"--redis-ca": args.redis_ca, "--redis-cert": args.redis_cert,
             "--redis-key": args.redis_key}
    if not any(files.values()):
        return {}
    if urlsplit(url).scheme != "rediss":
        raise ValueError("--redis-ca, --redis-cert and --redis-key are for TLS: "
                         "give a rediss:// URL (--redis rediss://HOST:PORT)")
    if bool(args.redis_cert) != bool(args.redis_key):
        raise ValueError("--redis-cert and --redis-key go together")
    for flag, path in files.items():
        if path:
            _readable(flag, path)
    opts: dict[str, Any] = {}
    if args.redis_ca:
        opts["ssl_ca_certs"] = args.redis_ca
    if args.redis_cert:
        opts.update(ssl_certfile=args.redis_cert, ssl_keyfile=args.redis_key)
    return opts


def connect(args: argparse.Namespace, cluster: bool = False,
            env: Optional[Mapping[str, str]] = None, **options: Any) -> Any:
    """A redis.Redis (or RedisCluster) for the arguments; ValueError for arguments that do
    not go together or a file that cannot be read. `options` go to redis-py."""
    env = os.environ if env is None else env
    if args.host is not None or args.port is not None:
        print("warning: --host and --port are deprecated; use --redis redis://HOST:PORT",
              file=sys.stderr)
    url = url_of(args)
    scheme = urlsplit(url).scheme
    if scheme not in SCHEMES:
        raise ValueError(f"--redis {shown(url)}: expected a redis://, rediss:// or unix:// URL")
    if cluster and scheme == "unix":
        raise ValueError("a Redis Cluster is reached over TCP: give a redis:// or rediss:// URL")
    # Keyword options are overridden by the URL's own user and password (redis-py's
    # from_url), so the environment's count only when the URL has none.
    creds = {"username": env.get(REDIS_USER_ENV) or None,
             "password": env.get(REDIS_PASSWORD_ENV) or None}
    cls = RedisCluster if cluster else redis.Redis
    return cls.from_url(url, **creds, **tls_options(url, args), **options)
