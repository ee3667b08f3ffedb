"""clients/protocol.json, the one source of the commands' argument bounds: this client's copy
is that file, and the server takes every bound and refuses just past it (so a client that
checks against the file refuses exactly what the server would)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import redis

from rmq import _protocol

CLIENTS = Path(__file__).resolve().parents[2]
PROTOCOL = json.loads((CLIENTS / "protocol.json").read_text())


def test_the_generated_copy_is_protocol_json() -> None:
    assert _protocol.BOUNDS == {k: tuple(v) for k, v in PROTOCOL["bounds"].items()}
    assert _protocol.POLICY_FIELDS == {k: tuple(v) for k, v in PROTOCOL["policy_fields"].items()}
    check = subprocess.run([sys.executable, str(CLIENTS / "gen_protocol.py"), "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout    # the Node copy too


def _in_multi(*args: Any) -> Callable[[redis.Redis], Any]:
    """BLOCK 0 would wait forever: inside MULTI a blocking pop does not block."""
    def run(r: redis.Redis) -> Any:
        pipe = r.pipeline(transaction=True)
        pipe.execute_command(*args)
        return pipe.execute()
    return run


def _schedule(*middle: Any) -> tuple:
    return ("RMQ.SCHEDULE", "b_sched", "SET", "n", *middle, "PRIORITY", 1, "m")


#: For each bound, the command that carries it (v: the value); `stricter`: the client's bound
#: is narrower than the server's, which takes more (only the bound itself is checked there).
COMMANDS: dict[str, Callable[[Any], Any]] = {
    "slots": lambda v: ("RMQ.TPOP", "b_t", v),
    "count": lambda v: ("RMQ.POP", "b_q", "COUNT", v),
    "quantum": lambda v: ("RMQ.TPOP", "b_t", 4, "QUANTUM", v),
    "replay_count": lambda v: ("RMQ.REPLAY", "b_q", "COUNT", v),
    "range": lambda v: ("RMQ.PUSH", "b_range", "RANGE", v, "m"),
    "priority": lambda v: ("RMQ.PUSH", "b_prio", "PRIORITY", v, "m"),
    "at": lambda v: ("RMQ.PUSH", "b_fixed", "AT", v, "m"),
    "delay": lambda v: ("RMQ.PUSH", "b_fixed", "DELAY", v, "m"),
    "lease_ms": lambda v: ("RMQ.POP", "b_q", "LEASE", v),
    "block_ms": lambda v: _in_multi("RMQ.POP", "b_q", "BLOCK", v),
    "extend_ms": lambda v: ("RMQ.EXTEND", "b_q", "m", v),
    "every": lambda v: _schedule("EVERY", v),
    "start": lambda v: _schedule("EVERY", 3_600_000, "START", v),
    "end": lambda v: _schedule("EVERY", 1000, "START", 946_684_800_000, "END", v),
    "times": lambda v: _schedule("EVERY", 1000, "TIMES", v),
    "group_bytes": lambda v: ("RMQ.PUSH", "b_prio", "PRIORITY", 1, "GROUP", b"g" * v, "m"),
    "schedule_name_bytes": lambda v: ("RMQ.SCHEDULE", "b_sched", "SET", b"n" * v, "EVERY", 1000,
                                      "PRIORITY", 1, "m"),
}
STRICTER = {"replay_count"}     # the server takes any count up to 2^63 - 1
#: A bound the server takes as a value but refuses for another reason: no firing time is
#: before END's lowest value, since START cannot be earlier.
OTHER_REASON = {"end": "never fires"}


def _run(r: redis.Redis, command: Any) -> Any:
    return command(r) if callable(command) else r.execute_command(*command)


@pytest.mark.parametrize("bound", list(PROTOCOL["bounds"]))
def test_the_server_takes_every_bound_and_refuses_past_it(r: redis.Redis, bound: str) -> None:
    low, high = PROTOCOL["bounds"][bound]
    command = COMMANDS[bound]
    for v in (low, high):
        try:
            _run(r, command(v))
        except redis.ResponseError as e:
            assert bound in OTHER_REASON and OTHER_REASON[bound] in str(e), e
    past = [low - 1] + ([] if bound in STRICTER else [high + 1])
    for v in past:
        with pytest.raises(redis.ResponseError, match="(?i)invalid|must"):
            _run(r, command(v))


@pytest.mark.parametrize("field", list(PROTOCOL["policy_fields"]))
def test_the_server_takes_every_policy_bound_and_refuses_past_it(r: redis.Redis, field: str) -> None:
    low, high = PROTOCOL["policy_fields"][field]
    wire = field.replace("_", "-")
    for v in (low, high):
        assert r.execute_command("RMQ.POLICY", "b_pol", "SET", wire, v) in (b"OK", "OK")
    for v in (low - 1, high + 1):
        with pytest.raises(redis.ResponseError, match="(?i)invalid|must"):
            r.execute_command("RMQ.POLICY", "b_pol", "SET", wire, v)
