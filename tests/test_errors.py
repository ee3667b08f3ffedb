"""Errors: shapes, WRONGTYPE, "a command that errors changes nothing", bad queue names,
arity, and a fuzz-ish barrage of malformed calls (docs/COMMANDS.md: Commands preamble, Keys)."""

import random
import socket

import pytest
import redis

from helpers import (MIN_AT, dead, expect_error_unchanged, nack, now_ms, pop, prep, push,
                     rmq_info, snapshot, zs)

QUEUE_COMMANDS = ["RMQ.PUSH", "RMQ.POP", "RMQ.ACK", "RMQ.NACK", "RMQ.SWEEP", "RMQ.EXTEND",
                  "RMQ.CANCEL", "RMQ.REPLAY", "RMQ.INFO", "RMQ.PENDING"]
ALL_COMMANDS = QUEUE_COMMANDS + ["RMQ.ROUTE"]

# a valid argument list (after Q) for each queue command
VALID_REST = {
    "RMQ.PUSH": ["PRIORITY", "1", "m"],
    "RMQ.POP": [],
    "RMQ.ACK": ["m"],
    "RMQ.NACK": ["m"],
    "RMQ.SWEEP": [],
    "RMQ.EXTEND": ["m", "1000"],
    "RMQ.CANCEL": ["m"],
    "RMQ.REPLAY": [],
    "RMQ.INFO": [],
    "RMQ.PENDING": [],
}


def _resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def _raw_first_line(server, *args):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(_resp(*args))
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        return buf.split(b"\r\n", 1)[0]


# ---------------------------------------------------------------------------------------
# error shape
# ---------------------------------------------------------------------------------------

def test_errors_are_err_replies(server, r):
    for args in (("RMQ.PUSH", "q", "RANGE", "0", "m"),
                 ("RMQ.POP", "q", "COUNT", "0"),
                 ("RMQ.ROUTE", "t", "3", "x"),
                 ("RMQ.PUSH", "q", "BOGUS", "1", "m")):
        line = _raw_first_line(server, *args)
        assert line.startswith(b"-ERR "), (args, line)
        assert len(line) > len(b"-ERR ") + 5, f"error message should say what was wrong: {line!r}"
    r.set("str", "x")
    line = _raw_first_line(server, "RMQ.PUSH", "str", "PRIORITY", "1", "m")
    assert line.startswith(b"-WRONGTYPE"), line


