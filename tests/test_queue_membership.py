"""What is a queue, and a queue deleted by hand (docs/COMMANDS.md: RMQ.QUEUES, "Changes in v4"): a name
is listed while the module keeps something for it (any of its `{Q}`-tagged keys), not for a
sorted set alone (an application's leaderboard), though POP and TPOP still take messages
ZADD-written into a queue's `Q`; `DEL Q`, `UNLINK Q` or Q's expiry, with nothing in flight
or dead and no policy or schedule, take the queue's other keys with it, on primaries and
replicas alike."""

import pytest
import redis

from helpers import pop, prep, push, start_replica, wait_replica_matches, wait_until

# The module tidies up after the deleting command, on its next event-loop pass: generous
# for a loaded machine.
TIDY_S = 10


def listed(r):
    cursor, names = b"0", []
    while True:
        cursor, page = r.execute_command("RMQ.QUEUES", "COUNT", 10000, "CURSOR", cursor)
        names += page
        if cursor == b"0":
            return sorted(names)


def keys(r):
    return sorted(r.keys("*"))


def test_a_sorted_set_alone_is_no_queue(r):
    r.zadd("leaderboard", {"alice": 10, "bob": 7})
    r.zadd("scores_3", {"x": 1})
    assert listed(r) == []
    r.zincrby("leaderboard", 5, "bob")
    r.zunionstore("board_0", ["leaderboard"])
    r.restore("copied", 0, r.dump("leaderboard"))
    r.copy("leaderboard", "copy2")
    r.rename("copy2", "renamed")
    assert listed(r) == [], "written, restored, copied or renamed by hand: still no queue"


def test_pop_and_tpop_take_zadd_written_messages_and_then_list_the_queue(r):
    r.zadd("q", {"a": 1})
    r.zadd("t_1", {"b": 1})
    assert listed(r) == []
    assert pop(r, "q") == [(b"a", 1)]
    assert listed(r) == [b"q"], "the module now keeps its delivery"
    assert r.execute_command("RMQ.TPOP", "t", 2, "COUNT", 5) == [[b"t_1", b"b", 1]]
    assert listed(r) == [b"q", b"t_1"]


@pytest.mark.parametrize("write", [
    lambda r: r.hset("sched{s}", "n", "x"),
    lambda r: r.hincrby("meta{s}", "f", 1),
    lambda r: r.set("meta{s}", "hello"),
    lambda r: r.eval("redis.call('SADD', KEYS[1], 'x')", 1, "hold{s}"),
    lambda r: r.hset("dead{s}", "a", "b"),
    lambda r: r.zadd("dead{s}", {"m": 1}),
    lambda r: r.restore("prepare{s}", 0, dump_of(r, {"m": 1})),
], ids=["hset-sched", "hincrby-meta", "set-meta", "script-sadd-hold", "hset-dead", "zadd-dead", "restore-prepare"])
def test_a_tagged_key_written_by_hand_lists_its_queue(r, write):
    write(r)
    assert listed(r) == [b"s"]
    r.delete(*r.keys("*{s}"))
    assert listed(r) == []


def dump_of(r, members):
    r.zadd("__tmp__", members)
    d = r.dump("__tmp__")
    r.delete("__tmp__")
    return d


def test_a_tagged_key_written_by_hand_in_another_database_is_listed_there(r):
    r.execute_command("SELECT", 2)
    r.hset("meta{other}", "kind", "priority")
    assert listed(r) == [b"other"]
    r.execute_command("SELECT", 0)
    assert listed(r) == []


@pytest.mark.parametrize("how", ["del", "unlink", "expire"])
def test_a_queue_deleted_by_hand_goes_away(r, how):
    push(r, "q", "PRIORITY", 1, "a", "b")
    r.execute_command("RMQ.PUSH", "g", "PRIORITY", 1, "GROUP", "x", "a", "b", "c")
    push(r, "other", "DELAY", 60000, "m")
    assert r.exists("meta{q}") and listed(r) == [b"g", b"other", b"q"]
    if how == "del":
        r.delete("q", "g")
    elif how == "unlink":
        r.unlink("q", "g")
    else:
        r.pexpire("q", 1)
        r.pexpire("g", 1)
    assert wait_until(lambda: keys(r) == [b"meta{other}", b"other"], timeout=TIDY_S), keys(r)
    assert listed(r) == [b"other"]
    push(r, "q", "PRIORITY", 1, "c")
    assert pop(r, "q") == [(b"c", 1)], "a new life from scratch"


@pytest.mark.parametrize("keep", ["inflight", "dead", "policy", "schedule"])
def test_a_queue_deleted_by_hand_with_something_kept_stays(r, keep):
    push(r, "q", "PRIORITY", 1, "a", "b")
    if keep == "inflight":
        pop(r, "q")
    elif keep == "dead":
        pop(r, "q")
        r.execute_command("RMQ.NACK", "q", "a", "DEAD")
    elif keep == "policy":
        r.execute_command("RMQ.POLICY", "q", "SET", "retries", 3)
    else:
        r.execute_command("RMQ.SCHEDULE", "q", "SET", "s", "EVERY", 60000, "PRIORITY", 1, "m")
    r.delete("q")
    # Whatever the tidy-up would do, it has done once a later command has run.
    r.execute_command("RMQ.PUSH", "probe", "PRIORITY", 1, "m")
    assert r.exists("meta{q}") or keep == "schedule"
    assert b"q" in listed(r)
    if keep == "inflight":
        assert r.zcard(prep("q")) == 1


def test_the_tidy_up_reaches_a_replica(start_server):
    p = start_server()
    c = p.client()
    rc = start_replica(start_server, p).client()
    push(c, "q", "PRIORITY", 1, "a")
    push(c, "keep", "PRIORITY", 1, "a")
    assert wait_replica_matches(c, rc)
    assert listed(rc) == [b"keep", b"q"]
    c.delete("q")
    assert wait_until(lambda: not c.exists("meta{q}"), timeout=TIDY_S)
    assert wait_replica_matches(c, rc, timeout=TIDY_S)
    assert not rc.exists("meta{q}")
    assert listed(rc) == [b"keep"]
    assert listed(c) == [b"keep"]


def test_a_tagged_key_made_as_a_later_key_is_listed_from_the_next_scan(start_server):
    """`MSET a 1 meta{x} v` sends no event the module follows (it would tax every write),
    and its first key is not a tagged one: the queue is listed once a scan has seen the key
    (a load, a restart)."""
    s = start_server(extra_conf=["--enable-debug-command", "yes"])
    c = s.client()
    c.mset({"a": 1, "meta{x}": "hello"})
    assert listed(c) == []
    c.execute_command("DEBUG", "RELOAD")
    assert listed(c) == [b"x"]


@pytest.mark.parametrize("transaction", [False, True])
def test_a_lazy_key_made_of_another_type_by_hand_is_refused_not_written(r, transaction):
    """The module remembers which of a queue's rarely used keys (dead, park, hold) are
    absent, and follows no creation event: a command that names one first (here SET, alone
    or in a transaction) makes it look again, so the queue answers WRONGTYPE instead of
    writing past it."""
    push(r, "q", "PRIORITY", 1, "a")
    assert pop(r, "q") == [(b"a", 1)]
    if transaction:
        with r.pipeline(transaction=True) as t:
            t.set("dead{q}", "x")
            t.execute()
    else:
        r.set("dead{q}", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.execute_command("RMQ.NACK", "q", "a", "DEAD")
    assert r.zcard(prep("q")) == 1, "the delivery is still in flight"
