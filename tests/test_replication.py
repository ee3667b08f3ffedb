"""Replication (docs/COMMANDS.md: Replication, persistence, cluster).

- Every state change reaches replicas as its effects: after a seeded random workload of every
  command (with timer rollbacks during it) and WAIT, a replica -- and a replica attached
  afterwards by a full sync -- holds exactly the primary's keys, members, scores and fields.
- Replicas never change queue state by themselves: with the primary stopped (SIGSTOP), leases
  on the replica run out and nothing happens.
- After a promotion (REPLICAOF NO ONE) the new primary rolls back the inherited expired leases
  within 1 s.
"""

import time

import pytest
import redis

from durability_support import (BlockingConsumer, Workload, assert_same, dump, now_ms,
                                nonempty_states, settle)
from helpers import info_rmq, prep, rmq_info, zs
from helpers import now_ms as server_ms
from server_support import Server, wait_for, wait_replica_synced
from timing_support import watch_rollback

MODULE_ARGS = ["retries", 3]
WORKLOAD_SECONDS = 2.0


@pytest.fixture
def servers():
    started = []

    def start(*conf):
        # no 5 s wait before a full sync (the default repl-diskless-sync-delay)
        conf = ("--repl-diskless-sync-delay", 0) + conf
        s = Server(conf=conf, module_args=MODULE_ARGS, tag="rmq-repl").start()
        started.append(s)
        return s

    yield start
    for s in reversed(started):
        s.resume()
        s.stop()


def primary_and_replica(start):
    p = start()
    rep = start("--replicaof", "127.0.0.1", p.port)
    pc, rc = p.client(), rep.client()
    wait_replica_synced(pc, rc)
    return p, rep, pc, rc


def run_workload(pc, p, seed, seconds):
    wl = Workload(pc, seed)
    consumer = BlockingConsumer(p.client(), ["wl:prio", "wl:delay"], seed + 1)
    consumer.start()
    try:
        wl.run(seconds=seconds)
    finally:
        consumer.stop()
    return wl, consumer


def rmq_commandstats(c):
    return {k: v for k, v in c.info("commandstats").items() if k.lower().startswith("cmdstat_rmq.")}


def test_replica_holds_exactly_the_primary_state_after_random_workload(servers):
    p, rep, pc, rc = primary_and_replica(servers)
    wl, consumer = run_workload(pc, p, seed=20240611, seconds=WORKLOAD_SECONDS)

    # every command was exercised, the timer rolled leases back and sent some to dead
    for name in ("RMQ.PUSH", "RMQ.POP", "RMQ.ACK", "RMQ.NACK", "RMQ.SWEEP", "RMQ.EXTEND",
                 "RMQ.CANCEL", "RMQ.REPLAY"):
        assert wl.counts.get(name, 0) > 0, f"workload never ran {name}: {wl.counts}"
    assert consumer.got > 0, "the blocking consumer got nothing"
    settle(pc)
    stats = info_rmq(pc)
    assert stats.get("expired", 0) > 0, f"no lease ran out during the workload: {stats}"
    assert stats.get("dead", 0) > 0, f"nothing went to dead during the workload: {stats}"

    assert pc.execute_command("WAIT", 1, 2000) == 1
    before = dump(pc)
    on_replica = dump(rc)
    assert before, "the workload left no keys at all"
    assert_same(before, on_replica, "primary", "replica")
    w, f, d = nonempty_states(before)
    assert w > 0 and f > 0, f"expected waiting and in-flight messages left: {(w, f, d)}"

    # a replica attached now gets the state by a full sync (RDB transfer): the same keys
    late = servers("--replicaof", "127.0.0.1", p.port)
    lc = late.client()
    wait_replica_synced(pc, lc)
    assert pc.execute_command("WAIT", 2, 2000) == 2
    assert_same(before, dump(lc), "primary", "late replica")
    assert_same(before, dump(pc), "primary before", "primary after")  # nothing moved meanwhile

    # effects, not verbatim commands: the replica never executed a write RMQ command
    writes = {k: v for k, v in rmq_commandstats(rc).items()
              if not any(r in k.lower() for r in ("rmq.info", "rmq.pending", "rmq.route"))}
    assert not writes, f"RMQ write commands were replicated verbatim: {writes}"