# Each integer option out of its bound, with the exact text docs/COMMANDS.md gives (clients
# match on them): one per bound, as every text is derived from its bound.
BOUND_TEXTS = [
    (("RMQ.PUSH", "q", "RANGE", "0", "m"), "invalid RANGE: must be an integer from 1 to 2^52 (ms)"),
    (("RMQ.PUSH", "q", "PRIORITY", "9007199254740993", "m"), "invalid PRIORITY: must be an integer with |p| <= 2^53"),
    (("RMQ.PUSH", "q", "AT", "1700000000", "m"), "invalid AT: must be Unix time in ms from 946684800000 to 2^53"),
    (("RMQ.PUSH", "q", "DELAY", "-1", "m"), "invalid DELAY: must be an integer from 0 to 2^52 (ms)"),
    (("RMQ.POP", "q", "COUNT", "10001"), "invalid COUNT: must be an integer from 1 to 10000"),
    (("RMQ.POP", "q", "LEASE", "x"), "invalid LEASE: must be an integer from 1 to 2^52 (ms)"),
    (("RMQ.POP", "q", "BLOCK", "-1"), "invalid BLOCK: must be an integer from 0 (forever) to 2^52 (ms)"),
    (("RMQ.TPOP", "t", "8", "QUANTUM", "0"), "invalid QUANTUM: must be an integer from 1 to 10000"),
    (("RMQ.NACK", "q", "m", "DELAY", "1.5"), "invalid DELAY: must be an integer from 0 to 2^52 (ms)"),
    (("RMQ.SWEEP", "q", "LIMIT", "0"), "invalid LIMIT: must be an integer >= 1"),
    (("RMQ.REPLAY", "q", "COUNT", "0"), "invalid COUNT: must be an integer >= 1"),
    (("RMQ.PENDING", "q", "COUNT", "1000001"), "invalid COUNT: must be an integer from 1 to 1000000"),
    (("RMQ.QUEUES", "COUNT", "0"), "invalid COUNT: must be an integer from 1 to 10000"),
    (("RMQ.POLICY", "q", "SET", "lease-ms", "0"), "invalid lease-ms: must be an integer from 1 to 2147483648"),
    (("RMQ.POLICY", "q", "SET", "max-queue-length", "-1"),
     "invalid max-queue-length: must be an integer from 0 to 4611686018427387904"),
    (("RMQ.SCHEDULE", "q", "SET", "n", "EVERY", "0", "RANGE", "1", "m"), "invalid EVERY: must be an integer from 1 to 2^41 (ms)"),
    (("RMQ.SCHEDULE", "q", "SET", "n", "EVERY", "5", "START", "5", "RANGE", "1", "m"),
     "invalid START: must be Unix time in ms from 946684800000 to 2^53"),
    (("RMQ.SCHEDULE", "q", "SET", "n", "EVERY", "5", "TIMES", "0", "RANGE", "1", "m"), "invalid TIMES: must be an integer from 1 to 2^53"),
    (("RMQ.PUSH", "q", "DELAY", "0", "DEDUP", "i", "0", "m"), "invalid DEDUP: must be an integer from 1 to 2^41 (ms)"),
    (("RMQ.REDRIVE", "q", "CLAIM", "STALE", "0"), "invalid STALE: must be an integer from 1 to 2^41 (ms)"),
    (("RMQ.REDRIVE", "q", "CLAIM", "COUNT", "10001"), "invalid COUNT: must be an integer from 1 to 10000"),
    (("RMQ.POP", "q", "COUNT"), "syntax error: COUNT needs a value"),
    (("RMQ.QUEUES", "SPEED"), "syntax error: unexpected argument 'SPEED'"),
    (("RMQ.POLICY", "q", "DROP"), "syntax error: expected SET, GET or RESET, got 'DROP'"),
    (("RMQ.SCHEDULE", "q", "GET"), "syntax error: expected SET, DEL or LIST, got 'GET'"),
    (("RMQ.REDRIVE", "q", "MOVE"), "syntax error: expected CLAIM or DONE, got 'MOVE'"),
]


@pytest.mark.parametrize("args,text", BOUND_TEXTS, ids=[" ".join(a[:3]) for a, _ in BOUND_TEXTS])
def test_bound_errors_say_the_documented_text(server, r, args, text):
    push(r, "q", "PRIORITY", 1, "m")
    assert _raw_first_line(server, *args) == b"-ERR " + text.encode()
    expect_error_unchanged(r, *args)


def test_an_option_given_twice_counts_with_its_last_value(r):
    """One rule for every command (docs/COMMANDS.md, Conventions): the last value counts,
    each value is still checked, and where only one `WORD n` fits, a second is too many."""
    push(r, "q", "PRIORITY", 1, "a", "b", "c", "d")
    t0 = now_ms(r)
    got = pop(r, "q", "COUNT", 1, "LEASE", 1000, "COUNT", 3, "LEASE", 600000)
    assert len(got) == 3
    deadlines = [e[2] for e in r.execute_command("RMQ.PENDING", "q")]
    assert all(t0 + 600000 <= d <= now_ms(r) + 600000 for d in deadlines), deadlines
    expect_error_unchanged(r, "RMQ.POP", "q", "COUNT", "0", "COUNT", "1", contains="COUNT")
    # NACK: the second DELAY (0) counts, so the message is ready again at once
    m = got[0][0]
    assert nack(r, "q", m, "DELAY", 600000, "DELAY", 0) == b"requeued"
    assert rmq_info(r, "q")["ready"] == 2
    # TPOP: COUNT and QUANTUM
    push(r, "t_0", "PRIORITY", 1, "x", "y", "z")
    got = r.execute_command("RMQ.TPOP", "t", 1, "QUANTUM", 1, "COUNT", 1, "COUNT", 2, "QUANTUM", 2)
    assert len(got) == 2
    # POLICY SET: the pairs apply in order
    assert r.execute_command("RMQ.POLICY", "q", "SET", "retries", 1, "retries", 5) == b"OK"
    pol = r.execute_command("RMQ.POLICY", "q", "GET")
    pol = dict(zip(pol[0::2], pol[1::2])) if isinstance(pol, list) else pol
    assert pol[b"retries"] == 5
    # QUEUES: the last COUNT and MATCH
    for i in range(3):
        push(r, f"m{i}", "PRIORITY", 1, "x")
    nxt, names = r.execute_command("RMQ.QUEUES", "MATCH", "nothing*", "COUNT", 1, "MATCH", "m*", "COUNT", 100)
    assert nxt == b"0" and sorted(names) == [b"m0", b"m1", b"m2"]
    # SCHEDULE SET: the last EVERY (a repeat was refused before v4's one rule)
    t0 = now_ms(r)
    first = r.execute_command("RMQ.SCHEDULE", "q", "SET", "n", "EVERY", 100000, "EVERY", 200000, "PRIORITY", 1, "s")
    assert t0 + 200000 <= first <= now_ms(r) + 200000
    [[name, spec, nxt, fired, last]] = r.execute_command("RMQ.SCHEDULE", "q", "LIST")
    assert (name, spec, nxt, fired, last) == (b"n", b"EVERY 100000 EVERY 200000 PRIORITY 1 MESSAGES s", first, 0, None)
    # One `WORD n` only: a second is the wrong number of arguments.
    for cmd in ("RMQ.SWEEP", "RMQ.REPLAY", "RMQ.PENDING"):
        word = "LIMIT" if cmd == "RMQ.SWEEP" else "COUNT"
        expect_error_unchanged(r, cmd, "q", word, 1, word, 2, contains="wrong number of arguments")


