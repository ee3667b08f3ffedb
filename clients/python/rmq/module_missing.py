"""The error a Redis without the RMQ module gives, made to say so and how to load it."""

from __future__ import annotations

from typing import Optional

import redis

HOW_TO_LOAD = ("start the server with `redis-server --loadmodule /path/to/librmq.so`, or add "
               "`loadmodule /path/to/librmq.so` to its redis.conf (`cargo build --release` "
               "builds target/release/librmq.so)")


class ModuleNotLoaded(redis.ResponseError):
    """The server does not know an RMQ.* command: the RMQ module is not loaded there (or
    is a build without that command). The server's own words end the message."""


def module_missing(e: redis.ResponseError) -> Optional[ModuleNotLoaded]:
    """The ModuleNotLoaded that `e` means, or None when it is another error."""
    text = str(e)
    start = text.lower().find("unknown command '")
    if start < 0 or isinstance(e, ModuleNotLoaded):
        return None
    name = text[start + len("unknown command '"):].split("'", 1)[0]
    if not name.upper().startswith("RMQ."):
        return None
    return ModuleNotLoaded(f"{name}: the RMQ module is not loaded on this Redis server (or "
                           f"its build lacks {name}): {HOW_TO_LOAD}. The server said: {text}")
