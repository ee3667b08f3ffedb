"""Model-based live fuzzing (fuzz_support.Fuzzer, model_support.Model): long random
sequences of every command against live servers on the test clock (`test-clock 1`), with
restarts (DEBUG RELOAD, SIGTERM, kill -9, RDB only), replica promotions and slot moves
injected; every reply and, after every step, every key and the INFO rmq counters agree
with the model of docs/COMMANDS.md.

Environment:
  RMQ_FUZZ_SEED     the seed (default: a random one, printed; a failure prints it and the
                    command line that replays the run)
  RMQ_FUZZ_STEPS    steps per test (default 2000 standalone, 600 cluster)
  RMQ_FUZZ_SECONDS  time cap per test in seconds (default 40 standalone, 20 cluster)

`make soak` (scripts/soak.py) runs the same fuzzer over many seeds for hours.
"""

import os

import pytest

from fuzz_support import (ClusterTarget, Fuzzer, MODULE_ARGS, Standalone, new_server,
                          seed_from_env)
from helpers import rmq_info, watched_exec


def _budget(steps, seconds):
    s = os.environ.get("RMQ_FUZZ_STEPS")
    t = os.environ.get("RMQ_FUZZ_SECONDS")
    return (int(s) if s else steps), (float(t) if t else seconds)


STANDALONE_FAULTS = {"reload": 2, "restart": 2, "kill9": 2, "rdb": 1, "promote": 2}


def test_model_fuzz_standalone():
    """Every command, groups, holds, policies, TPOP; restarts and promotions."""
    seed = seed_from_env()
    steps, seconds = _budget(2000, 40)
    print(f"\nmodel fuzz (standalone): seed {seed}, up to {steps} steps / {seconds} s")
    s = new_server()
    t = Standalone(s)
    try:
        f = Fuzzer(t, seed, faults=STANDALONE_FAULTS, fault_rate=0.012, label="standalone")
        n = f.run(steps=steps, seconds=seconds)
        print(f"steps {n}, operations checked {f.ops_checked}, faults {f.faults_done}")
        print(f"replies: {f.coverage_text()}")
        assert n > 0
    finally:
        t.server.stop()
        t.stop_extra()


def test_model_fuzz_slot_moves():
    """A 3-primary cluster: the queues' slots move between primaries while the fuzzer runs
    (TPOP goes to one primary at a time, over the topic's queues that primary serves)."""
    from cluster_support import Cluster
    seed = seed_from_env()
    steps, seconds = _budget(600, 20)
    print(f"\nmodel fuzz (cluster slot moves): seed {seed}, up to {steps} steps / {seconds} s")
    cluster = Cluster(masters=3, replicas=0, module_args=MODULE_ARGS, tag="rmq-fuzz-cluster")
    cluster.start()
    try:
        f = Fuzzer(ClusterTarget(cluster), seed, faults={"slot": 1}, fault_rate=0.04,
                   label="slot_moves")
        n = f.run(steps=steps, seconds=seconds)
        print(f"steps {n}, operations checked {f.ops_checked}, faults {f.faults_done}")
        assert n > 0
    finally:
        cluster.stop()


# ---------------------------------------------------------------------------------------
# What the fuzzer found, as minimal reproductions: module bugs (fixed; each test failed
# before its fix), and the v3 contract's held-back layout the model checks (a group's later
# messages wait outside Q behind its first).
# ---------------------------------------------------------------------------------------

def test_tpop_round_robin_after_a_queue_runs_dry(r):
    """the contract (TPOP): messages are taken round-robin, one from each queue with something
    deliverable in turn. t_0 has one message, t_1 and t_2 three each: COUNT 5 is one turn
    of three and a second turn of two, so t_1 and t_2 give two each. Before its fix the module gave
    t_1 three and t_2 one (after the first turn it shares what is left out by position,
    and the share t_0 cannot take goes to t_1 again)."""
    r.execute_command("RMQ.PUSH", "t_0", "PRIORITY", 1, "a")
    r.execute_command("RMQ.PUSH", "t_1", "PRIORITY", 1, "a", "b", "c")
    r.execute_command("RMQ.PUSH", "t_2", "PRIORITY", 1, "a", "b", "c")
    got = r.execute_command("RMQ.TPOP", "t", 4, "COUNT", 5)
    per_queue = {}
    for q, _m, _d in got:
        per_queue[q] = per_queue.get(q, 0) + 1
    assert per_queue == {b"t_0": 1, b"t_1": 2, b"t_2": 2}, got


