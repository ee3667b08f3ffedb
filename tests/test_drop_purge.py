"""RMQ.DROP Q and RMQ.PURGE Q [DEAD] (docs/COMMANDS.md).

- DROP deletes every key the module keeps for `Q` (every state, policy, schedules,
  deduplication, sequence, delivery ids, journal) and nothing else, on the primary and on
  its replica (replicated as effects); it answers 1 if `Q` had a key, else 0. Afterwards
  RMQ.QUEUES does not list it, its schedules never fire, ACK/ACKID of former deliveries
  answer 0, and consumers blocked on it stay blocked.
- PURGE removes waiting (held back included) and in-flight messages, with DEAD the dead
  ones too, and keeps the rest; removed deliveries have ended (their leases roll nothing
  back); the journal gets one `purged` entry per removed message, at most n.
- A 200,000-message queue goes in a prompt command (the server's own commandstats).
- Every error: arity, a bad option, WRONGTYPE, a bad name, a replica's refusal.
"""

import threading
import time

import pytest
import redis

from helpers import expect_error_unchanged, info_rmq, raw_client, rmq_info, snapshot
from server_bin import server_version
from server_support import Server, wait_for, wait_replica_synced

# Every key of queue q, named as the docs' Keys table names them.
SUFFIXES = ["prepare", "dead", "meta", "park", "parkidx", "hold", "sched", "seq", "dedup",
            "dedupexp", "moving", "journal"]


def queue_keys(q):
    return {q.encode()} | {f"{s}{{{q}}}".encode() for s in SUFFIXES}


@pytest.fixture(scope="module")
def pair():
    p = Server(conf=("--repl-diskless-sync-delay", 0), tag="rmq-drop").start()
    rep = Server(conf=("--replicaof", "127.0.0.1", p.port), tag="rmq-drop-replica").start()
    try:
        wait_replica_synced(p.client(), rep.client())
        yield p, rep
    finally:
        rep.stop()
        p.stop()


@pytest.fixture
def r(pair):
    c = pair[0].client()
    c.flushall()
    c.config_set("notify-keyspace-events", "")
    return c


@pytest.fixture
def rc(pair, r):
    return pair[1].client()


def all_keys(c):
    return set(c.scan_iter(count=1000))


def replica_caught_up(r, rc):
    assert r.execute_command("WAIT", 1, 10000) >= 1
    wait_for(lambda: snapshot(rc) == snapshot(r), timeout=10, what="the replica holds the primary's keys")


def full_queue(r, q):
    """A priority queue with every key: waiting, held back by its group, held by a retry
    delay, in flight (named), dead, claimed for a move; a policy with a journal, a
    schedule, a sequence and a deduplication window. Returns the in-flight delivery's id."""
    x = r.execute_command
    x("RMQ.POLICY", q, "SET", "retries", 5, "journal", 100)
    x("RMQ.PUSH", q, "PRIORITY", 6, "claimed-one")
    x("RMQ.PUSH", q, "PRIORITY", 5, "dead-one")
    x("RMQ.PUSH", q, "PRIORITY", 4, "held-one")
    x("RMQ.PUSH", q, "PRIORITY", 3, "GROUP", "g", "in-flight-one")
    got = x("RMQ.POP", q, "COUNT", 4, "IDS")
    assert [e[0] for e in got] == [b"claimed-one", b"dead-one", b"held-one", b"in-flight-one"]
    x("RMQ.PUSH", q, "PRIORITY", 1, "GROUP", "g", "parked-one")
    x("RMQ.PUSH", q, "PRIORITY", 0, "waiting-one")
    x("RMQ.PUSH", q, "PRIORITY", 0, "SEQUENCE", "n:", "numbered")
    x("RMQ.PUSH", q, "PRIORITY", 0, "DEDUP", "d1", 600000, "deduplicated")
    assert x("RMQ.NACK", q, "claimed-one", "DEAD") == b"dead"
    assert x("RMQ.NACK", q, "dead-one", "DEAD") == b"dead"
    assert x("RMQ.NACK", q, "held-one", "DELAY", 600000) == b"requeued"
    assert [e[0] for e in x("RMQ.REDRIVE", q, "CLAIM", "COUNT", 1)] == [b"claimed-one"]
    x("RMQ.SCHEDULE", q, "SET", "s", "EVERY", 3600000, "PRIORITY", 1, "tick")
    assert queue_keys(q) <= all_keys(r), "the test queue lacks a key"
    return got[3][2]


