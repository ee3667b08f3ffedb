"""What a hostile probe found (issue: hardening), each with the test that failed before
its fix: leases of keys that arrive by RENAME / MOVE / COPY, the empty queue name, ACL
categories, WATCH and commands that change nothing, consumers under OOM, a lost kind, and
memory after a long churn."""

import time

import pytest
import redis

from helpers import (ack, expect_error, expect_error_unchanged, info_rmq, nack, pop, prep, push, rmq_info,
                     watched_exec as _watched_exec, zs)
from timing_support import watch_rollback

QUEUE_COMMANDS = [
    ("RMQ.PUSH", "DELAY", 0, "m"), ("RMQ.POP",), ("RMQ.ACK", "m"), ("RMQ.NACK", "m"),
    ("RMQ.SWEEP",), ("RMQ.EXTEND", "m", 10), ("RMQ.CANCEL", "m"), ("RMQ.REPLAY",),
    ("RMQ.INFO",), ("RMQ.PENDING",), ("RMQ.POLICY", "GET"),
    ("RMQ.ACKID", 1), ("RMQ.NACKID", 1), ("RMQ.EXTENDID", 1, 10),
]

# What a Redis 7.0 deployment writes instead of `-@write` for RMQ (module commands have no
# ACL categories there): README, "ACL".
RMQ_WRITE_COMMANDS = ["rmq.push", "rmq.pop", "rmq.tpop", "rmq.ack", "rmq.nack", "rmq.sweep",
                      "rmq.extend", "rmq.ackid", "rmq.nackid", "rmq.extendid", "rmq.cancel",
                      "rmq.replay", "rmq.policy", "rmq.redrive", "rmq.schedule", "rmq.purge",
                      "rmq.drop"]


def rename_queue(r, src, dst, how):
    """Moves or copies every key of queue `src` to queue `dst` (db 1 for MOVE)."""
    for k in r.keys("*"):
        if k == src.encode() or k.endswith(b"{" + src.encode() + b"}"):
            new = k.replace(src.encode(), dst.encode())
            if how == "rename":
                r.rename(k, new)
            elif how == "copy":
                assert r.copy(k, new)
            else:
                assert r.move(k, 1)


@pytest.mark.parametrize("how", ["rename", "move", "copy"])
def test_leases_follow_keys_that_arrive(server, r, how):
    push(r, "fr", "DELAY", 0, "a", "b", "c")
    assert len(pop(r, "fr", "COUNT", 3, "LEASE", 500)) == 3
    deadline = int(max(zs(r, prep("fr")).values()))
    rename_queue(r, "fr", "fr" if how == "move" else "fr2", how)
    c = server.client(db=1) if how == "move" else r
    q = "fr" if how == "move" else "fr2"
    first_out, _ = watch_rollback(c, q, b"a", timeout=5)
    assert first_out[0] - deadline < 1000, "rolled back within 1 s of expiry, no command sent"
    assert rmq_info(c, q)["inflight"] == 0 and rmq_info(c, q)["waiting"] == 3
    if how == "copy":
        watch_rollback(r, "fr", b"a", timeout=5)
        assert rmq_info(r, "fr")["waiting"] == 3, "the original's leases roll back too"


@pytest.mark.parametrize("cmd", QUEUE_COMMANDS, ids=lambda c: c[0])
def test_empty_queue_name_is_an_error(r, cmd):
    expect_error_unchanged(r, cmd[0], "", *cmd[1:], contains="queue name")
    assert r.dbsize() == 0


def _categories(r, name):
    (entry,) = r.execute_command("COMMAND", "INFO", name)
    return {c.decode() if isinstance(c, bytes) else c for c in entry[6]}


