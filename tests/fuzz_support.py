"""The model-based live fuzzer: random sequences of every RMQ command, from a seed, against
live servers loaded with `test-clock 1`, each reply and, after every step, every key
checked against model_support.Model; restarts, replica promotions and slot moves injected.

    Fuzzer(target, seed).run(steps=..., seconds=...)

`Target` is where commands go: `Standalone` (one server, which a fault may restart, reload
or replace by its promoted replica) or `ClusterTarget` (a cluster_support.Cluster whose
queues' slots a fault moves between primaries). The clock is the module's test clock, set
on every node to the model's time, so lease expiries, due times, retry holds and rate
refills happen exactly when the model says; after the clock moves, the server's timer
rolls back what expired and the check waits (up to SETTLE_S) for it.

A step is one of: PUSH (every mode, groups, batches with repeats, bad messages, MESSAGES,
SEQUENCE and DEDUP with NOTE), POP
(COUNT, LEASE, short BLOCK), TPOP, ACK, NACK (DELAY, DEAD), EXTEND, CANCEL, REPLAY, PURGE, DROP, SWEEP,
REDRIVE CLAIM/DONE, INFO, PENDING, POLICY SET/GET/RESET, CONFIG SET rmq.*, ROUTE, a malformed command, a clock
move, a MULTI of a clock move and a command (which then sees expired leases before the
timer does), a POP blocked on its own connection until a push or a due time serves it,
or a backlog of up to 300 leases for the timer. A quarter of single commands run under
WATCH: one the model says changed nothing must leave the queue's keys untouched. Before a
promotion a replica receives 3 to 40 steps of effects and must then hold exactly the
primary's keys.

A failure raises FuzzFailure with the seed, the step, the last commands and the command
line that replays the run (the sequence is a function of the seed and the server's
replies, so the same seed against the same module replays it).
"""

import os
import random
import threading
import time
import zlib

import redis

from helpers import start_replica, wait_until
import model_schedules
from model_support import (COUNTERS, MIN_AT, POLICY_BOUNDS, Model, ModelMismatch,
                           check_keys, dead_key, prep_key)
from server_support import Server, info_section

# the model's clock starts in 2100: a restarted server reads the real clock until the
# fuzzer sets its test clock, and nothing of the model's is due by the real clock
T0 = 4_102_444_800_000
SETTLE_S = 2.0
# the share of single commands run under WATCH (see Fuzzer.watched)
WATCH_SHARE = 0.25
MODULE_ARGS = ["retries", "3", "lease-ms", "500", "test-clock", "1"]
RETRIES, LEASE_MS = 3, 500
SERVER_CONF = ["--appendonly", "yes", "--appendfsync", "always",
               "--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"]

GROUPS = [None, None, None, b"g1", b"g2", b"g\x00x"]
DEDUP_IDS = [b"d1", b"d2", b"d3", b"d\x00 x"]
# numbered contents (RMQ.PUSH SEQUENCE) a queue's pool keeps beside its plain messages
NUMBERED_IN_POOL = 4


class FuzzFailure(AssertionError):
    pass


def call(c, *args):
    """A command's reply, or the ResponseError it answered with."""
    try:
        return c.execute_command(*args)
    except redis.ResponseError as e:
        return e


def dump_keys(c):
    """Every key with its type and contents (helpers.snapshot's shape), in three pipelined
    round trips."""
    keys = sorted(c.keys("*"))
    if not keys:
        return {}
    p = c.pipeline(transaction=False)
    for k in keys:
        p.type(k)
    types = p.execute()
    p = c.pipeline(transaction=False)
    for k, t in zip(keys, types):
        if t == b"zset":
            p.zrange(k, 0, -1, withscores=True)
        elif t == b"hash":
            p.hgetall(k)
        elif t == b"string":
            p.get(k)
        else:
            p.type(k)
    vals = p.execute()
    out = {}
    for k, t, v in zip(keys, types, vals):
        if t == b"none":
            continue          # deleted meanwhile (the timer at work): the caller looks again
        if t == b"hash":
            v = sorted(v.items())
        out[k] = (t, v)
    return out


def rmq_counters(c):
    info = info_section(c, "rmq")
    out = {}
    for name in COUNTERS:
        out[name] = int(info.get(f"rmq_{name}", info.get(name, 0)))
    return out


def wait_aof_ready(c, timeout=20):
    """Wait until the AOF is on and no rewrite is under way or scheduled."""
    def ready():
        i = c.info("persistence")
        return (i.get("aof_enabled") == 1 and not i.get("aof_rewrite_in_progress")
                and not i.get("aof_rewrite_scheduled") and i.get("aof_status", "ok") == "ok"
                and not i.get("loading"))
    assert wait_until(ready, timeout=timeout, interval=0.02), "the AOF did not become ready"


# ---------------------------------------------------------------------------------------
# targets
# ---------------------------------------------------------------------------------------

class Standalone:
    """One server (its replacement after a promotion)."""

    def __init__(self, server):
        self.server = server
        self.extra = []      # replicas started for a promotion (stopped by the fuzzer)

    def conn_for(self, q):
        return self.server.conn()

    def new_client(self, q):
        return self.server.client()

    def nodes(self):
        return [self.server.conn()]

    def dump(self):
        return dump_keys(self.server.conn())

    def tpop_node(self, names, rng):
        return self.server.conn(), names

    def stop_extra(self):
        for s in self.extra:
            s.stop()
        self.extra = []