def neighbours(r):
    """Keys that are no part of queue q: another queue (whose name q prefixes), q's name
    in other tags, plain keys."""
    r.execute_command("RMQ.PUSH", "q2", "DELAY", 0, "GROUP", "g", "a", "b")
    r.execute_command("RMQ.POLICY", "q2", "SET", "retries", 2)
    r.set("q:plain", "v")
    r.set("meta{q}x", "v")
    r.hset("other{q}", "f", "v")


def test_drop_deletes_every_key_of_the_queue_and_nothing_else(r, rc):
    neighbours(r)
    before = all_keys(r)
    full_queue(r, "q")
    replica_caught_up(r, rc)
    assert queue_keys("q") <= all_keys(rc)
    assert r.execute_command("RMQ.DROP", "q") == 1
    assert all_keys(r) == before
    replica_caught_up(r, rc)
    assert all_keys(rc) == before
    assert r.execute_command("RMQ.DROP", "q") == 0
    assert r.execute_command("RMQ.DROP", "never-was") == 0
    assert all_keys(r) == before


def test_drop_of_a_queue_with_only_one_key(r):
    """Any one key of the queue's makes it a queue DROP answers 1 for."""
    for setup in (lambda: r.execute_command("RMQ.POLICY", "p", "SET", "retries", 1),
                  lambda: r.execute_command("RMQ.SCHEDULE", "p", "SET", "s", "EVERY", 3600000, "DELAY", 0, "m"),
                  lambda: r.execute_command("RMQ.PUSH", "p", "DELAY", 0, "m"),
                  lambda: r.xadd("journal{p}", {"event": "pushed"})):
        setup()
        assert all_keys(r), "nothing was made"
        assert r.execute_command("RMQ.DROP", "p") == 1
        assert all_keys(r) == set()


def test_after_drop_the_queue_is_gone_for_every_command(r):
    delivery = full_queue(r, "q")
    listed = lambda: set(r.execute_command("RMQ.QUEUES")[1])  # noqa: E731
    assert b"q" in listed()
    assert r.execute_command("RMQ.DROP", "q") == 1
    assert b"q" not in listed()
    assert r.execute_command("RMQ.ACK", "q", "in-flight-one") == 0
    assert r.execute_command("RMQ.ACKID", "q", delivery) == 0
    i = rmq_info(r, "q")
    assert (i["kind"], i["waiting"], i["inflight"], i["dead"], i["schedules"]) == (None, 0, 0, 0, 0)
    # A new queue of the name starts afresh, and its deliveries' ids come after the old.
    r.execute_command("RMQ.PUSH", "q", "DELAY", 0, "in-flight-one")
    [[m, n, new_id]] = r.execute_command("RMQ.POP", "q", "IDS")
    assert (m, n) == (b"in-flight-one", 1) and new_id > delivery
    assert r.execute_command("RMQ.ACKID", "q", delivery) == 0
    assert r.execute_command("RMQ.ACKID", "q", new_id) == 1


