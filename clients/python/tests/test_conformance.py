"""The clients' shared conformance cases (clients/conformance.json), run by this client against
a real server: the Node client's suite runs the same file (test/conformance.test.mjs), so the
same calls give the same replies in both. The file's `about` says how a step reads."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import redis

import rmq

CASES = json.loads((Path(__file__).resolve().parents[2] / "conformance.json").read_text())["cases"]


def target(client: redis.Redis, on: str) -> Any:
    kind, name, *slots = on.split()
    return rmq.Topic(client, name, int(slots[0])) if kind == "topic" else rmq.Queue(client, name)


def normal(reply: Any) -> Any:
    """A reply in the file's terms: messages as [queue, body, deliveries], text for bytes."""
    if isinstance(reply, rmq.Message):
        return [reply.queue, reply.body.decode(), reply.deliveries]
    if isinstance(reply, rmq.Schedule):
        return normal(dataclasses.asdict(reply))
    if isinstance(reply, bytes):
        return reply.decode()
    if isinstance(reply, dict):
        return {normal(k): normal(v) for k, v in reply.items()}
    if isinstance(reply, (list, tuple)):
        return [normal(x) for x in reply]
    return reply


def call(client: redis.Redis, step: dict, held: dict[tuple[str, str], rmq.Message]) -> Any:
    name, args, options = step["call"], step.get("args", []), step.get("options", {})
    if name == "route":
        return rmq.route(*args)
    on = target(client, step["on"])
    if name in ("ack", "nack", "extend"):
        body, *rest = args
        msg = next(m for (q, b), m in held.items()
                   if b == body and (isinstance(on, rmq.Topic) or q == on.name))
        return getattr(msg, name)(*rest, **options)
    reply = getattr(on, name)(*args, **options)
    if name == "pop":
        held.update({(m.queue, m.body.decode()): m for m in reply})
    return reply


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_conformance(r: redis.Redis, case: dict) -> None:
    held: dict[tuple[str, str], rmq.Message] = {}
    for i, step in enumerate(case["steps"]):
        where = f"step {i} {step.get('on', '')} {step['call']}"
        if "expect_error" in step:
            with pytest.raises(Exception) as raised:
                call(r, step, held)
            assert step["expect_error"] in str(raised.value), where
            continue
        got = normal(call(r, step, held))
        if "expect" in step:
            assert got == step["expect"], where
        if "expect_has" in step:
            assert {k: got.get(k) for k in step["expect_has"]} == step["expect_has"], where
        if "expect_type" in step:
            assert isinstance(got, int) and not isinstance(got, bool), where
        if "expect_len" in step:
            low, high = step["expect_len"]
            assert low <= len(got) <= high, where
        if "expect_queues" in step:
            counts = {q: sum(1 for m in got if m[0] == q) for q in step["expect_queues"]}
            assert counts == step["expect_queues"], where