def test_dead_again_without_group_forgets_old_group(r):
    """the contract: a content's group is the one given by its latest push, and a replayed message
    keeps the group it had. `a` dies in group g; pushed again without a group it dies
    again: dead{q} holds the one entry of its latest death, in no group, so REPLAY gives
    a message in no group. Before its fix the module kept the dead metadata of the first death (it
    writes a dead entry's metadata only when it is not the default: no group, no
    priority), so PENDING shows group g after the replay."""
    for cmd in [("RMQ.PUSH", "q", "DELAY", 0, "GROUP", "g", "a"), ("RMQ.POP", "q"),
                ("RMQ.NACK", "q", "a", "DEAD"), ("RMQ.PUSH", "q", "DELAY", 0, "a"),
                ("RMQ.POP", "q"), ("RMQ.NACK", "q", "a", "DEAD")]:
        r.execute_command(*cmd)
    assert r.execute_command("RMQ.REPLAY", "q") == 1
    assert r.execute_command("RMQ.POP", "q")[0][0] == b"a"
    pending = r.execute_command("RMQ.PENDING", "q")
    assert pending[0][3] is None, f"replayed message is in group {pending[0][3]!r}"


def _watch_holds(server, r, setup, cmd, q="q"):
    """Runs `setup`, then `cmd` (which must change no data) while another connection
    WATCHes all of q's keys; whether that connection's MULTI/EXEC still goes through."""
    for args in setup:
        r.execute_command(*args)
    keys = [q] + [f"{p}{{{q}}}" for p in ("prepare", "dead", "meta", "park", "parkidx", "hold")]
    before = {k: r.dump(k) for k in keys}
    held = watched_exec(server, keys, lambda: r.execute_command(*cmd))
    assert {k: r.dump(k) for k in keys} == before, "the command changed the data"
    return held


def test_push_merging_into_a_parked_copy_unchanged_leaves_keys_untouched(server, r):
    """the contract: a command that changes nothing leaves its keys untouched for WATCH. `d` waits
    in group g (held back: a's delivery of g is in flight) with priority 1; pushing it again
    with priority 1 and group g changes nothing, and WATCH must hold (before its fix the module unparked and
    parked it again)."""
    assert _watch_holds(server, r, [("RMQ.PUSH", "q", "PRIORITY", 5, "GROUP", "g", "a"), ("RMQ.POP", "q"),
                            ("RMQ.PUSH", "q", "PRIORITY", 1, "GROUP", "g", "d")],
                        ("RMQ.PUSH", "q", "PRIORITY", 1, "GROUP", "g", "d"))


def test_push_merging_into_a_held_copy_unchanged_leaves_keys_untouched(server, r):
    """the contract: a command that changes nothing leaves its keys untouched for WATCH. `e` is held
    back by its retry delay (backoff) with priority 2 in group g; pushing it again with
    priority 2 and group g changes nothing. Before its fix the module took it out of
    hold{q} and put it back, and wrote its record again (found by `make soak`, seed
    837991811)."""
    setup = [("RMQ.POLICY", "q", "SET", "backoff-ms", 600000), ("RMQ.PUSH", "q", "PRIORITY", 2, "GROUP", "g", "e"),
             ("RMQ.POP", "q"), ("RMQ.NACK", "q", "e")]
    assert _watch_holds(server, r, setup, ("RMQ.PUSH", "q", "PRIORITY", 2, "GROUP", "g", "e"))
    assert r.zscore("hold{q}", "e") is not None, "still held back"
    assert r.execute_command("RMQ.PUSH", "q", "PRIORITY", 3, "e") == 0
    assert r.execute_command("RMQ.PENDING", "q") == [] and r.zscore("hold{q}", "e") is not None


def test_policy_set_of_the_same_values_leaves_keys_untouched(server, r):
    """the contract: a command that changes nothing leaves its keys untouched for WATCH; setting a
    queue's policy to the values it has changes nothing, and WATCH must hold (before its fix meta{q} was written
    again)."""
    assert _watch_holds(server, r, [("RMQ.POLICY", "q", "SET", "retries", 2)],
                        ("RMQ.POLICY", "q", "SET", "retries", 2))