def test_acl_categories_or_command_rules(server, r):
    r.execute_command("ACL", "SETUSER", "producer", "on", "nopass", "+@all", "~*")
    if "@write" in _categories(r, "rmq.push"):
        # The server has the API (Redis >= 7.2, Valkey): categories are declared.
        assert "@fast" in _categories(r, "rmq.ack") and "@read" in _categories(r, "rmq.info")
        assert "@blocking" in _categories(r, "rmq.pop")
        r.execute_command("ACL", "SETUSER", "producer", "-@write")
        has_own = b"rmq.push" in [c for c in r.execute_command("ACL", "CAT", "rmq")]
        if has_own:
            r.execute_command("ACL", "SETUSER", "none", "on", "nopass", "+@all", "-@rmq", "~*")
            none = server.client(username="none", password="x")
            for cmd in (("RMQ.INFO", "q"), ("RMQ.ROUTE", "t", 8, "b")):
                with pytest.raises(redis.exceptions.NoPermissionError):
                    none.execute_command(*cmd)
    else:
        # Redis 7.0: no categories for module commands; the explicit rules do the same.
        for c in RMQ_WRITE_COMMANDS:
            r.execute_command("ACL", "SETUSER", "producer", f"-{c}")
    p = server.client(username="producer", password="x")
    for cmd in (("RMQ.PUSH", "q", "DELAY", 0, "m"), ("RMQ.POP", "q"), ("RMQ.ACK", "q", "m"),
                ("RMQ.ACKID", "q", 1), ("RMQ.TPOP", "t", 8), ("RMQ.PURGE", "q"), ("RMQ.DROP", "q"),
                ("RMQ.REDRIVE", "q", "CLAIM"), ("RMQ.SCHEDULE", "q", "DEL", "s")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            p.execute_command(*cmd)
    assert rmq_info(p, "q")["kind"] is None, "reads stay allowed"
    assert r.dbsize() == 0


def test_commands_that_change_nothing_leave_watch_alone(server, r):
    push(r, "wq", "RANGE", 60000, "w")
    push(r, "wp", "PRIORITY", 1, "x")
    pop(r, "wp", "LEASE", 60000)
    noops = [
        ("RMQ.CANCEL", "wq", "nope"), ("RMQ.ACK", "wq", "nope"), ("RMQ.NACK", "wq", "nope"),
        ("RMQ.EXTEND", "wq", "nope", 10), ("RMQ.SWEEP", "wq"), ("RMQ.REPLAY", "wq"),
        ("RMQ.POP", "wq"), ("RMQ.PUSH", "wq", "RANGE", 60000, "w"), ("RMQ.INFO", "wq"),
        ("RMQ.PENDING", "wq"), ("RMQ.POLICY", "wq", "GET"), ("RMQ.POLICY", "wq", "RESET"),
        ("RMQ.TPOP", "wq", 4),
    ]
    for cmd in noops:
        assert _watched_exec(server, "wq", lambda: r.execute_command(*cmd)), f"{cmd} aborted a WATCH"
    assert _watched_exec(server, "other", lambda: r.execute_command("RMQ.CANCEL", "other", "nope"))
    assert _watched_exec(server, "wq", lambda: r.execute_command("RMQ.ACK", "wp", "x")), "another queue"
    # A real change aborts it, on whichever of the queue's keys is watched.
    assert not _watched_exec(server, "wq", lambda: push(r, "wq", "RANGE", 1, "new"))
    assert not _watched_exec(server, "wq", lambda: r.execute_command("RMQ.CANCEL", "wq", "new"))
    push(r, "wp", "PRIORITY", 1, "y")
    assert not _watched_exec(server, prep("wp"), lambda: pop(r, "wp"))


def test_consumers_drain_a_full_server(start_server):
    s = start_server(extra_conf=["--maxmemory-policy", "noeviction"])
    r = s.client()
    push(r, "full", "DELAY", 0, "poison")
    pop(r, "full")
    assert nack(r, "full", "poison", "DEAD") == b"dead"
    base = r.info("memory")["used_memory"]
    r.config_set("maxmemory", base + 2 * 1024 * 1024)
    payload = "x" * 2000
    pushed = 0
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        for i in range(10_000):
            push(r, "full", "DELAY", 0, f"{i}-{payload}")
            pushed += 1
    assert pushed > 100
    # Well past the limit now (it is not a sharp line: a push just under it goes in).
    r.config_set("maxmemory", base + 1024 * 1024)
    expect_error(r, "RMQ.PUSH", "full", "DELAY", 0, "more", contains="memory")
    expect_error(r, "RMQ.REPLAY", "full", contains="memory")
    got = pop(r, "full", "COUNT", 200, "LEASE", 60000)
    assert len(got) == 200, "POP works under OOM"
    assert nack(r, "full", got[0][0], "DEAD") == b"dead"
    assert r.execute_command("RMQ.EXTEND", "full", got[1][0], 60000) is not None
    assert r.execute_command("RMQ.CANCEL", "full", f"{pushed - 1}-{payload}") == 1
    assert r.execute_command("RMQ.SWEEP", "full") == 0
    before = r.info("memory")["used_memory"]
    assert ack(r, "full", *[m for m, _ in got[1:]]) == 199
    while True:
        more = pop(r, "full", "COUNT", 500, "LEASE", 60000)
        if not more:
            break
        ack(r, "full", *[m for m, _ in more])
    assert r.info("memory")["used_memory"] < before, "ACK frees memory"
    assert push(r, "full", "DELAY", 0, "again") == 1, "and producers can push again"
    assert r.execute_command("RMQ.TPOP", "full", 1) is None, "TPOP ran (topic 'full' has no slot queues)"


@pytest.mark.parametrize("lost", ["meta-deleted", "only-Q-renamed"])
def test_a_lost_kind_is_inferred(r, lost):
    push(r, "k", "PRIORITY", 5, "hi")
    push(r, "k", "PRIORITY", 1, "lo")
    if lost == "meta-deleted":
        r.delete("meta{k}")
        q = "k"
    else:
        r.rename("k", "k2")
        q = "k2"
    assert rmq_info(r, q)["kind"] == b"priority" and rmq_info(r, q)["ready"] == 2
    assert pop(r, q) == [(b"hi", 1)], "priority order, not wedged"
    expect_error_unchanged(r, "RMQ.PUSH", q, "DELAY", 0, "x", contains="kind")
    push(r, "t", "AT", 946684800000, "late")
    r.delete("meta{t}")
    assert rmq_info(r, "t")["kind"] == b"fixed"
    assert push(r, "t", "RANGE", 1, "r") == 1, "either timed kind is accepted"
    assert rmq_info(r, "t")["kind"] == b"range"
    assert pop(r, "t") == [(b"late", 1)]


@pytest.mark.parametrize("policy", [False, True])
def test_a_kind_left_behind_by_deleted_keys_gives_way(r, policy):
    """the contract: the kind lasts until store, prepare and dead are all empty; a store deleted by
    hand leaves meta{Q} behind, and the next push of another kind must not be refused."""
    if policy:
        r.execute_command("RMQ.POLICY", "k", "SET", "retries", 5)
    r.execute_command("RMQ.PUSH", "k", "PRIORITY", 3, "GROUP", "g", "a")
    r.delete("k")
    expect_error_unchanged(r, "RMQ.PUSH", "k", "RANGE", 60000, "b", "", contains="empty")
    assert push(r, "k", "RANGE", 60000, "b") == 1
    assert rmq_info(r, "k")["kind"] == b"range"
    want = {b"policy": b"retries=5,kind=range"} if policy else {b"kind": b"range"}
    got = r.hgetall("meta{k}")
    assert {f: v for f, v in got.items() if f in (b"kind", b"policy")} == want
    if not policy:
        assert got == want, "the stale waiting record of 'a' went with the kind"
    expect_error_unchanged(r, "RMQ.PUSH", "k", "PRIORITY", 1, "c", contains="kind")


def test_memory_returns_to_baseline_after_a_long_churn(r):
    def churn(rounds):
        for n in range(rounds):
            for i in range(20):
                q = f"churn_{i}"
                r.execute_command("RMQ.PUSH", q, "DELAY", 0, "GROUP", f"g{n % 3}", *[f"m{j}" for j in range(20)])
                push(r, f"p{i}", "PRIORITY", i, *[f"m{j}" for j in range(10)])
            for i in range(20):
                for q in (f"churn_{i}", f"p{i}"):
                    while True:
                        got = pop(r, q, "COUNT", 50, "LEASE", 60000)
                        if not got:
                            break
                        for m, d in got:
                            if d == 1 and m.endswith(b"1"):
                                nack(r, q, m)
                            else:
                                ack(r, q, m)
            assert r.execute_command("RMQ.TPOP", "churn", 32) is None
            assert r.dbsize() == 0
    r.execute_command("RMQ.POLICY", "p0", "SET", "backoff-ms", 0)
    r.execute_command("RMQ.POLICY", "p0", "RESET")
    churn(3)   # warm-up: caches and allocator pools
    time.sleep(0.1)
    base = r.info("memory")["used_memory"]
    churn(30)
    time.sleep(0.1)
    grown = r.info("memory")["used_memory"] - base
    assert grown < 64 * 1024, f"used_memory grew by {grown} bytes over 30 rounds"
    assert info_rmq(r)["blocked_clients"] == 0