def test_schedules_of_a_dropped_queue_never_fire(r):
    r.execute_command("RMQ.SCHEDULE", "s", "SET", "tick", "EVERY", 50, "DELAY", 0, "tick")
    fired = info_rmq(r)["schedule_fired"]
    wait_for(lambda: info_rmq(r)["schedule_fired"] > fired, timeout=10, what="a firing")
    firing = info_rmq(r)["schedules"]
    assert r.execute_command("RMQ.DROP", "s") == 1
    assert info_rmq(r)["schedules"] == firing - 1, "the timer still plans the dropped schedule"
    fired = info_rmq(r)["schedule_fired"]
    t0 = int(r.time()[0])
    wait_for(lambda: int(r.time()[0]) >= t0 + 1, timeout=10, what="a second on the server's clock")
    assert info_rmq(r)["schedule_fired"] == fired
    assert all_keys(r) == set()


def test_consumers_blocked_on_a_dropped_queue_stay_blocked(pair, r):
    r.execute_command("RMQ.POLICY", "b", "SET", "retries", 1)
    out = []
    consumer = pair[0].client()
    t = threading.Thread(target=lambda: out.append(consumer.execute_command("RMQ.POP", "b", "BLOCK", 20000)))
    t.start()
    wait_for(lambda: info_rmq(r)["blocked_clients"] == 1, timeout=10, what="the consumer blocked")
    assert r.execute_command("RMQ.DROP", "b") == 1
    time.sleep(0.2)
    assert info_rmq(r)["blocked_clients"] == 1 and out == []
    r.execute_command("RMQ.PUSH", "b", "DELAY", 0, "m")
    t.join(10)
    assert out == [[[b"m", 1]]]


def test_purge_removes_waiting_and_in_flight_and_keeps_the_rest(r, rc):
    neighbours(r)
    delivery = full_queue(r, "q")
    info = rmq_info(r, "q")
    assert (info["waiting"], info["inflight"], info["dead"]) == (5, 1, 1)
    kept = {k: v for k, v in snapshot(r).items()
            if k in {b"dead{q}", b"sched{q}", b"seq{q}", b"dedup{q}", b"dedupexp{q}", b"moving{q}"}}
    assert r.execute_command("RMQ.PURGE", "q") == 6
    after = snapshot(r)
    for k, v in kept.items():
        assert after[k] == v, f"{k} changed"
    gone = {b"q", b"prepare{q}", b"park{q}", b"parkidx{q}", b"hold{q}"}
    assert set(after) == (all_keys(r) | gone) - gone
    assert not gone & set(after)
    # meta{q}: the policy, the last delivery id and the dead message's record only.
    assert sorted(r.hkeys("meta{q}")) == [b"ddead-one", b"ids", b"policy"]
    info = rmq_info(r, "q")
    assert (info["kind"], info["waiting"], info["inflight"], info["dead"], info["schedules"]) == (b"priority", 0, 0, 1, 1)
    assert r.execute_command("RMQ.ACK", "q", "in-flight-one") == 0
    assert r.execute_command("RMQ.ACKID", "q", delivery) == 0
    # The deduplication window and the sequence go on.
    assert r.execute_command("RMQ.PUSH", "q", "PRIORITY", 0, "DEDUP", "d1", 600000, "again")[0][0] == b"duplicate"
    r.execute_command("RMQ.PUSH", "q", "PRIORITY", 0, "SEQUENCE", "n:", "next")
    assert r.get("seq{q}") == b"2"
    replica_caught_up(r, rc)
    assert r.execute_command("RMQ.PURGE", "q", "dead") == 2
    assert sorted(r.hkeys("meta{q}")) == [b"policy"]
    assert not {b"dead{q}", b"q"} & all_keys(r)
    assert r.execute_command("RMQ.PURGE", "q", "DEAD") == 0
    replica_caught_up(r, rc)
    assert r.exists("q2", "park{q2}", "meta{q2}", "q:plain", "meta{q}x", "other{q}") == 6


def test_purge_of_a_queue_without_records_and_of_none(r):
    r.execute_command("RMQ.PUSH", "f", "DELAY", 0, "a", "b", "c")
    assert r.execute_command("RMQ.PURGE", "f") == 3
    assert all_keys(r) == set(), "an emptied queue leaves no keys"
    assert r.execute_command("RMQ.PURGE", "f") == 0
    assert r.execute_command("RMQ.PURGE", "f", "DEAD") == 0
    assert all_keys(r) == set()