@pytest.fixture
def three_primaries():
    """A 3-primary cluster (no replicas) on the test clock, stopped after the test."""
    from cluster_support import Cluster
    cluster = Cluster(masters=3, replicas=0, module_args=MODULE_ARGS, tag="rmq-fuzz-tpop")
    cluster.start()
    try:
        for p, _id, _r in cluster.primaries():
            p.conn().execute_command("RMQ.TESTCLOCK", "SET", 4_102_444_800_000)
        yield cluster
    finally:
        cluster.stop()


def test_tpop_serves_a_slot_just_imported(three_primaries):
    """the contract (TPOP): under Redis Cluster, TPOP takes from the topic's queues in the hash
    slots this node serves. After mt_0's slot has moved to node B, TPOP on B must see
    mt_0's message. Before its fix the module kept the served slots it last read from CLUSTER NODES and
    read them again for a slot it did not show only 100 ms later -- by the module clock:
    with the real clock TPOP misses the slot for up to 100 ms after the move; on the test
    clock (standing still) until the clock moves."""
    from cluster_support import migrate_slot
    cluster = three_primaries
    src = cluster.owner("mt_0")
    dst = next(p for p, _id, _r in cluster.primaries() if p is not src)
    # a queue of the topic that B serves, so that a TPOP on B looks at its slots
    own = next(f"mt_{k}" for k in range(1, 64) if cluster.owner(f"mt_{k}") is dst)
    dst.conn().execute_command("RMQ.PUSH", own, "PRIORITY", 1, "x")
    src.conn().execute_command("RMQ.PUSH", "mt_0", "PRIORITY", 1, "m")
    assert dst.conn().execute_command("RMQ.TPOP", "mt", 64) == [[own.encode(), b"x", 1]]
    migrate_slot(cluster, cluster.keyslot("mt_0"), src, dst)
    assert dst.conn().execute_command("RMQ.TPOP", "mt", 64) == [[b"mt_0", b"m", 1]]


def test_tpop_counts_rate_limited_only_when_short(r):
    """the contract (Observability): rate_limited counts POPs and TPOPs that delivered fewer than
    asked because of a rate limit. t_0's bucket is empty; a TPOP of one message that t_1
    gives in full delivered what it asked for, and is not counted (before its fix it was: the TPOP looked at
    t_0 first and found its rate limit)."""
    from helpers import info_rmq
    r.execute_command("RMQ.POLICY", "t_0", "SET", "rate", 1, "rate-window-ms", 100000)
    r.execute_command("RMQ.PUSH", "t_0", "PRIORITY", 1, "a", "b")
    r.execute_command("RMQ.PUSH", "t_1", "PRIORITY", 1, "a", "b")
    assert r.execute_command("RMQ.POP", "t_0") is not None       # t_0's one token
    before = info_rmq(r)["rate_limited"]
    got = r.execute_command("RMQ.TPOP", "t", 2, "COUNT", 1)
    assert len(got) == 1, got
    assert info_rmq(r)["rate_limited"] == before, "a TPOP that got all it asked was counted"


def test_idle_group_messages_wait_behind_its_first(r):
    """the v3 contract (Keys): a group's later messages may be held back outside `Q` from their push
    on, behind the group's first waiting message. (Found by the model fuzzer as a deviation
    from the v2 contract, which v3 now allows: the model checks that only such messages are outside
    `Q`.) After a's delivery is acked, b heads group g in `Q` and c waits behind it."""
    r.execute_command("RMQ.PUSH", "q", "DELAY", 0, "GROUP", "g", "a", "b", "c")
    assert r.zrange("q", 0, -1) == [b"a"], "held back from the push on"
    assert r.execute_command("RMQ.POP", "q", "COUNT", 3) == [[b"a", 1]]
    assert r.execute_command("RMQ.ACK", "q", "a") == 1
    assert r.zrange("q", 0, -1) == [b"b"]
    assert r.zrange("park{q}", 0, -1) == [b"c"]
    i = rmq_info(r, "q")
    assert (i["waiting"], i["ready"]) == (2, 2)
    assert r.execute_command("RMQ.POP", "q", "COUNT", 3) == [[b"b", 1]]
