"""Persistence (docs/COMMANDS.md: Replication, persistence, cluster).

A seeded random workload of every command (short leases rolled back by the server timer
during it), then a restart on the same dir restores exactly the state before it -- keys,
members, scores, hash fields -- from:
  - the AOF (appendonly yes; effects only, no RMQ command in it),
  - the AOF after a rewrite in the middle of the workload (RDB preamble + increments),
  - an RDB file written by SAVE.
After the restart the module picks up the leases it loaded: one that runs out after the
restart is rolled back by the new process's timer within 1 s.
"""

import glob
import os
import time

import pytest

from durability_support import Workload, assert_same, dump, nonempty_states, now_ms, settle
from helpers import prep, zs
from server_support import Server, wait_for
from timing_support import watch_rollback

MODULES_ARGS = ["retries", 3]
PERSIST_CONF = {
    "aof": ["--appendonly", "yes", "--appendfsync", "everysec"],
    "aof-rewrite": ["--appendonly", "yes", "--appendfsync", "everysec"],
    "rdb": [],
}
# a lease that runs out after the restart; the restart must be over well before it does
LATE_LEASE = 6000


@pytest.fixture
def server_factory():
    started = []

    def start(conf):
        s = Server(conf=conf, module_args=MODULES_ARGS, tag="rmq-persist").start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def wait_rewrite_done(c, timeout=10):
    wait_for(lambda: (lambda i: i.get("aof_rewrite_in_progress") == 0
                      and i.get("aof_rewrite_scheduled") == 0)(c.info("persistence")),
             timeout, what="the AOF rewrite to finish")


def aof_files(server):
    return sorted(glob.glob(os.path.join(server.dir, "appendonlydir", "*.aof")))


@pytest.mark.parametrize("mode", ["aof", "aof-rewrite", "rdb"])
def test_restart_restores_exact_state(server_factory, mode):
    s = server_factory(PERSIST_CONF[mode])
    c = s.client()
    wl = Workload(c, seed={"aof": 11, "aof-rewrite": 12, "rdb": 13}[mode])
    wl.run(seconds=0.8)
    if mode == "aof-rewrite":
        assert c.bgrewriteaof()
        wait_rewrite_done(c)
        wl.run(seconds=0.5)
    settle(c)

    # one lease that runs out only after the restart
    c.execute_command("RMQ.PUSH", "late:q", "PRIORITY", 7, "late")
    assert c.execute_command("RMQ.POP", "late:q", "LEASE", LATE_LEASE) == [[b"late", 1]]
    deadline = int(zs(c, prep("late:q"))[b"late"])

    before = dump(c)
    w, f, d = nonempty_states(before)
    assert w and f, f"workload left too little state to compare: {(w, f, d)}"
    if mode == "rdb":
        assert c.save()
    else:
        wait_rewrite_done(c)

    s.restart()  # SIGTERM (no RDB save on shutdown: save ""), start on the same dir
    c = s.client()
    assert now_ms() < deadline - 500, "restart too slow to compare before the lease runs out"
    after = dump(c)
    assert_same(before, after, "before restart", "after restart")
    if mode == "rdb":
        assert not aof_files(s), "rdb mode must not have written an AOF"
        assert os.path.exists(os.path.join(s.dir, "dump.rdb"))
    else:
        files = aof_files(s)
        assert files, "no AOF files written"
        for path in files:
            with open(path, "rb") as fh:
                data = fh.read()
            assert b"RMQ." not in data.upper(), f"{path} holds RMQ commands, not effects"

    # the reloaded lease is rolled back by the timer of the new process
    first_out, _ = watch_rollback(c, "late:q", b"late", timeout=(deadline - now_ms()) / 1000 + 3.0)
    rolled_at = first_out[0]  # server ms of the first observation without the lease
    assert deadline <= rolled_at < deadline + 1000, (
        f"rolled back {rolled_at - deadline} ms after its deadline")
    assert zs(c, "late:q") == {b"late": 7.0}
    # nothing else moved: the workload's remaining leases are all long
    after2 = dump(c)
    for k in before:
        if b"late:q" not in k:
            assert after2.get(k) == before[k], f"{k!r} changed after the restart"