class ClusterTarget:
    """A cluster_support.Cluster of primaries; each queue is served by its slot's owner."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.owner = {}       # slot -> Server
        self.prim = [p for p, _id, _r in cluster.primaries()]

    def slot(self, q):
        return self.cluster.keyslot(q)

    def node_for(self, q):
        s = self.slot(q)
        if s not in self.owner:
            self.owner[s] = self.cluster.owner_of_slot(s)
        return self.owner[s]

    def conn_for(self, q):
        return self.node_for(q).conn()

    def new_client(self, q):
        return self.node_for(q).client()

    def nodes(self):
        return [p.conn() for p in self.prim]

    def dump(self):
        out = {}
        for p in self.prim:
            d = dump_keys(p.conn())
            both = set(d) & set(out)
            if both:
                raise ModelMismatch(f"keys on two nodes at once: {sorted(both)[:5]}")
            out.update(d)
        return out

    def tpop_node(self, names, rng):
        """A primary, and the topic's queues it serves."""
        p = rng.choice(self.prim)
        return p.conn(), [n for n in names if self.node_for(n) is p]


# ---------------------------------------------------------------------------------------
# the fuzzer
# ---------------------------------------------------------------------------------------

QUEUES = {
    "mq:r": ("range",),
    "mq:p": ("priority",),
    "mq:f": ("fixed",),
    "mq:x": ("range", "priority", "fixed"),
    "mt_0": ("priority",),
    "mt_1": ("range",),
    "mt_2": ("fixed",),
    "mt_3": ("priority", "fixed"),
}
TOPIC = "mt"
BULK_QUEUE = "mq:bulk"     # only do_bulk uses it


class Op:
    """One step's commands (run as one MULTI when there are several) and the check of
    their replies against the model."""

    def __init__(self, q, cmds, check, multi=False, clock=False, all_nodes=False, node=None):
        self.q, self.cmds, self.check, self.multi, self.clock = q, cmds, check, multi, clock
        self.node = node                # the connection to send it to (default: q's node)
        self.all_nodes = all_nodes      # a single command sent to every node alike


def _fmt(args):
    out = []
    for a in args:
        if isinstance(a, bytes):
            try:
                s = a.decode()
                out.append(s if s.isprintable() and s and " " not in s else repr(a))
            except UnicodeDecodeError:
                out.append(repr(a))
        else:
            out.append(str(a))
    return " ".join(out)