def test_replica_changes_nothing_by_itself_and_promotion_rolls_back_leases(servers):
    p, rep, pc, rc = primary_and_replica(servers)
    run_workload(pc, p, seed=777, seconds=1.0)
    settle(pc)

    # leases that run out while the primary is stopped, and some that do not
    q = "ex:q"
    pc.execute_command("RMQ.PUSH", q, "PRIORITY", 5, "a", "b", "c")
    pc.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "long", "waiting")
    short = pc.execute_command("RMQ.POP", q, "COUNT", 3, "LEASE", 3000)
    assert sorted(m for m, _ in short) == [b"a", b"b", b"c"]
    long_ = pc.execute_command("RMQ.POP", q, "LEASE", 120_000)
    assert long_ == [[b"long", 1]] or long_ == [[b"waiting", 1]]
    assert pc.execute_command("WAIT", 1, 2000) == 1
    snap = dump(pc)
    # the short leases are the three scores well below the 120 s one
    deadline = max(int(s) for s in zs(pc, prep(q)).values() if s < now_ms() + 60_000)

    p.pause()
    try:
        assert now_ms() < deadline, "test too slow: the short leases ran out before SIGSTOP"
        replica_before = dump(rc)
        assert_same(snap, replica_before, "primary", "replica")
        # past the deadlines by more than the 1 s the contract allows a primary
        while now_ms() < deadline + 1300:
            time.sleep(0.05)
        assert_same(replica_before, dump(rc), "replica before", "replica after the deadlines")
        assert info_rmq(rc).get("expired", 0) == 0
        # a client cannot make a replica change queue state either
        with pytest.raises(redis.ResponseError, match="(?i)read ?only"):
            rc.execute_command("RMQ.SWEEP", q)
        assert rmq_info(rc, q)["inflight"] == 4

        # promotion: the inherited expired leases are rolled back within 1 s
        assert rc.execute_command("REPLICAOF", "NO", "ONE") in (b"OK", True)
        t_promoted = server_ms(rc)
        # server ms of the first observation without each of the 3 expired leases
        t_done = max(watch_rollback(rc, q, m, timeout=5.0)[0][0] for m in (b"a", b"b", b"c"))
        store = zs(rc, q)
        assert {m: store.get(m) for m in (b"a", b"b", b"c")} == {b"a": 5, b"b": 5, b"c": 5}
        assert set(zs(rc, prep(q))) == {long_[0][0]}
        # the workload's long leases (none due within 30 s) are untouched
        after = dump(rc)
        for k, (t, v) in snap.items():
            if k.startswith(b"prepare{") and k != prep(q):
                assert after.get(k) == (t, v), f"{k!r} changed after the promotion"
        assert info_rmq(rc).get("expired", 0) == 3
        assert t_done - t_promoted < 1000, f"rolled back {t_done - t_promoted} ms after promotion"
    finally:
        p.resume()


# ---------------------------------------------------------------------------------------
# Effects are built only when a replica or the AOF can receive them: these check the
# moments a replica appears to a primary that had none, and a backlog outliving a restart.
# ---------------------------------------------------------------------------------------

def _same_after_wait(pc, rc, n=1):
    settle(pc)
    assert pc.execute_command("WAIT", n, 3000) == n
    before = dump(pc)
    assert before, "no state to compare"
    assert_same(before, dump(rc), "primary", "replica")


def test_replica_attached_to_a_primary_that_never_had_one(servers):
    p = servers()
    pc = p.client()
    run_workload(pc, p, seed=7001, seconds=1.0)
    rep = servers("--replicaof", "127.0.0.1", p.port)
    rc = rep.client()
    wait_replica_synced(pc, rc)
    run_workload(pc, p, seed=7002, seconds=1.0)
    _same_after_wait(pc, rc)

    # cut off, it misses changes; back, it continues from the backlog (partial resync)
    partial = pc.info("stats")["sync_partial_ok"]
    pc.client_kill_filter(_type="replica")
    Workload(pc, 7003).run(steps=300)
    wait_for(lambda: pc.info("stats")["sync_partial_ok"] > partial, 10, interval=0.05,
             what="the replica to resume by a partial resync")
    wait_replica_synced(pc, rc)
    _same_after_wait(pc, rc)


def test_primary_restarted_from_rdb_continues_its_replica(servers):
    """A primary restarted from an RDB file that carries its replication offset keeps a
    backlog, and its replica resumes from it: changes made between the restart and the
    replica's return must be in that backlog."""
    # a save point, so the shutdown writes the RDB with the final replication offset
    p = servers("--save", "3600 1")
    rep = servers("--replicaof", "127.0.0.1", p.port)
    pc, rc = p.client(), rep.client()
    wait_replica_synced(pc, rc)
    run_workload(pc, p, seed=7101, seconds=0.8)
    _same_after_wait(pc, rc)
    p.restart()
    pc = p.client()
    # at once, before the replica is back (it retries once a second)
    Workload(pc, 7102).run(steps=300)
    wait_replica_synced(pc, rc)
    assert pc.info("stats")["sync_partial_ok"] >= 1, "the replica was not resumed partially"
    _same_after_wait(pc, rc)
