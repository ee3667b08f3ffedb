"""RMQ.ROUTE and topics (docs/COMMANDS.md: Keys / topic paragraph, RMQ.ROUTE)."""

import random
import zlib

import pytest
import redis

from helpers import expect_error, raw_client


def route(r, topic, slots, basis):
    return r.execute_command("RMQ.ROUTE", topic, slots, basis)


@pytest.mark.parametrize("basis,slots,expected", [
    (b"hello", 8, b"t_6"),
    (b"item:42", 16, b"t_13"),
    (b"order-1001", 1024, b"t_569"),
    (b"", 4, b"t_0"),
])
def test_route_spec_vectors(r, basis, slots, expected):
    assert route(r, "t", slots, basis) == expected


def test_route_vectors_match_zlib():
    # sanity check of the vectors themselves
    assert zlib.crc32(b"hello") % 8 == 6
    assert zlib.crc32(b"item:42") % 16 == 13
    assert zlib.crc32(b"order-1001") % 1024 == 569
    assert zlib.crc32(b"") % 4 == 0


def test_route_matches_crc32_for_many_inputs(r):
    rnd = random.Random(1234)
    for i in range(300):
        basis = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40)))
        slots = 2 ** rnd.randrange(0, 15)
        topic = b"topic-%d" % i
        assert route(r, topic, slots, basis) == topic + b"_%d" % (zlib.crc32(basis) % slots)


def test_route_binary_basis_and_topic(r):
    basis = b"\x00\xff\x00abc"
    assert route(r, b"top\x00ic", 64, basis) == b"top\x00ic_%d" % (zlib.crc32(basis) % 64)


def test_route_slot_bounds(r):
    assert route(r, "t", 1, "anything") == b"t_0"
    assert route(r, "t", 16384, "hello") == b"t_%d" % (zlib.crc32(b"hello") % 16384)
    assert route(r, "t", 2, "hello") == b"t_%d" % (zlib.crc32(b"hello") % 2)


@pytest.mark.parametrize("bad", [0, 3, 6, 1000, 16383, 16385, 32768, 65536, -8, -1, "abc", "",
                                 "8.0", "0x10", 2 ** 64])
def test_route_bad_slots(r, bad):
    expect_error(r, "RMQ.ROUTE", "t", bad, "hello", contains="slots")
    assert r.dbsize() == 0


def test_route_arity(r):
    for args in (("t",), ("t", 8), ("t", 8, "a", "b"), ()):
        expect_error(r, "RMQ.ROUTE", *args, contains="wrong number of arguments")


def test_route_changes_nothing(r):
    route(r, "t", 8, "hello")
    assert r.dbsize() == 0


def test_route_is_keyless(server):
    c = raw_client(server)
    info = c.execute_command("COMMAND", "INFO", "rmq.route")
    assert info and info[0], "RMQ.ROUTE is not registered"
    entry = info[0]
    assert entry[3:6] == [0, 0, 0], f"RMQ.ROUTE key spec (first,last,step) = {entry[3:6]}"
    try:
        keys = c.execute_command("COMMAND", "GETKEYS", "RMQ.ROUTE", "t", "8", "hello")
    except redis.ResponseError as e:
        # Redis 7.0: "The command has no key arguments"
        assert "no key" in str(e).lower() or "invalid" in str(e).lower(), str(e)
    else:
        assert keys == [], keys


def test_route_result_is_usable_queue(r):
    q = route(r, "orders", 16, "order-1001")
    assert q == b"orders_%d" % (zlib.crc32(b"order-1001") % 16)
    assert r.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "order-1001") == 1
    assert r.execute_command("RMQ.POP", q) == [[b"order-1001", 1]]