class Fuzzer:
    """faults: {"reload": w, "restart": w, "kill9": w, "rdb": w, "promote": w, "slot": w}
    relative weights; fault_rate: the chance per step of injecting one."""

    def __init__(self, target, seed, faults=None, fault_rate=0.0, tpop=True, label="fuzz",
                 queues=None):
        self.t = target
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = dict(faults or {})
        self.fault_rate = fault_rate
        self.tpop = tpop
        self.label = label
        self.specs = dict(queues or QUEUES)
        self.pool = {q: self._pool(q) for q in self.specs}
        self.model = Model(T0 + self.rng.randrange(0, 10 ** 6), retries=RETRIES, lease_ms=LEASE_MS)
        for q in list(self.specs) + [BULK_QUEUE]:
            self.model.q(q)
        self.log = []
        self.ops_checked = 0
        self.steps = 0
        self.faults_done = {}
        self.base = None
        self.coverage = {}     # (command, shape of the reply) -> how often
        self.replica = None    # a replica attached for a promotion
        self.promote_at = self.replica_steps = 0

    def coverage_text(self):
        return ", ".join(f"{c} {r}: {n}" for (c, r), n in sorted(self.coverage.items()))

    @staticmethod
    def _pool(q):
        return [b"a", b"b", b"c", b"d", b"e", b"f", b"m\x00\xff" + q.encode()[-1:]]

    # -- plumbing -----------------------------------------------------------------------
    def _note(self, text):
        self.log.append(f"[{self.steps}] {text}")
        del self.log[:-40]

    def set_clock(self):
        for c in self.t.nodes():
            got = c.execute_command("RMQ.TESTCLOCK", "SET", self.model.now)
            if got != self.model.now:
                raise ModelMismatch(f"TESTCLOCK SET replied {got!r}")

    def counters(self):
        tot = dict.fromkeys(COUNTERS, 0)
        for c in self.t.nodes():
            for k, v in rmq_counters(c).items():
                tot[k] += v
        return tot

    def rebase(self):
        """The server's counters now correspond to the model's (after a start/restart)."""
        srv = self.counters()
        self.base = {k: srv[k] - self.model.counters[k] for k in COUNTERS}

    def start(self):
        self.set_clock()
        self.verify(settle=False)
        self.rebase()

    def verify(self, settle):
        deadline = time.monotonic() + (SETTLE_S if settle else 0)
        while True:
            dump = self.t.dump()
            try:
                check_keys(self.model, dump)
                break
            except ModelMismatch:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)
        if self.base is not None:
            srv = self.counters()
            got = {k: srv[k] - self.base[k] for k in COUNTERS}
            if got != self.model.counters:
                diff = {k: (got[k], self.model.counters[k]) for k in COUNTERS
                        if got[k] != self.model.counters[k]}
                raise ModelMismatch(f"INFO rmq counters (server, model) differ: {diff}")

    def execute(self, op, verify=True):
        c = op.node or self.t.conn_for(op.q)
        if op.all_nodes:
            replies = [call(c, *op.cmds[0])]
            for other in self.t.nodes():
                if other is not c:
                    other.execute_command(*op.cmds[0])
        elif op.multi or len(op.cmds) > 1:
            # the other nodes' clocks move first; the command runs on the queue's node
            for cmd in op.cmds:
                if cmd[0] == "RMQ.TESTCLOCK":
                    for other in self.t.nodes():
                        if other is not c:
                            other.execute_command(*cmd)
            p = c.pipeline(transaction=True)
            for cmd in op.cmds:
                p.execute_command(*cmd)
            replies = p.execute(raise_on_error=False)
        elif self.rng.random() < WATCH_SHARE and op.cmds[0][0] != "RMQ.TPOP":
            self.watched(c, op, verify)
            return
        else:
            replies = [call(c, *op.cmds[0])]
        self.after(op, replies, verify)

    def watched(self, c, op, verify=True):
        """Runs a single command under WATCH of all the queue's keys: when the model says it
        changed nothing (a nil NACK, an ACK of nothing, a read, an error...), a MULTI/EXEC
        after it must go through (docs/COMMANDS.md: a command that changes nothing leaves its keys
        untouched for WATCH; one that errors changes nothing)."""
        q = op.q.encode() if isinstance(op.q, str) else op.q
        keys = [q] + [p + b"{" + q + b"}" for p in (b"prepare", b"dead", b"meta", b"park",
                                                      b"parkidx", b"hold", b"sched", b"seq",
                                                      b"dedup", b"dedupexp", b"moving")]
        before = repr(self.model.q(op.q))
        keys_before = {k: v for k, v in self.t.dump().items() if k in keys}
        pipe = c.pipeline(transaction=True)
        try:
            pipe.watch(*keys)
            try:
                reply = pipe.execute_command(*op.cmds[0])
            except redis.ResponseError as e:
                reply = e
            self.after(op, [reply], verify=False)
            # (a command may also move a held-back message between the queue's keys, e.g.
            # a POP parking a message whose group is busy: that is a change)
            if repr(self.model.q(op.q)) == before and \
                    {k: v for k, v in self.t.dump().items() if k in keys} == keys_before:
                pipe.multi()
                pipe.ping()
                try:
                    pipe.execute()
                except redis.WatchError:
                    raise ModelMismatch(f"{_fmt(op.cmds[0])} changed nothing (model) but "
                                        f"touched a key of {op.q!r} (WATCH failed)")
                self.coverage[("WATCH held", "")] = self.coverage.get(("WATCH held", ""), 0) + 1
        finally:
            pipe.reset()
        if verify:
            self.verify(settle=False)

    def after(self, op, replies, verify):
        for cmd, rep in zip(op.cmds, replies):
            self._note(_fmt(cmd))
            self.coverage[(str(cmd[0]).upper(), _shape(rep))] = \
                self.coverage.get((str(cmd[0]).upper(), _shape(rep)), 0) + 1
        self._note(f"  -> {replies!r}"[:400])
        op.check(replies)
        self.ops_checked += len(op.cmds)
        if op.clock:
            self.model.timer()
        if verify:
            self.verify(settle=op.clock)

    # -- generators ----------------------------------------------------------------------
    def _queue(self):
        names = sorted(self.specs)
        return self.rng.choice(names)

    def _msgs(self, q, lo=1, hi=3):
        return self.rng.sample(self.pool[q], self.rng.randint(lo, hi))

    def _inflight_or_any(self, q, p=0.85):
        fl = sorted(self.model.q(q).flight)
        if fl and self.rng.random() < p:
            return self.rng.choice(fl)
        return self.rng.choice(self.pool[q])

    def g_push(self, q):
        rng, m = self.rng, self.model
        kinds = self.specs[q]
        cur = m.q(q).kind
        kind = cur if cur and rng.random() < 0.9 else rng.choice(kinds)
        if rng.random() < 0.02:
            kind = rng.choice(("range", "priority", "fixed"))
        if kind == "range":
            mode, val = "RANGE", rng.choice([1, 5, 20, 100, 500])
        elif kind == "priority":
            mode, val = "PRIORITY", rng.choice([-5, 0, 1, 2, 3, 7, 2 ** 53, -(2 ** 53)])
        elif rng.random() < 0.5:
            mode, val = "AT", max(MIN_AT, m.now + rng.choice([-1000, -10, 0, 10, 50, 300]))
        else:
            mode, val = "DELAY", rng.choice([0, 0, 5, 50, 300])
        group = rng.choice(GROUPS)
        msgs = self._msgs(q)
        if rng.random() < 0.1:
            msgs.append(msgs[0])              # the same content twice in one batch
        if rng.random() < 0.02:
            msgs.insert(rng.randrange(len(msgs) + 1), b"")   # error: nothing stored
        if rng.random() < 0.3:
            mode = mode.lower()
        args = ["RMQ.PUSH", q, mode, val] + (["GROUP", group] if group else [])
        if rng.random() < 0.25:
            return self._ledger_push(q, mode, val, group, args, msgs)
        if rng.random() < 0.2:
            args.append(rng.choice(["MESSAGES", "messages"]))
        return Op(q, [args + msgs], lambda r: m.push(q, mode, val, group, msgs, r[0]))

    def _ledger_push(self, q, mode, val, group, args, msgs):
        """A push with SEQUENCE and/or DEDUP (few ids, windows from 1 ms to 5 s, so that
        duplicates, ended windows and pruning all happen); the contents it numbers join the
        queue's pool for the commands that follow."""
        rng, m = self.rng, self.model
        opts = []
        prefix = dedup = None
        if rng.random() < 0.6:
            prefix = rng.choice([b"", b"p ", b"gw1 "])
            opts.append(["SEQUENCE", prefix])
        if prefix is None or rng.random() < 0.5:
            note = rng.choice([None, None, b"", b"msg-1", b"n \x00x"])
            dedup = (rng.choice(DEDUP_IDS), rng.choice([1, 50, 500, 5000]), note)
            opts.append(["DEDUP", dedup[0], dedup[1]] + ([] if note is None else ["NOTE", note]))
        rng.shuffle(opts)
        args = args + [a for o in opts for a in o] + (["MESSAGES"] if rng.random() < 0.5 else [])

        def check(r):
            first = m.q(q).seq + 1
            m.push_ledger(q, mode, val, group, msgs, prefix, dedup, r[0])
            outcome = ("PUSH outcome", r[0][0][0].decode() if isinstance(r[0], list) else "error")
            self.coverage[outcome] = self.coverage.get(outcome, 0) + 1
            if prefix is not None and m.q(q).seq >= first:
                numbered = [prefix + b"%020d " % (first + i) + x for i, x in enumerate(msgs)]
                base = self._pool(q)
                self.pool[q] = base + (self.pool[q][len(base):] + numbered)[-NUMBERED_IN_POOL:]
        return Op(q, [args + msgs], check)

    def g_pop(self, q, in_multi=False):
        rng, m = self.rng, self.model
        count = rng.choice([1, 1, 2, 3, 5])
        lease = rng.choice([None, 10, 50, 200, 1000, 5000])
        args = ["RMQ.POP", q]
        if count != 1 or rng.random() < 0.3:
            args += ["COUNT", count]
        if lease is not None:
            args += ["LEASE", lease]
        if not in_multi and rng.random() < 0.05:
            args += ["BLOCK", rng.choice([1, 5])]
        return Op(q, [args], lambda r: m.pop(q, count, lease, r[0]))

    def g_tpop(self, _q):
        """TPOP on the server (under a cluster: on one primary, over the topic's queues it
        serves)."""
        rng, m = self.rng, self.model
        slots = rng.choice([4, 4, 4, 2, 8, 1])
        count = rng.choice([1, 2, 3, 5, 8])
        lease = rng.choice([None, 50, 500])
        args = ["RMQ.TPOP", TOPIC, slots, "COUNT", count] + (["LEASE", lease] if lease else [])
        names = [n for n in self.specs if n.startswith(TOPIC + "_")]
        node, served = self.t.tpop_node(names, rng)
        return Op(served[0] if served else names[0], [args],
                  lambda r: m.tpop(TOPIC, slots, count, lease, r[0], served), node=node)

    def g_ack(self, q):
        msgs = [self._inflight_or_any(q) for _ in range(self.rng.randint(1, 3))]
        return Op(q, [["RMQ.ACK", q] + msgs], lambda r: self.model.ack(q, msgs, r[0]))

    def g_nack(self, q):
        rng = self.rng
        msg = self._inflight_or_any(q)
        delay = rng.choice([0, 10, 100, 1000]) if rng.random() < 0.3 else None
        dead = rng.random() < 0.15
        args = ["RMQ.NACK", q, msg] + (["DELAY", delay] if delay is not None else []) + (["DEAD"] if dead else [])
        return Op(q, [args], lambda r: self.model.nack(q, msg, delay, dead, r[0]))

    def g_extend(self, q):
        msg = self._inflight_or_any(q, 0.8)
        ms = self.rng.choice([1, 10, 100, 2000])
        return Op(q, [["RMQ.EXTEND", q, msg, ms]],
                  lambda r: self.model.extend(q, msg, ms, r[0]))

    def g_cancel(self, q):
        msgs = self._msgs(q)
        return Op(q, [["RMQ.CANCEL", q] + msgs], lambda r: self.model.cancel(q, msgs, r[0]))

    def g_replay(self, q):
        count = self.rng.choice([None, 1, 2, 3])
        args = ["RMQ.REPLAY", q] + (["COUNT", count] if count else [])
        # the dead set right after, in the same transaction: which equally old deaths a
        # COUNT took is the server's choice
        return Op(q, [args, ["ZRANGE", dead_key(q), 0, -1]],
                  lambda r: self.model.replay(q, count, r[0], set(r[1])), multi=True)

    def g_sweep(self, q):
        limit = self.rng.choice([None, 1, 2])
        args = ["RMQ.SWEEP", q] + (["LIMIT", limit] if limit else [])
        return Op(q, [args, ["ZRANGE", prep_key(q), 0, -1]],
                  lambda r: self.model.sweep(q, limit, r[0], set(r[1])), multi=True)

    def g_purge(self, q):
        dead = self.rng.random() < 0.5
        args = ["RMQ.PURGE", q] + (["DEAD"] if dead else [])
        return Op(q, [args], lambda r: self.model.purge(q, dead, r[0]))

    def g_redrive(self, q):
        rng, m = self.rng, self.model
        if rng.random() < 0.6:
            count = rng.choice([None, 1, 2])
            stale = rng.choice([None, 1, 100])
            args = ["RMQ.REDRIVE", q, "CLAIM"] + (["COUNT", count] if count else []) + \
                (["STALE", stale] if stale else [])
            return Op(q, [args], lambda r: m.claim(q, count or 100, stale or 30000, r[0]))
        claimed = sorted(m.q(q).moving)
        msgs = rng.sample(claimed, min(len(claimed), rng.randint(1, 2))) if claimed else []
        if not msgs or rng.random() < 0.2:
            msgs.append(rng.choice(self.pool[q]))
        return Op(q, [["RMQ.REDRIVE", q, "DONE"] + msgs], lambda r: m.claim_done(q, msgs, r[0]))

    def g_drop(self, q):
        return Op(q, [["RMQ.DROP", q]], lambda r: self.model.drop(q, r[0]))

    def g_info(self, q):
        return Op(q, [["RMQ.INFO", q]], lambda r: self.model.info(q, r[0]))

    def g_pending(self, q):
        count = self.rng.choice([None, 1, 2, 3])
        args = ["RMQ.PENDING", q] + (["COUNT", count] if count else [])
        return Op(q, [args], lambda r: self.model.pending(q, count, r[0]))

    def g_policy(self, q):
        rng, m = self.rng, self.model
        x = rng.random()
        if x < 0.35:
            return Op(q, [["RMQ.POLICY", q, "GET"]], lambda r: m.policy_get(q, r[0]))
        if x < 0.5:
            return Op(q, [["RMQ.POLICY", q, "RESET"]], lambda r: m.policy_reset(q, r[0]))
        values = {"retries": [0, 1, 2, 5], "lease-ms": [20, 100, 1000],
                  "max-queue-length": [0, 0, 4, 8], "backoff-ms": [0, 10, 100],
                  "backoff-max-ms": [50, 150, 1000], "rate": [0, 0, 1, 3],
                  "rate-window-ms": [100, 1000]}
        fields = rng.sample(sorted(values), rng.randint(1, 3))
        pairs = [(f, rng.choice(values[f])) for f in fields]
        if rng.random() < 0.05:
            f = rng.choice(sorted(POLICY_BOUNDS))
            pairs.append((f, POLICY_BOUNDS[f][1] + 1))      # error: nothing changes
        args = ["RMQ.POLICY", q, "SET"] + [x for kv in pairs for x in kv]
        return Op(q, [args], lambda r: m.policy_set(q, pairs, r[0]))

    def g_schedule(self, q):
        """RMQ.SCHEDULE SET (EVERY or every k seconds by CRON; START, END, TIMES; the
        queue's mode or, rarely, another; now and then a bad argument), DEL or LIST."""
        rng, m = self.rng, self.model
        names = [b"s1", b"s2", b"s\x00"]
        x = rng.random()
        if x < 0.15:
            return Op(q, [["RMQ.SCHEDULE", q, "LIST"]], lambda r: model_schedules.schedule_list(m, q, r[0]))
        if x < 0.35:
            dels = rng.sample(names, rng.randint(1, 2))
            return Op(q, [["RMQ.SCHEDULE", q, "DEL", *dels]],
                      lambda r: model_schedules.schedule_del(m, q, dels, r[0]))
        args, every, cron_k, start, end, times = [], None, None, None, None, None
        if rng.random() < 0.6:
            every = rng.choice([7, 50, 100, 333, 1000])
            args += ["EVERY", every]
            if rng.random() < 0.3:
                start = m.now + rng.choice([1, 10, 500])
        else:
            cron_k = rng.choice([1, 2, 5])
            args += ["CRON", "* * * * * *" if cron_k == 1 else f"*/{cron_k} * * * * *"]
            start = m.now + 1        # else a match at now would fire before any clock move
        if start is not None:
            args += ["START", start]
        if rng.random() < 0.2:
            end = m.now + rng.choice([50, 1000, 4000])
            args += ["END", end]
        if rng.random() < 0.3:
            times = rng.choice([1, 2, 5])
            args += ["TIMES", times]
        kinds = self.specs[q]
        kind = m.q(q).kind or rng.choice(kinds)
        if rng.random() < 0.05:
            kind = rng.choice(("range", "priority", "fixed"))
        mode, value = {"range": ("RANGE", rng.choice([1, 50, 500])),
                       "priority": ("PRIORITY", rng.choice([-3, 0, 4])),
                       "fixed": ("DELAY", rng.choice([0, 20, 300]))}[kind]
        args += [mode, value]
        group = rng.choice(GROUPS)
        if group is not None:
            args += ["GROUP", group]
        msg = rng.choice(self.pool[q])
        syntax = None
        if rng.random() < 0.05:
            args[1], syntax = 0, "EVERY 0" if every is not None else "bad"
            if every is None:
                args[1] = "61 * * * * *"
        sname = rng.choice(names)
        # LIST shows the push in its canonical form, ending its options with MESSAGES.
        text = b" ".join(a if isinstance(a, bytes) else str(a).encode() for a in args + ["MESSAGES", msg])
        sched = model_schedules.Sched(every, cron_k, start, end, times, mode, value, group, msg, text)
        return Op(q, [["RMQ.SCHEDULE", q, "SET", sname, *args, msg]],
                  lambda r: model_schedules.schedule_set(m, q, sname, sched, r[0], syntax))

    def g_error(self, q):
        """A malformed command: an error reply, nothing changed."""
        bad = self.rng.choice([
            ["RMQ.POP", q, "COUNT", 0], ["RMQ.PUSH", q, "RANGE", 0, b"a"],
            ["RMQ.NACK", q, b"a", "DELAY", -1], ["RMQ.EXTEND", q, b"a", 0],
            ["RMQ.PUSH", "x{y}", "PRIORITY", 1, b"a"], ["RMQ.TPOP", TOPIC, 3],
            ["RMQ.PUSH", q, "AT", 1700000000, b"a"], ["RMQ.SWEEP", q, "LIMIT", 0],
            ["RMQ.PUSH", q, "PRIORITY", 2 ** 53 + 1, b"a"], ["RMQ.PENDING", q, "COUNT"],
        ])

        def check(r):
            if not isinstance(r[0], Exception):
                raise ModelMismatch(f"{_fmt(bad)} should fail, replied {r[0]!r}")
        return Op(q, [bad], check)

    def g_config(self, q):
        """CONFIG SET rmq.<setting> on every node: the server-wide defaults policies
        override (a restart puts back the load arguments)."""
        rng, m = self.rng, self.model
        name, value = rng.choice([("retries", rng.choice([0, 1, RETRIES, 5])),
                                  ("lease-ms", rng.choice([30, LEASE_MS, 2000])),
                                  ("max-queue-length", rng.choice([0, 0, 10])),
                                  ("max-message-bytes", rng.choice([3, 1048576, 1048576]))])

        def check(r):
            if r[0] not in (b"OK", True):
                raise ModelMismatch(f"CONFIG SET rmq.{name} {value} replied {r[0]!r}")
            m.settings[name] = value
        return Op(q, [["CONFIG", "SET", f"rmq.{name}", value]], check, all_nodes=True)

    def g_route(self, q):
        """RMQ.ROUTE topic slots basis: `<topic>_<crc32(basis) mod slots>` (zlib's CRC-32)."""
        slots = self.rng.choice([1, 2, 8, 1024, 16384, 3])
        basis = self.rng.choice(self.pool[q] + [b"order-1001", b"", b"item:42"])
        topic = self.rng.choice(["mt", "orders"])

        def check(r):
            if slots & (slots - 1):
                if not isinstance(r[0], Exception):
                    raise ModelMismatch(f"ROUTE with {slots} slots should fail: {r[0]!r}")
                return
            exp = f"{topic}_{zlib.crc32(basis) % slots}".encode()
            if r[0] != exp:
                raise ModelMismatch(f"ROUTE {topic} {slots} {basis!r} replied {r[0]!r}, the contract {exp!r}")
        return Op(q, [["RMQ.ROUTE", topic, slots, basis]], check)

    def _advance_ms(self):
        rng, m = self.rng, self.model
        x = rng.random()
        deadlines = sorted(f.deadline for qq in m.queues.values() for f in qq.flight.values())
        if x < 0.25 and deadlines:
            # exactly to a lease deadline, or 1 ms before it
            return max(0, rng.choice(deadlines[:3]) - m.now - rng.choice([0, 0, 1]))
        return rng.choice([1, 5, 20, 50, 100, 250, 600, 1200, 3000, 1, 5, 20, 50])

    def g_advance(self, q):
        return self.advance_op(q, self._advance_ms())

    def advance_op(self, q, ms):
        m = self.model

        def check(r):
            m.advance(ms)
            if r[0] != m.now:
                raise ModelMismatch(f"TESTCLOCK ADVANCE replied {r[0]!r}, model now {m.now}")
        return Op(q, [["RMQ.TESTCLOCK", "ADVANCE", ms]], check, multi=True, clock=True)

    def g_multi(self, q):
        """MULTI: the clock moves, then one command runs before the timer can: it sees
        expired leases still in flight (SWEEP's own rollbacks, ACKs of late leases)."""
        ms = self._advance_ms()
        gen = self.rng.choices([self.g_sweep, self.g_pop, self.g_ack, self.g_nack, self.g_info,
                                self.g_push, self.g_pending, self.g_replay],
                               [8, 4, 3, 2, 2, 1, 1, 1])[0]
        inner = gen(q, in_multi=True) if gen == self.g_pop else gen(q)
        m = self.model

        def check(r):
            m.advance(ms)
            if r[0] != m.now:
                raise ModelMismatch(f"TESTCLOCK ADVANCE replied {r[0]!r}, model now {m.now}")
            inner.check(r[1:])
        return Op(q, [["RMQ.TESTCLOCK", "ADVANCE", ms]] + inner.cmds, check, multi=True, clock=True)

    OPS = [("push", 24), ("pop", 18), ("ack", 10), ("nack", 10), ("advance", 8), ("multi", 5),
           ("extend", 3), ("cancel", 3), ("replay", 3), ("info", 4), ("pending", 2),
           ("tpop", 6), ("policy", 3), ("error", 1), ("config", 1), ("block", 2), ("route", 1),
           ("bulk", 0.3), ("schedule", 4), ("purge", 0.5), ("drop", 0.3), ("redrive", 2)]

    def step(self):
        names, weights = zip(*[(n, w) for n, w in self.OPS if n != "tpop" or self.tpop])
        op_name = self.rng.choices(names, weights)[0]
        q = self._queue()
        if op_name == "block":
            self.do_block(q)
            return
        if op_name == "bulk":
            self.do_bulk()
            return
        op = getattr(self, "g_" + op_name)(q)
        self.execute(op)

    def do_bulk(self):
        """A backlog on its own queue: N messages pushed, popped under a 1 ms lease, some
        acked, and the clock moved so the timer rolls back the rest in several bounded
        steps (16 per look at its budget); twice; then the queue is emptied again."""
        rng, m = self.rng, self.model
        q = BULK_QUEUE
        n = rng.choice([40, 100, 300])
        msgs = [b"bulk:%d" % i for i in range(n)]
        ops = [Op(q, [["RMQ.PUSH", q, "PRIORITY", 1] + msgs],
                  lambda r: m.push(q, "PRIORITY", 1, None, msgs, r[0]))]
        for _ in range(2):
            ops.append(Op(q, [["RMQ.POP", q, "COUNT", n, "LEASE", 1]],
                          lambda r: m.pop(q, n, 1, r[0])))
            some = rng.sample(msgs, n // 4)
            ops.append(Op(q, [["RMQ.ACK", q] + some], lambda r, some=some: m.ack(q, some, r[0])))
            ops.append(self.advance_op(q, 1))
        ops.append(Op(q, [["RMQ.REPLAY", q]], lambda r: m.replay(q, None, r[0], set())))
        ops.append(Op(q, [["RMQ.CANCEL", q] + msgs], lambda r: m.cancel(q, msgs, r[0])))
        for op in ops:
            self.execute(op)
        self.coverage[("bulk", str(n))] = self.coverage.get(("bulk", str(n)), 0) + 1

    def do_block(self, q):
        """A POP with BLOCK on its own connection while nothing is deliverable, then a push
        (and for `range` the clock reaching its due time) from the fuzzer's connection: the
        blocked consumer must get it at once (docs/COMMANDS.md: no polling), as a POP right after the
        push would."""
        rng, m = self.rng, self.model
        qm = m.q(q)
        lim = m.limits(qm)
        kind = qm.kind or self.specs[q][0]
        fresh = [x for x in self.pool[q] if x not in qm.waiting and x not in qm.flight
                 and len(x) <= m.settings["max-message-bytes"]]
        full = lim["max-queue-length"] > 0 and len(qm.waiting) + 1 > lim["max-queue-length"]
        if lim["rate"] > 0 or m.available(qm) > 0 or not fresh or full:
            self.execute(self.g_pop(q))
            return
        count = rng.choice([1, 2, 3])
        lease = rng.choice([None, 100, 1000])
        args = ["RMQ.POP", q, "COUNT", count] + (["LEASE", lease] if lease else []) + ["BLOCK", 5000]
        c2 = self.t.new_client(q)
        out = {}

        def blocked():
            out["r"] = call(c2, *args)
        th = threading.Thread(target=blocked, daemon=True)
        th.start()
        node = self.t.conn_for(q)
        ok = wait_until(lambda: "r" in out or node.info("clients").get("blocked_clients", 0) >= 1,
                        timeout=5, interval=0.002)
        if not ok:
            raise ModelMismatch("the blocking POP did not block")
        if "r" in out:
            raise ModelMismatch(f"POP BLOCK answered {out['r']!r} although nothing was deliverable")
        self._note(_fmt(args) + "   (blocked, own connection)")
        msg = [rng.choice(fresh)]
        if kind == "priority":
            mode, val = "PRIORITY", rng.choice([0, 1, 7])
        elif kind == "range":
            mode, val = "RANGE", 1
        else:
            mode, val = "DELAY", 0
        # the blocked consumer is served right after the push (or the clock move): the
        # keys are checked once the model has served it too
        self.execute(Op(q, [["RMQ.PUSH", q, mode, val] + msg],
                        lambda r: m.push(q, mode, val, None, msg, r[0])), verify=False)
        if kind == "range":
            self.execute(self.advance_op(q, 1), verify=False)
        th.join(6)
        if th.is_alive():
            raise ModelMismatch("the blocked POP was not served within 6 s of its message")
        self._note(f"  blocked POP -> {out['r']!r}"[:400])
        self.coverage[("RMQ.POP BLOCK", _shape(out["r"]))] = \
            self.coverage.get(("RMQ.POP BLOCK", _shape(out["r"])), 0) + 1
        if out["r"] is None or isinstance(out["r"], Exception):
            raise ModelMismatch(f"the blocked POP got {out['r']!r}, not the message pushed")
        m.pop(q, count, lease, out["r"])
        self.ops_checked += 1
        self.verify(settle=kind == "range")

    # -- faults --------------------------------------------------------------------------
    def maybe_fault(self):
        if self.replica is not None:
            # a replica is attached: the steps since went to it as effects; now check and
            # promote it
            if self.steps >= self.promote_at:
                self._note("FAULT promote (replica attached since step "
                           f"{self.promote_at - self.replica_steps})")
                self.promote()
                self.faults_done["promote"] = self.faults_done.get("promote", 0) + 1
            return
        if not self.faults or self.rng.random() >= self.fault_rate:
            return
        names = sorted(self.faults)
        kind = self.rng.choices(names, [self.faults[n] for n in names])[0]
        self._note(f"FAULT {kind}")
        getattr(self, "f_" + kind)()
        if kind != "promote":
            self.faults_done[kind] = self.faults_done.get(kind, 0) + 1

    def _after_restart(self):
        self.model.reset_buckets()
        # a new process has the load arguments' settings (CONFIG SET is not kept)
        self.model.settings.update({"retries": RETRIES, "lease-ms": LEASE_MS,
                                    "max-queue-length": 0, "max-message-bytes": 1048576})
        self.base = None          # a new process counts from 0
        self.set_clock()
        self.verify(settle=True)
        self.rebase()

    def f_reload(self):
        """DEBUG RELOAD: save an RDB and load it in the same process (the clock stays)."""
        c = self.t.server.conn()
        c.execute_command("DEBUG", "RELOAD")
        self.verify(settle=True)

    def f_restart(self):
        """SIGTERM, start again on the same dir (AOF, fsync always)."""
        self.t.server.restart()
        self._after_restart()

    def f_kill9(self):
        """kill -9 and start again: with appendfsync always every replied change is kept."""
        self.t.server.restart(graceful=False)
        self._after_restart()

    def f_rdb(self):
        """SAVE, kill -9, start from the RDB alone (AOF off), then switch the AOF back on."""
        s = self.t.server
        c = s.conn()
        c.execute_command("SAVE")
        s.conf = s.conf + ["--appendonly", "no"]
        s.restart(graceful=False)
        self._after_restart()
        c = s.conn()
        c.config_set("appendonly", "yes")
        wait_aof_ready(c)
        s.conf = s.conf[:-2]

    def f_promote(self):
        """Start a replica and let the next 3 to 40 steps reach it as effects (timer
        rollbacks included); then `promote`."""
        old = self.t.server

        def factory(module_args, extra_conf):
            return Server(conf=SERVER_CONF + list(extra_conf), module_args=module_args,
                          tag="rmq-fuzz-replica", client_timeout=10).start()
        self.replica = start_replica(factory, old, module_args=MODULE_ARGS)
        self.t.extra.append(self.replica)
        self.replica_steps = self.rng.randint(3, 40)
        self.promote_at = self.steps + self.replica_steps

    def promote(self):
        """Wait until the replica holds exactly the primary's keys, promote it (REPLICAOF
        NO ONE), stop the old primary and go on against the new one."""
        old, rep = self.t.server, self.replica
        pc, rc = old.conn(), rep.conn()
        assert pc.execute_command("WAIT", 1, 5000) >= 1, "replica did not acknowledge"
        ok = wait_until(lambda: dump_keys(rc) == dump_keys(pc), timeout=5, interval=0.01)
        if not ok:
            a, b = dump_keys(pc), dump_keys(rc)
            diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            raise ModelMismatch("replica differs from its primary: " + "; ".join(
                f"{k!r}: primary {a.get(k)!r}, replica {b.get(k)!r}" for k in diff[:4]))
        # A replica restarts its AOF after the full sync with a rewrite; until that is done
        # its AOF holds nothing (Redis's rule, not the module's): a kill -9 then would
        # lose what came since. Wait for it, as an operator would before relying on it.
        wait_aof_ready(rc)
        rc.execute_command("REPLICAOF", "NO", "ONE")
        old.stop()
        i = rep.conf.index("--replicaof")
        rep.conf = rep.conf[:i] + rep.conf[i + 3:]
        self.t.server = rep
        self.t.extra.remove(rep)
        self.replica = None
        self._after_restart()

    def f_slot(self):
        """Move a queue's hash slot to another primary (cluster only)."""
        from cluster_support import migrate_slot
        t = self.t
        q = self._queue()
        slot = t.slot(q)
        src = t.node_for(q)
        dst = self.rng.choice([p for p in t.prim if p is not src])
        # the nodes agree on epochs and slots before and after the move: else a node that
        # bumps its config epoch without knowing a newer one loses the slot it just took
        # and deletes its keys (Redis's rule, not the module's)
        t.cluster.wait_converged()
        migrate_slot(t.cluster, slot, src, dst)
        t.owner[slot] = dst
        t.cluster.wait_converged()
        self.model.reset_buckets({n.encode() for n in self.specs if t.slot(n) == slot}, known=False)
        self._note(f"  moved slot {slot} ({q}) {src.port} -> {dst.port}")
        self.verify(settle=True)

    # -- running -------------------------------------------------------------------------
    def state_text(self, limit=40000):
        """The model's queues and the server's keys (for a failure report)."""
        lines = []
        for srv in getattr(self.t, "prim", []):
            # a cluster node that deleted keys of a slot it lost says so in its log
            lines += [f"log of {srv.port}: {line}" for line in srv.log_text().splitlines()
                      if "dirty" in line.lower() or "deleting" in line.lower()][-5:]
        lines += [repr(q) for q in self.model.queues.values() if not q.empty() or q.policy]
        try:
            d = self.t.dump()
            lines += [f"server {k!r}: {v!r}" for k, v in sorted(d.items())]
        except Exception as e:  # the server may be gone
            lines.append(f"(no server dump: {e!r})")
        return "\n    ".join(lines)[:limit]

    def replay_hint(self):
        return (f"RMQ_FUZZ_SEED={self.seed} RMQ_FUZZ_STEPS={self.steps + 1} "
                f"python3 -m pytest tests/test_model_fuzz.py -k {self.label} -x")

    def run(self, steps=None, seconds=None):
        """Runs until `steps` steps or `seconds` seconds (whichever first). Returns the
        number of steps."""
        t_end = time.monotonic() + seconds if seconds else None
        try:
            if self.base is None:
                self.start()
            while (steps is None or self.steps < steps) and (t_end is None or time.monotonic() < t_end):
                self.maybe_fault()
                self.step()
                self.steps += 1
        except (ModelMismatch, AssertionError, redis.RedisError) as e:
            recent = "\n    ".join(self.log[-25:])
            raise FuzzFailure(
                f"model fuzz failed: seed {self.seed}, step {self.steps}: {type(e).__name__}: {e}\n"
                f"  last commands:\n    {recent}\n"
                f"  model now {self.model.now}:\n    {self.state_text()}\n"
                f"  replay: {self.replay_hint()}") from e
        return self.steps


def _shape(r):
    """A reply's class for the coverage count: error, nil, 0, >0, a status, n entries."""
    if isinstance(r, Exception):
        return "error"
    if r is None:
        return "nil"
    if isinstance(r, int):
        return "0" if r == 0 else ">0"
    if isinstance(r, bytes):
        return r.decode("latin-1")[:10]
    if isinstance(r, list):
        return f"[{min(len(r), 3)}{'+' if len(r) > 3 else ''}]"
    return type(r).__name__


def seed_from_env(default=None):
    s = os.environ.get("RMQ_FUZZ_SEED")
    if s:
        return int(s)
    return default if default is not None else random.SystemRandom().randrange(1, 2 ** 31)


def new_server(tag="rmq-fuzz"):
    return Server(conf=SERVER_CONF, module_args=MODULE_ARGS, tag=tag, client_timeout=10).start()


__all__ = ["Fuzzer", "FuzzFailure", "Standalone", "ClusterTarget", "new_server",
           "seed_from_env"]