def test_kill9_with_fsync_always_restores_every_replied_change(server_factory):
    """kill -9 with appendfsync always: everything replied before the kill is reloaded."""
    s = server_factory(["--appendonly", "yes", "--appendfsync", "always"])
    c = s.client()
    Workload(c, seed=99, long_only=True).run(steps=1000)
    before = dump(c)
    s.restart(graceful=False)
    c = s.client()
    assert_same(before, dump(c), "before kill -9", "after restart")


def test_changes_count_for_save_points_without_aof_or_replicas(server_factory):
    """With nobody to send effects to, RMQ still counts its changes as Redis commands do
    (rdb_changes_since_last_save drives the `save` points); reads count nothing."""
    s = server_factory([])
    c = s.client()

    def changes():
        return c.info("persistence")["rdb_changes_since_last_save"]

    before = changes()
    assert c.execute_command("RMQ.PUSH", "q", "PRIORITY", 1, "a", "b") == 2
    after_push = changes()
    assert after_push > before
    assert c.execute_command("RMQ.INFO", "q")
    assert sorted(c.execute_command("RMQ.POP", "q", "COUNT", 5)) == [[b"a", 1], [b"b", 1]]
    assert changes() > after_push
    settled = changes()
    assert c.execute_command("RMQ.POP", "q") is None
    assert c.execute_command("RMQ.ACK", "q", "nothing") == 0
    assert changes() == settled
    # A TPOP over many queues counts as one command's change, and one that takes
    # nothing counts nothing.
    for i in range(4):
        c.execute_command("RMQ.PUSH", f"t_{i}", "PRIORITY", 1, "m")
    settled = changes()
    assert len(c.execute_command("RMQ.TPOP", "t", 4, "COUNT", 4)) == 4
    assert changes() == settled + 1
    assert c.execute_command("RMQ.TPOP", "t", 4) is None
    assert changes() == settled + 1


def test_aof_switched_on_at_runtime_holds_later_changes(server_factory):
    """CONFIG SET appendonly yes on a server that sent no effects so far: the rewrite
    snapshots the state and every change after it reaches the AOF as effects."""
    s = server_factory([])
    c = s.client()
    Workload(c, 31).run(steps=200)
    assert c.config_set("appendonly", "yes")
    wait_rewrite_done(c)
    Workload(c, 32).run(steps=300)
    settle(c)
    c.config_set("appendfsync", "always")
    c.execute_command("RMQ.PUSH", "tail:q", "PRIORITY", 1, "x")  # fsynced with the rest
    before = dump(c)
    assert before, "no state to compare"
    s.conf += ["--appendonly", "yes"]
    s.restart()
    assert_same(before, dump(s.client()), "before restart", "after restart (AOF)")


def test_an_emptied_queue_keeps_its_sequence_and_windows_through_an_aof_restart(server_factory):
    """The AOF holds `DEL Q` for a queue that emptied: loading it is no deletion by hand, so
    the push sequence and the deduplication windows stay (numbers never repeat, a duplicate
    is still one); a queue that was deleted by hand before stays without them."""
    s = server_factory(PERSIST_CONF["aof"])
    c = s.client()
    for q in ("emptied", "by-hand"):
        c.execute_command("RMQ.PUSH", q, "DELAY", 0, "SEQUENCE", "p", "DEDUP", "d", 600000, "MESSAGES", "m")
    got = c.execute_command("RMQ.POP", "emptied")[0][0]
    assert c.execute_command("RMQ.ACK", "emptied", got) == 1
    c.delete("by-hand")
    wait_for(lambda: c.exists("seq{by-hand}", "dedup{by-hand}") == 0, 10, what="the abandonment")
    kept = {k: c.dump(k) for k in (b"seq{emptied}", b"dedup{emptied}", b"dedupexp{emptied}")}
    assert all(kept.values())
    s.restart()
    c = s.client()
    time.sleep(0.3)  # an abandonment would be a timer's work right after the load
    assert {k: c.dump(k) for k in kept} == kept
    assert c.exists("seq{by-hand}", "dedup{by-hand}", "dedupexp{by-hand}", "by-hand") == 0
    assert c.execute_command("RMQ.PUSH", "emptied", "DELAY", 0, "SEQUENCE", "p", "DEDUP", "d", 600000,
                             "MESSAGES", "x") == [[b"duplicate", 1, None]]
    assert c.execute_command("RMQ.PUSH", "emptied", "DELAY", 0, "SEQUENCE", "p", "MESSAGES", "y") == \
        [[b"added", 2, None]]