def test_purged_leases_never_roll_back(r):
    r.execute_command("RMQ.PUSH", "l", "DELAY", 0, "a", "b")
    r.execute_command("RMQ.POP", "l", "COUNT", 2, "LEASE", 50)
    expired = info_rmq(r)["expired"]
    assert r.execute_command("RMQ.PURGE", "l") == 2
    t0 = int(r.time()[0])
    wait_for(lambda: int(r.time()[0]) >= t0 + 1, timeout=10, what="a second on the server's clock")
    assert r.execute_command("RMQ.SWEEP", "l") == 0
    assert info_rmq(r)["expired"] == expired
    assert all_keys(r) == set()


def purged_entries(r, q):
    return [f for _, f in r.xrange(f"journal{{{q}}}") if f[b"event"] == b"purged"]


def test_purge_journals_each_removed_message_at_most_n(r):
    r.execute_command("RMQ.POLICY", "j", "SET", "journal", 100)
    r.execute_command("RMQ.PUSH", "j", "PRIORITY", 1, "a", "b", "c")
    [[died, _]] = r.execute_command("RMQ.POP", "j")
    r.execute_command("RMQ.NACK", "j", died, "DEAD")
    [[taken, _]] = r.execute_command("RMQ.POP", "j")
    [waiting] = {b"a", b"b", b"c"} - {died, taken}
    r.client_setname("purger")
    assert r.execute_command("RMQ.PURGE", "j", "DEAD") == 3
    got = purged_entries(r, "j")
    # A dead message keeps no delivery count; the in-flight one had 1, the waiting one 0.
    assert sorted((f[b"message"], f[b"deliveries"], f[b"by"]) for f in got) == sorted([
        (died, b"0", b"purger"), (taken, b"1", b"purger"), (waiting, b"0", b"purger")])
    # journal 2: of 5 removed, 2 entries.
    r.execute_command("RMQ.POLICY", "j", "SET", "journal", 2)
    r.execute_command("RMQ.PUSH", "j", "PRIORITY", 1, "v", "w", "x", "y", "z")
    before = len(purged_entries(r, "j"))
    assert r.execute_command("RMQ.PURGE", "j") == 5
    assert len(purged_entries(r, "j")) - before == 2
    assert r.execute_command("RMQ.DROP", "j") == 1
    assert not r.exists("journal{j}")


def test_events(pair, r):
    r.config_set("notify-keyspace-events", "Kd")
    p = pair[0].client().pubsub()
    p.psubscribe("__keyspace@0__:e")
    wait_for(lambda: p.get_message(timeout=0.1) is not None, timeout=5, what="subscribed")
    r.execute_command("RMQ.PUSH", "e", "DELAY", 0, "a")
    assert r.execute_command("RMQ.PURGE", "e") == 1
    assert r.execute_command("RMQ.PURGE", "e") == 0
    r.execute_command("RMQ.POLICY", "e", "SET", "retries", 1)
    assert r.execute_command("RMQ.DROP", "e") == 1
    assert r.execute_command("RMQ.DROP", "e") == 0
    seen = []
    wait_for(lambda: seen.append(p.get_message(timeout=0.1)) or b"rmq.dropped" in [m and m["data"] for m in seen],
             timeout=5, what="the events")
    events = [m["data"] for m in seen if m and m["type"] == "pmessage"]
    assert events == [b"rmq.pushed", b"rmq.purged", b"rmq.dropped"]
    p.close()


def command_usec(r, name):
    return r.info("commandstats")[f"cmdstat_{name}"]["usec"]