# ---------------------------------------------------------------------------------------
# WRONGTYPE
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("maker", ["string", "list", "hash", "set"])
def test_wrongtype_store_key(r, maker):
    {"string": lambda: r.set("q", "x"),
     "list": lambda: r.rpush("q", "x"),
     "hash": lambda: r.hset("q", "f", "v"),
     "set": lambda: r.sadd("q", "x")}[maker]()
    before = snapshot(r)
    for args in (("RMQ.PUSH", "q", "PRIORITY", 1, "m"),
                 ("RMQ.PUSH", "q", "RANGE", 10, "m"),
                 ("RMQ.POP", "q")):
        with pytest.raises(redis.ResponseError) as ei:
            r.execute_command(*args)
        assert "WRONGTYPE" in str(ei.value), (args, str(ei.value))
    assert snapshot(r) == before


def test_wrongtype_prepare_key_on_pop(r):
    push(r, "q", "PRIORITY", 1, "m")
    r.set(prep("q"), "x")
    before = snapshot(r)
    with pytest.raises(redis.ResponseError) as ei:
        r.execute_command("RMQ.POP", "q")
    assert "WRONGTYPE" in str(ei.value)
    assert snapshot(r) == before


def test_wrongtype_prepare_key_on_ack(r):
    push(r, "q", "PRIORITY", 1, "m")
    r.rpush(prep("q"), "m")
    before = snapshot(r)
    with pytest.raises(redis.ResponseError) as ei:
        r.execute_command("RMQ.ACK", "q", "m")
    assert "WRONGTYPE" in str(ei.value)
    assert snapshot(r) == before


def test_wrongtype_dead_key_on_nack_dead(r):
    push(r, "q", "PRIORITY", 1, "m")
    pop(r, "q")
    r.set(dead("q"), "x")
    before = snapshot(r)
    with pytest.raises(redis.ResponseError) as ei:
        r.execute_command("RMQ.NACK", "q", "m", "DEAD")
    assert "WRONGTYPE" in str(ei.value)
    assert snapshot(r) == before
    assert list(zs(r, prep("q"))) == [b"m"]


# ---------------------------------------------------------------------------------------
# a command that errors changes nothing
# ---------------------------------------------------------------------------------------

@pytest.fixture
def busy_queue(r):
    """A priority queue with waiting, in-flight and dead messages, and a range queue."""
    push(r, "q", "PRIORITY", 1, "w1", "w2", "f1", "f2", "d1")
    push(r, "q", "PRIORITY", 5, "f1", "f2", "d1")
    got = pop(r, "q", "COUNT", 3)
    assert {m for m, _ in got} == {b"f1", b"f2", b"d1"}
    assert nack(r, "q", "d1", "DEAD") == b"dead"
    push(r, "q", "PRIORITY", 2, "f1")  # waiting copy of an in-flight content
    push(r, "rq", "RANGE", 60000, "x", "y")
    return r


