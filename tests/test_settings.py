"""Settings: module arguments at load, CONFIG GET/SET rmq.*, invalid values (docs/COMMANDS.md: Settings)."""

import re

import pytest
import redis

from helpers import (assert_time_score, config_get, config_get_all, dead, expect_error, nack,
                     now_ms, pop, prep, push, zs)

DEFAULTS = {
    "rmq.retries": "16",
    "rmq.lease-ms": "30000",
    "rmq.max-message-bytes": "1048576",
    "rmq.max-queue-length": "0",
    "rmq.stats-queues": "100000",
}

# (name, lowest valid, highest valid, invalid values)
RANGES = [
    ("retries", 0, 1000, ["-1", "1001", "abc", "1.5", ""]),
    ("lease-ms", 1, 2 ** 31, ["0", "-1", str(2 ** 31 + 1), "abc", ""]),
    ("max-message-bytes", 1, 536870912, ["0", "-1", "536870913", "abc", ""]),
    ("max-queue-length", 0, 2 ** 62, ["-1", str(2 ** 62 + 1), "abc", ""]),
    ("stats-queues", 0, 10 ** 7, ["-1", str(10 ** 7 + 1), "abc", ""]),
]


def test_defaults(r):
    for name, value in DEFAULTS.items():
        assert config_get(r, name) == value, name


def test_config_get_wildcard_lists_all(r):
    assert config_get_all(r, "rmq.*") == DEFAULTS


def test_module_args_at_load(start_server):
    s = start_server(module_args=["retries", "3", "lease-ms", "5000", "max-message-bytes", "100",
                                  "max-queue-length", "7"])
    c = s.client()
    assert config_get(c, "rmq.retries") == "3"
    assert config_get(c, "rmq.lease-ms") == "5000"
    assert config_get(c, "rmq.max-message-bytes") == "100"
    assert config_get(c, "rmq.max-queue-length") == "7"
    # and they take effect
    push(c, "q", "PRIORITY", 1, "a")
    t0 = now_ms(c)
    pop(c, "q")
    t1 = now_ms(c)
    assert_time_score(zs(c, prep("q"))[b"a"], t0, t1, 5000, "lease deadline")
    expect_error(c, "RMQ.PUSH", "q", "PRIORITY", 1, b"x" * 101, contains="max-message-bytes")
    assert push(c, "q", "PRIORITY", 1, *[b"m%d" % i for i in range(7)]) == 7
    expect_error(c, "RMQ.PUSH", "q", "PRIORITY", 1, "one-more", contains="max-queue-length")
    for n in range(1, 4):
        assert nack(c, "q", "a") == b"requeued"
        assert (b"a", n + 1) in pop(c, "q", "COUNT", 100)
    assert nack(c, "q", "a") == b"dead"


def test_lowest_valid_values_at_load(start_server):
    args = []
    for name, lo, _hi, _bad in RANGES:
        args += [name, str(lo)]
    c = start_server(module_args=args).client()
    for name, lo, _hi, _bad in RANGES:
        assert config_get(c, "rmq." + name) == str(lo)


def test_highest_valid_values_at_load(start_server):
    args = []
    for name, _lo, hi, _bad in RANGES:
        args += [name, str(hi)]
    c = start_server(module_args=args).client()
    for name, _lo, hi, _bad in RANGES:
        assert config_get(c, "rmq." + name) == str(hi)


def test_config_set_valid_values(start_server):
    c = start_server().client()
    for name, lo, hi, _bad in RANGES:
        for v in (lo, hi, DEFAULTS["rmq." + name]):
            assert c.config_set("rmq." + name, v) is True
            assert config_get(c, "rmq." + name) == str(v)


@pytest.mark.parametrize("name,lo,hi,bad", RANGES, ids=[x[0] for x in RANGES])
def test_config_set_invalid_refused(start_server, name, lo, hi, bad):
    c = start_server().client()
    for v in bad:
        with pytest.raises(redis.ResponseError):
            c.config_set("rmq." + name, v)
        assert config_get(c, "rmq." + name) == DEFAULTS["rmq." + name], (name, v)


def test_config_set_retries_takes_effect(start_server):
    c = start_server().client()
    assert c.config_set("rmq.retries", 0)
    push(c, "q", "PRIORITY", 1, "a")
    assert pop(c, "q") == [(b"a", 1)]
    assert nack(c, "q", "a") == b"dead"
    assert c.config_set("rmq.retries", 1)
    push(c, "q", "PRIORITY", 1, "b")
    assert pop(c, "q") == [(b"b", 1)]
    assert nack(c, "q", "b") == b"requeued"
    assert pop(c, "q") == [(b"b", 2)]
    assert nack(c, "q", "b") == b"dead"
    assert set(zs(c, dead("q"))) == {b"a", b"b"}


def test_config_set_limits_take_effect(start_server):
    c = start_server().client()
    assert c.config_set("rmq.max-message-bytes", 3)
    assert push(c, "q", "RANGE", 1000, "abc") == 1
    expect_error(c, "RMQ.PUSH", "q", "RANGE", 1000, "abcd", contains="max-message-bytes")
    assert c.config_set("rmq.max-queue-length", 2)
    assert push(c, "q", "RANGE", 1000, "x") == 1
    expect_error(c, "RMQ.PUSH", "q", "RANGE", 1000, "y", contains="max-queue-length")
    assert c.config_set("rmq.max-queue-length", 0)  # unlimited again
    assert push(c, "q", "RANGE", 1000, "y", "z", "w") == 3
    assert c.config_set("rmq.max-message-bytes", 1048576)
    assert push(c, "q", "RANGE", 1000, b"x" * 5000) == 1


def _check_refused(start_failing_server, args, mention):
    """`mention`: a regular expression (case-insensitive) the module's reason must match."""
    log = start_failing_server(module_args=args)
    assert re.search(r"module|librmq", log, re.I), log[-2000:]
    assert re.search(mention, log, re.I), (
        f"load refused for {args}, but the log does not say why (expected {mention!r}):\n"
        + log[-2000:])


INVALID_LOAD = [
    (["retries", "1001"], "retries"),
    (["retries", "-1"], "retries"),
    (["retries", "abc"], "retries"),
    (["lease-ms", "0"], "lease-ms"),
    (["lease-ms", str(2 ** 31 + 1)], "lease-ms"),
    (["max-message-bytes", "0"], "max-message-bytes"),
    (["max-message-bytes", "536870913"], "max-message-bytes"),
    (["max-queue-length", "-1"], "max-queue-length"),
    (["max-queue-length", str(2 ** 62 + 1)], "max-queue-length"),
    (["stats-queues", "-1"], "stats-queues"),
    (["stats-queues", str(10 ** 7 + 1)], "stats-queues"),
    (["no-such-setting", "5"], "no-such-setting"),
    (["retries"], r"retries|pair|missing|value"),  # missing value
    (["retries", "2", "lease-ms", "0"], "lease-ms"),
]


@pytest.mark.parametrize("args,mention", INVALID_LOAD, ids=[" ".join(a) for a, _ in INVALID_LOAD])
def test_invalid_module_argument_refuses_load(start_failing_server, args, mention):
    _check_refused(start_failing_server, args, mention)