@pytest.mark.parametrize("command", [["RMQ.DROP", "big"], ["RMQ.PURGE", "big"]])
def test_a_200000_message_queue_goes_promptly(r, command):
    """Grouped messages: 200,000 parked ones, each with a record in meta{big} and a
    member of parkidx{big}. The command's own time (INFO commandstats) stays far below
    what freeing them would cost: the keys are freed lazily."""
    pipe = r.pipeline(transaction=False)
    for b in range(200):
        pipe.execute_command("RMQ.PUSH", "big", "DELAY", 0, "GROUP", "g", *(f"m{b}:{i}" for i in range(1000)))
    assert sum(pipe.execute()) == 200_000
    assert r.hlen("meta{big}") > 200_000 and r.zcard("park{big}") == 199_999
    r.config_resetstat()
    assert r.execute_command(*command) == (1 if command[0] == "RMQ.DROP" else 200_000)
    usec = command_usec(r, command[0].lower())
    print(f"{command[0]} of 200,000 messages: {usec} us in the command")
    assert usec < 50_000, f"{command[0]} of 200,000 messages took {usec} us in the command"
    assert not r.exists("big", "park{big}", "parkidx{big}", "meta{big}")
    assert rmq_info(r, "big")["waiting"] == 0


def test_errors(pair, r, rc):
    for args in (["RMQ.DROP"], ["RMQ.DROP", "a", "b"], ["RMQ.PURGE"], ["RMQ.PURGE", "a", "DEAD", "x"]):
        expect_error_unchanged(r, *args, contains="wrong number of arguments")
    r.execute_command("RMQ.PUSH", "q", "DELAY", 0, "a")
    for typo in ("DEADD", "DEA", "COUNT"):
        expect_error_unchanged(r, "RMQ.PURGE", "q", typo, contains=("syntax", typo))
    for bad in ("a{b", "}", ""):
        expect_error_unchanged(r, "RMQ.DROP", bad, contains="queue name")
        expect_error_unchanged(r, "RMQ.PURGE", bad, contains="queue name")
    r.set("s", "v")
    r.set("meta{h}", "v")
    for q in ("s", "h"):
        for args in (["RMQ.DROP", q], ["RMQ.PURGE", q], ["RMQ.PURGE", q, "DEAD"]):
            expect_error_unchanged(r, *args, contains="WRONGTYPE")
    replica_caught_up(r, rc)
    for args in (["RMQ.DROP", "q"], ["RMQ.PURGE", "q"], ["RMQ.PURGE", "q", "DEAD"]):
        with pytest.raises(redis.exceptions.ReadOnlyError):
            rc.execute_command(*args)
    assert rmq_info(rc, "q")["waiting"] == 1


def test_command_docs_and_acl(pair, r):
    def text(v):
        return v.decode() if isinstance(v, bytes) else v
    for name in ("rmq.drop", "rmq.purge"):
        info = r.execute_command("COMMAND", "INFO", name)[name]
        assert "write" in {text(f) for f in info["flags"]}, info
        # Servers before 7.2 take no categories from modules (the flags decide there).
        cats = {text(c) for c in info["acl_categories"]}
        if server_version() >= (7, 2):
            assert {"@write", "@slow"} <= cats, cats
        else:
            assert cats == set(), cats
    for name in ("rmq.drop", "rmq.purge"):
        docs = raw_client(pair[0]).execute_command("COMMAND", "DOCS", name)
        assert b"summary" in docs[1] and b"queue" in str(docs[1]).encode(), f"COMMAND DOCS {name}: {docs}"
    r.execute_command("ACL", "SETUSER", "reader", "on", "nopass", "~*", "+@read")
    c = redis.Redis(port=r.connection_pool.connection_kwargs["port"], username="reader", password="x")
    with pytest.raises(redis.exceptions.NoPermissionError):
        c.execute_command("RMQ.DROP", "q")
    with pytest.raises(redis.exceptions.NoPermissionError):
        c.execute_command("RMQ.PURGE", "q")
    c.close()
    r.execute_command("ACL", "DELUSER", "reader")