FAILING_CALLS = [
    ("RMQ.PUSH", "q", "PRIORITY", 9, "w1", "new", "", "w2"),     # empty message in batch
    ("RMQ.PUSH", "q", "RANGE", 100, "w1", "new"),                # kind mismatch
    ("RMQ.PUSH", "q", "PRIORITY", 2 ** 53 + 1, "w1"),            # bad priority
    ("RMQ.PUSH", "q", "PRIORITY", 9, "w1", b"x" * (1048576 + 1)),  # too long
    ("RMQ.PUSH", "q", "BOGUS", 9, "w1"),                         # syntax
    ("RMQ.PUSH", "rq", "RANGE", 0, "x", "z"),                    # bad range
    ("RMQ.PUSH", "rq", "AT", 1, "x"),                            # kind + bad AT
    ("RMQ.PUSH", "q{x}", "PRIORITY", 1, "m"),                    # bad queue name
    ("RMQ.POP", "q", "COUNT", 0),
    ("RMQ.POP", "q", "COUNT", 10001),
    ("RMQ.POP", "q", "LEASE", 0),
    ("RMQ.POP", "q", "COUNT", 2, "LEASE", -5),
    ("RMQ.POP", "q", "BLOCK", -1),
    ("RMQ.POP", "q", "COUNT", 2, "BOGUS"),
    ("RMQ.NACK", "q", "f2", "BOGUS"),
    ("RMQ.NACK", "rq", "x", "DELAY", -1),
    ("RMQ.SWEEP", "q", "LIMIT", -1),
    ("RMQ.SWEEP", "q", "LIMIT", "abc"),
    ("RMQ.ACK", "q"),
    ("RMQ.NACK", "q"),
    ("RMQ.ROUTE", "t", 3, "x"),
]


@pytest.mark.parametrize("call", FAILING_CALLS, ids=[" ".join(str(a)[:20] for a in c[:4])
                                                      for c in FAILING_CALLS])
def test_failing_command_changes_nothing(busy_queue, call):
    expect_error_unchanged(busy_queue, *call)


def test_kind_error_in_batch_with_merges_changes_nothing(r):
    push(r, "q", "AT", MIN_AT + 1000, "a", "b")
    expect_error_unchanged(r, "RMQ.PUSH", "q", "AT", MIN_AT + 5, "a", "b", "c", "")


# ---------------------------------------------------------------------------------------
# queue names
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a{b", "a}b", "{q}", "q{}", "}", "{"])
def test_queue_name_with_braces_rejected(r, name):
    for cmd in QUEUE_COMMANDS:
        expect_error_unchanged(r, cmd, name, *VALID_REST[cmd], contains="queue name")
    assert r.dbsize() == 0


def test_queue_name_plain_characters_ok(r):
    for name in ("q", "a:b", "topic_3", "with space", b"\x00bin\xff", "prepare", "dead"):
        assert push(r, name, "PRIORITY", 1, "m") == 1


# ---------------------------------------------------------------------------------------
# arity
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ALL_COMMANDS)
def test_no_arguments_is_arity_error(r, cmd):
    expect_error_unchanged(r, cmd, contains="wrong number of arguments")


@pytest.mark.parametrize("args", [
    ("RMQ.PUSH", "q"),
    ("RMQ.PUSH", "q", "PRIORITY"),
    ("RMQ.ACK", "q"),
    ("RMQ.NACK", "q"),
    ("RMQ.EXTEND", "q"),
    ("RMQ.EXTEND", "q", "m"),
    ("RMQ.EXTEND", "q", "m", "10", "x"),
    ("RMQ.CANCEL", "q"),
    ("RMQ.INFO", "q", "x"),
    ("RMQ.ROUTE", "t"),
    ("RMQ.ROUTE", "t", "8"),
    ("RMQ.ROUTE", "t", "8", "a", "b"),
])
def test_wrong_argument_count(r, args):
    # the contract-AMBIGUOUS: a missing trailing value could also be reported as a syntax error;
    # we only require an error that changes nothing.
    expect_error_unchanged(r, *args)


# ---------------------------------------------------------------------------------------
# fuzz
# ---------------------------------------------------------------------------------------

JUNK = [b"", b"\x00", b"\xff\xfe\x00", b"-1", b"0", b"1", b"2", b"-0", b"+1", b"01", b"abc",
        b"1.5", b"1e3", b"nan", b"inf", b"-inf", b" 1", b"1 ", b"9" * 40, b"-" + b"9" * 40,
        b"9223372036854775807", b"-9223372036854775808", b"9223372036854775808",
        b"18446744073709551616", str(2 ** 53).encode(), str(2 ** 53 + 1).encode(),
        str(MIN_AT).encode(), b"4294967296", b"2147483648",
        b"RANGE", b"PRIORITY", b"AT", b"DELAY", b"COUNT", b"LEASE", b"LIMIT", b"DEAD",
        b"range", b"count", b"q", b"rq", b"fq", b"q{", b"}", b"{q}", b"m", b"w1", b"f1", b"d1",
        b"x" * 300, bytes(range(256))]
QUEUES = [b"q", b"rq", b"fq", b"nq", b"", b"\x00", b"q{x}", b"\xff" * 10]


def _seed_state(r):
    push(r, "q", "PRIORITY", 1, "w1", "f1", "d1")
    pop(r, "q", "COUNT", 2)
    push(r, "rq", "RANGE", 1, "x", "m")
    push(r, "fq", "AT", MIN_AT, "m", "f1")
    pop(r, "fq")


def test_fuzz_malformed_calls_keep_server_alive(server, r):
    rnd = random.Random(20240613)
    _seed_state(r)
    calls = []
    # systematic: each command with 0..3 junk arguments after a queue
    for cmd in ALL_COMMANDS:
        calls.append((cmd,))
        for j in JUNK:
            calls.append((cmd, rnd.choice(QUEUES), j))
            calls.append((cmd, rnd.choice(QUEUES), j, rnd.choice(JUNK)))
            calls.append((cmd, j, rnd.choice(JUNK), rnd.choice(JUNK)))
    # option-shaped junk
    for cmd, opts in (("RMQ.PUSH", [b"RANGE", b"PRIORITY", b"AT", b"DELAY"]),
                      ("RMQ.POP", [b"COUNT", b"LEASE"]),
                      ("RMQ.NACK", [b"DELAY", b"DEAD"]),
                      ("RMQ.SWEEP", [b"LIMIT"]),
                      ("RMQ.REPLAY", [b"COUNT"]),
                      ("RMQ.PENDING", [b"COUNT"]),
                      ("RMQ.TPOP", [b"COUNT", b"QUANTUM", b"LEASE"]),
                      ("RMQ.QUEUES", [b"MATCH", b"COUNT", b"CURSOR"]),
                      ("RMQ.POLICY", [b"SET", b"GET", b"RESET", b"retries", b"rate", b"paused"]),
                      ("RMQ.SCHEDULE", [b"SET", b"DEL", b"LIST", b"EVERY", b"CRON", b"TZ", b"START",
                                        b"END", b"TIMES", b"RANGE", b"GROUP"])):
        for _ in range(120):
            q = rnd.choice(QUEUES)
            args = [cmd] if cmd == "RMQ.QUEUES" else [cmd, q]
            if cmd == "RMQ.TPOP":
                args.append(rnd.choice([b"8", b"3", b"x"]))
            if cmd == "RMQ.NACK":
                args.append(rnd.choice([b"m", b"f1", b"w1", b"x"]))
            for _ in range(rnd.randrange(0, 5)):
                args.append(rnd.choice(opts) if rnd.random() < 0.5 else rnd.choice(JUNK))
            calls.append(tuple(args))
    # random arity and content (JUNK holds no BLOCK, so no POP here can legitimately wait)
    for _ in range(600):
        cmd = rnd.choice(ALL_COMMANDS)
        calls.append((cmd, *[rnd.choice(JUNK) for _ in range(rnd.randrange(0, 7))]))
    # BLOCK with bad values only (a valid large BLOCK would legitimately wait)
    for v in (b"-1", b"abc", b"", b"1.5", b"18446744073709551616", b"-9223372036854775808",
              b"nan"):
        calls.append(("RMQ.POP", b"nq", b"BLOCK", v))
        calls.append(("RMQ.POP", b"nq", b"COUNT", b"0", b"BLOCK", v))
    calls.append(("RMQ.POP", b"nq", b"BLOCK"))
    calls.append(("RMQ.POP", b"nq", b"BLOCK", b"1"))

    errors = 0
    for call in calls:
        try:
            r.execute_command(*call)
        except redis.ResponseError:
            errors += 1
        except (redis.ConnectionError, redis.TimeoutError) as e:
            pytest.fail(f"server connection failed after {call!r}: {e}\n"
                        + server.log_text()[-3000:])
        assert r.ping(), f"server did not answer PING after {call!r}"
    assert errors > 0
    assert server.alive()
    log = server.log_text()
    assert "panic" not in log.lower(), log[-3000:]
