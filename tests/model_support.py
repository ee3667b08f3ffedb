"""A plain model of docs/COMMANDS.md (the command contract), for the model-based live fuzzer.

`Model` holds what the contract says the server holds: per queue its kind, its waiting copies
(score, delivery count, group, retry hold), its in-flight deliveries (lease deadline,
delivery count, the priority it was delivered with, group), its dead messages (time of
death, last priority, group) and its policy; the module clock (the test clock, so every
time is exact); the server-wide settings; and the `INFO rmq` counters.

Each command is a method that *checks* the server's reply against the contract and then applies
it. Where the contract leaves a choice to the server (equal priorities or due times, which
expired leases a `SWEEP LIMIT` takes, which of several equally old dead messages a
`REPLAY COUNT` takes, TPOP's starting queue, how many a rate limit lets through) the
method accepts any choice the contract allows and follows the one the server made: a POP's
reply names its choice; for SWEEP and REPLAY the server's keys after the command do
(the `after` dump passed in). Anything the contract does not allow raises `ModelMismatch`.

`check_keys(model, dump)` compares every key of the server with the model: `Q`,
`prepare{Q}` and `dead{Q}` member by member, score by score, as the contract's Keys section
defines them; waiting messages held back (by their group, or a priority retry delay) may
be in another key tagged `{Q}`; an empty queue leaves no key but its policy; no other key
exists. Rate limits are checked as bounds: a POP never takes more than a token bucket of
`rate` tokens refilled over the window (started full) allows, and, when a queue made no
delivery for a whole window, a POP of something deliverable takes at least one.

The driver that runs random commands against a live server is in fuzz_support.py.
"""

import math
import os

import model_schedules

TWO53 = 2 ** 53
MIN_AT = 946684800000

KINDS = ("range", "priority", "fixed")
POLICY_FIELDS = ("retries", "lease-ms", "max-queue-length", "backoff-ms", "backoff-max-ms",
                 "rate", "rate-window-ms")
POLICY_BOUNDS = {
    "retries": (0, 1000),
    "lease-ms": (1, 2 ** 31),
    "max-queue-length": (0, 2 ** 62),
    "backoff-ms": (0, 2 ** 31),
    "backoff-max-ms": (0, 2 ** 31),
    "rate": (0, 10 ** 9),
    "rate-window-ms": (1, 2 ** 31),
}
COUNTERS = ("pushed", "merged", "popped", "acked", "nacked", "expired", "dead", "replayed",
            "cancelled", "rate_limited", "schedule_fired", "schedule_skipped")



class ModelMismatch(AssertionError):
    pass


def fail(msg):
    raise ModelMismatch(msg)


def _b(x):
    return x if isinstance(x, bytes) else str(x).encode()


def prep_key(q):
    return b"prepare{" + _b(q) + b"}"


def seq_key(q):
    return b"seq{" + _b(q) + b"}"


def dedup_key(q):
    return b"dedup{" + _b(q) + b"}"


def dedupexp_key(q):
    return b"dedupexp{" + _b(q) + b"}"


def moving_key(q):
    return b"moving{" + _b(q) + b"}"


def ledger_keys(q):
    """A queue's keys of RMQ.PUSH SEQUENCE/DEDUP and RMQ.REDRIVE."""
    return (seq_key(q), dedup_key(q), dedupexp_key(q), moving_key(q))


# A DEDUP push removes at most this many ended records, oldest window end first.
PRUNE_PER_PUSH = 16


def dead_key(q):
    return b"dead{" + _b(q) + b"}"


class Waiting:
    __slots__ = ("score", "deliveries", "group", "hold")

    def __init__(self, score, deliveries=0, group=None, hold=None):
        self.score = score            # priority, or due time (range / fixed)
        self.deliveries = deliveries  # deliveries already made
        self.group = group
        self.hold = hold              # priority retry delay: the time it ends (until released)

    def __repr__(self):
        return f"W({self.score}, d={self.deliveries}, g={self.group!r}, hold={self.hold})"


class Flight:
    __slots__ = ("deadline", "deliveries", "priority", "group")

    def __init__(self, deadline, deliveries, priority, group):
        self.deadline, self.deliveries, self.priority, self.group = deadline, deliveries, priority, group

    def __repr__(self):
        return f"F(dl={self.deadline}, d={self.deliveries}, p={self.priority}, g={self.group!r})"


class Dead:
    __slots__ = ("time", "priority", "group")

    def __init__(self, time, priority, group):
        self.time, self.priority, self.group = time, priority, group

    def __repr__(self):
        return f"D(t={self.time}, p={self.priority}, g={self.group!r})"


class Bucket:
    """The most a token bucket of `rate` tokens refilled over `window` ms can allow (it is
    taken to start full), and when its queue last delivered."""

    def __init__(self, now):
        self.tokens = None   # None: full (set on first use)
        self.at = now
        self.last_take = None
        self.since = now

    def allowed(self, now, rate, window):
        if self.tokens is None:
            self.tokens = float(rate)
        if now > self.at:
            self.tokens = min(float(rate), self.tokens + (now - self.at) * rate / window)
            self.at = now
        return int(math.floor(self.tokens + 1e-6))

    def must_give(self, now, window):
        """A whole window passed since the last delivery (or the bucket is new): a token
        is there whatever the bucket started with."""
        return self.last_take is None or now - self.last_take >= window

    def take(self, now, n):
        if n:
            self.tokens -= n
            self.last_take = now


class Queue:
    def __init__(self, name):
        self.name = _b(name)
        self.kind = None
        self.waiting = {}
        self.flight = {}
        self.dead = {}
        self.policy = {}
        self.bucket = None
        # Order through retries: group -> (its pinned message, rolled back into the group
        # and not delivered since, and that message's waiting copy), which goes before
        # anything else of the group.
        self.pins = {}
        # RMQ.PUSH SEQUENCE/DEDUP and RMQ.REDRIVE (none of them makes the queue non-empty):
        # the last push number given (0: no seq{Q}); deduplication id -> [window end,
        # first number or None, count, note]; claimed message -> (claim time, priority or
        # None, group or None).
        self.seq = 0
        self.dedup = {}
        self.moving = {}

    def empty(self):
        return not (self.waiting or self.flight or self.dead)

    def busy(self, g):
        return g is not None and any(f.group == g for f in self.flight.values())

    def pinned(self, g):
        """The group's pinned message, while it still waits in the group (a pin never
        outlives its waiting copy: nothing of a purged or emptied queue is kept)."""
        p, pw = self.pins.get(g, (None, None))
        # The same copy (a REPLAY that resets its count keeps it pinned: it is not acked,
        # cancelled or dead); a copy pushed after it ended is a new one.
        if p is None or self.waiting.get(p) is not pw or pw.group != g:
            self.pins.pop(g, None)
            return None
        return p

    def busy_groups(self):
        return {f.group for f in self.flight.values() if f.group is not None}

    def __repr__(self):
        return (f"Queue({self.name!r}, kind={self.kind}, waiting={self.waiting}, "
                f"flight={self.flight}, dead={self.dead}, policy={self.policy}, "
                f"schedules={getattr(self, 'schedules', {})})")


def kind_of_mode(mode):
    mode = mode.upper()
    return {"RANGE": "range", "PRIORITY": "priority", "AT": "fixed", "DELAY": "fixed"}[mode]


class Model:
    """the contract's state of one server (or of one cluster: queues are independent)."""

    def __init__(self, now, retries=16, lease_ms=30000, max_message_bytes=1048576,
                 max_queue_length=0):
        self.now = now
        self.settings = {"retries": retries, "lease-ms": lease_ms,
                         "max-message-bytes": max_message_bytes,
                         "max-queue-length": max_queue_length}
        self.queues = {}
        self.counters = dict.fromkeys(COUNTERS, 0)

    # -- helpers -------------------------------------------------------------------------
    def q(self, name):
        name = _b(name)
        if name not in self.queues:
            self.queues[name] = Queue(name)
        return self.queues[name]

    def limits(self, q):
        lim = {"retries": self.settings["retries"], "lease-ms": self.settings["lease-ms"],
               "max-queue-length": self.settings["max-queue-length"], "backoff-ms": 0,
               "backoff-max-ms": 3600000, "rate": 0, "rate-window-ms": 1000, "paused": 0,
               "journal": 0}
        lim.update(q.policy)
        return lim

    @staticmethod
    def backoff(lim, failed):
        if lim["backoff-ms"] == 0:
            return 0
        return min(lim["backoff-max-ms"], lim["backoff-ms"] * 2 ** max(0, failed - 1))

    def tidy(self, q):
        if q.empty():
            q.kind = None

    def deliverable(self, q, m, w):
        if m in q.flight:
            return False
        if w.group is not None and q.busy(w.group):
            return False
        # A group whose rolled-back message waits delivers nothing else meanwhile (even a
        # message that comes first in the queue's order; while it waits a retry delay,
        # the whole group waits).
        if w.group is not None and q.pinned(w.group) not in (None, m):
            return False
        if w.hold is not None and w.hold > self.now:
            return False
        if q.kind in ("range", "fixed") and w.score > self.now:
            return False
        return True

    def _better(self, q):
        """Sort key: smaller comes out first."""
        if q.kind == "priority":
            return lambda w: -w.score
        return lambda w: w.score

    def available(self, q):
        """How many messages a POP of unlimited COUNT would take (one per group)."""
        n, groups = 0, set()
        for m, w in q.waiting.items():
            if self.deliverable(q, m, w):
                if w.group is None:
                    n += 1
                elif w.group not in groups:
                    groups.add(w.group)
                    n += 1
        return n

    def bucket(self, q):
        if q.bucket is None:
            q.bucket = Bucket(self.now)
        return q.bucket

    def reset_buckets(self, names=None, known=True):
        """A restart, promotion or policy change starts new rate buckets. After a slot
        move (known=False) the queue's new node may hold a bucket of its own from an
        earlier stay of the queue there: at most full, and it gives a token only a whole
        window later."""
        for name, q in self.queues.items():
            if names is None or name in names:
                q.bucket = None
                if not known:
                    self.bucket(q).last_take = self.now

    def reset_counters(self):
        self.counters = dict.fromkeys(COUNTERS, 0)

    # -- the clock -----------------------------------------------------------------------
    def advance(self, ms):
        assert ms >= 0
        self.now += ms

    def timer(self):
        """The server's timer after the clock moved: due schedules fire, then every expired
        lease of every queue is rolled back (as by SWEEP), every ended retry hold is
        released."""
        model_schedules.fire_due(self)
        for q in self.queues.values():
            lim = self.limits(q)
            for m in sorted(m for m, f in q.flight.items() if f.deadline <= self.now):
                self._roll_back(q, lim, m, None, False)
                self.counters["expired"] += 1
            for w in q.waiting.values():
                if w.hold is not None and w.hold <= self.now:
                    w.hold = None
            self.tidy(q)

    # -- commands ------------------------------------------------------------------------
    def push(self, name, mode, value, group, msgs, reply):
        """reply: an int, or an Exception (an error reply)."""
        err, added = self.push_effect(name, mode, value, group, msgs)
        if err is not None:
            if not isinstance(reply, Exception):
                fail(f"PUSH should fail ({err}); got {reply!r}")
            return
        if isinstance(reply, Exception):
            fail(f"PUSH should succeed; got error {reply}")
        if reply != added:
            fail(f"PUSH reply {reply!r}, model says {added} newly added")

    @staticmethod
    def _syntax_error(mode, value, group):
        """What is wrong with a push's mode value or group (found while parsing)."""
        mu = mode.upper()
        if mu == "RANGE" and not (1 <= value <= 2 ** 52):
            return "bad RANGE"
        if mu == "PRIORITY" and not (abs(value) <= TWO53):
            return "bad PRIORITY"
        if mu == "AT" and not (MIN_AT <= value <= TWO53):
            return "bad AT"
        if mu == "DELAY" and not (0 <= value <= 2 ** 52):
            return "bad DELAY"
        if group is not None and not (1 <= len(group) <= 1024):
            return "bad GROUP"
        return None

    def push_ledger(self, name, mode, value, group, msgs, prefix, dedup, reply):
        """RMQ.PUSH with SEQUENCE `prefix` and/or DEDUP `dedup` = (id, window, note): the
        reply is one [outcome, number, note] per message. An empty message is refused
        before the id is looked up; a duplicate (its id's window not ended) changes nothing
        and answers what the first push did, before the queue is looked at."""
        q = self.q(name)
        err = self._syntax_error(mode, value, group)
        if err is None and any(len(m) == 0 for m in msgs):
            err = "empty message"
        rec = q.dedup.get(dedup[0]) if dedup is not None and err is None else None
        if rec is not None and rec[0] > self.now:
            _exp, first, count, note = rec
            exp = [[b"duplicate", first + i if first is not None and i < count else None, note]
                   for i in range(len(msgs))]
            if reply != exp:
                fail(f"duplicate PUSH replied {reply!r}, model {exp!r}")
            return
        first = q.seq + 1 if prefix is not None else None
        stored = msgs if prefix is None else \
            [prefix + b"%020d " % (first + i) + m for i, m in enumerate(msgs)]
        met, fresh = set(), []
        for m in stored:
            fresh.append(m not in met and m not in q.waiting)
            met.add(m)
        if err is None:
            err, _added = self.push_effect(name, mode, value, group, stored)
        if err is not None:
            if not isinstance(reply, Exception):
                fail(f"PUSH should fail ({err}); got {reply!r}")
            return
        if prefix is not None:
            q.seq += len(msgs)
        if dedup is not None:
            ident, window, note = dedup
            ended = sorted((r[0], i) for i, r in q.dedup.items() if r[0] <= self.now)
            for _e, i in ended[:PRUNE_PER_PUSH]:
                del q.dedup[i]
            q.dedup[ident] = [self.now + window, first, len(msgs), note]
        exp = [[b"added" if f else b"merged", first + i if first is not None else None, None]
               for i, f in enumerate(fresh)]
        if reply != exp:
            fail(f"PUSH replied {reply!r}, model {exp!r}")

    def _push_error(self, q, kind, msgs):
        """Why a push of these (well-formed) arguments is refused, if it is."""
        if q.kind is not None and q.kind != kind:
            return f"queue holds kind {q.kind}, pushed {kind}"
        if any(len(m) == 0 for m in msgs):
            return "empty message"
        if any(len(m) > self.settings["max-message-bytes"] for m in msgs):
            return "message too long"
        fresh = {m for m in msgs if m not in q.waiting}
        if 0 < self.limits(q)["max-queue-length"] < len(q.waiting) + len(fresh):
            return "queue full"
        return None

    def push_effect(self, name, mode, value, group, msgs):
        """A push (RMQ.PUSH, or a schedule's firing): (None, newly added), or (why it
        fails, 0) with nothing changed."""
        q = self.q(name)
        kind = kind_of_mode(mode)
        err = self._syntax_error(mode, value, group) or self._push_error(q, kind, msgs)
        if err is not None:
            return err, 0
        mu = mode.upper()
        score = {"RANGE": self.now + value if mu == "RANGE" else None,
                 "PRIORITY": value, "AT": value,
                 "DELAY": self.now + value if mu == "DELAY" else None}[mu]
        if q.kind is None:
            q.kind = kind
        added = merged = 0
        for m in msgs:
            w = q.waiting.get(m)
            if w is None:
                q.waiting[m] = Waiting(score, 0, group, None)
                added += 1
            else:
                merged += 1
                if mu != "RANGE":
                    w.score = score   # priority / fixed: latest wins (a held copy stays held)
                if w.group != group and w.group is not None and q.pinned(w.group) == m:
                    del q.pins[w.group]   # moved to another group: it heads its old one no more
                w.group = group       # the latest push sets the group
        self.counters["pushed"] += added
        self.counters["merged"] += merged
        return None, added

    def _release_holds(self, q):
        for w in q.waiting.values():
            if w.hold is not None and w.hold <= self.now:
                w.hold = None

    def _check_take(self, q, entries, lease, count, picked_groups=None):
        """Checks a sequence of messages taken from `q` by one pop (entries: list of
        (message, deliveries)) against the queue's order, and applies it."""
        if picked_groups is None:
            picked_groups = set()
        key = self._better(q)
        for m, d in entries:
            cands = [(mm, w) for mm, w in q.waiting.items()
                     if self.deliverable(q, mm, w) and (w.group is None or w.group not in picked_groups)]
            if not cands:
                fail(f"{q.name!r}: delivered {m!r} but nothing is deliverable")
            best = min(key(w) for _, w in cands)
            w = q.waiting.get(m)
            if w is None or m not in {mm for mm, _ in cands}:
                fail(f"{q.name!r}: delivered {m!r}, not deliverable (model: {w!r}, "
                     f"in flight: {q.flight.get(m)!r}, candidates "
                     f"{sorted(mm for mm, _ in cands)[:8]})")
            if key(w) != best:
                fail(f"{q.name!r}: delivered {m!r} with score {w.score}, but a better one is "
                     f"deliverable: {[(mm, ww.score) for mm, ww in cands if key(ww) == best][:5]}")
            if d != w.deliveries + 1:
                fail(f"{q.name!r}: delivered {m!r} reporting {d} deliveries, model says "
                     f"{w.deliveries + 1}")
            del q.waiting[m]
            if w.group is not None and q.pinned(w.group) == m:
                del q.pins[w.group]   # delivered again: its group is busy with it now
            q.flight[m] = Flight(self.now + lease, d,
                                 w.score if q.kind == "priority" else None, w.group)
            if w.group is not None:
                picked_groups.add(w.group)
        self.counters["popped"] += len(entries)

    def pop(self, name, count, lease, reply):
        """reply: None or list of [message, deliveries]."""
        q = self.q(name)
        entries = [(e[0], e[1]) for e in (reply or [])]
        if reply is not None and not entries:
            fail(f"POP replied an empty array (docs/COMMANDS.md: nil when nothing is deliverable)")
        if q.kind is None:
            if entries:
                fail(f"POP of an empty queue gave {entries!r}")
            return
        lim = self.limits(q)
        if lease is None:
            lease = lim["lease-ms"]
        self._release_holds(q)
        avail = min(count, self.available(q))
        k = len(entries)
        if lim["rate"] > 0:
            b = self.bucket(q)
            most = min(avail, b.allowed(self.now, lim["rate"], lim["rate-window-ms"]))
            least = 1 if (avail >= 1 and b.must_give(self.now, lim["rate-window-ms"])) else 0
            if not least <= k <= most:
                fail(f"{q.name!r} (rate {lim['rate']}/{lim['rate-window-ms']} ms): POP COUNT "
                     f"{count} took {k}, the contract allows {least}..{most}")
            b.take(self.now, k)
            if k < avail:
                self.counters["rate_limited"] += 1   # fewer than asked: the rate limit
        elif k != avail:
            fail(f"{q.name!r}: POP COUNT {count} took {k} ({entries!r}), model says {avail} "
                 f"deliverable; model {q!r}")
        self._check_take(q, entries, lease, count)

    def tpop(self, topic, slots, count, lease, reply, names):
        """names: the topic's queues this server holds (all on a standalone server)."""
        entries = [(e[0], e[1], e[2]) for e in (reply or [])]
        if reply is not None and not entries:
            fail("TPOP replied an empty array")
        topic = _b(topic)
        queues = [_b(n) for n in names if _b(n).startswith(topic + b"_")
                  and _b(n)[len(topic) + 1:].isdigit() and int(_b(n)[len(topic) + 1:]) < slots]
        by_q = {}
        for qn, m, d in entries:
            if qn not in queues:
                fail(f"TPOP {topic!r} {slots} gave a message of {qn!r}, not one of its queues")
            by_q.setdefault(qn, []).append((m, d))
        info = {}
        for qn in queues:
            q = self.q(qn)
            if q.kind is None:
                info[qn] = (0, 0, False)
                continue
            self._release_holds(q)
            lim = self.limits(q)
            avail = self.available(q)
            c = len(by_q.get(qn, []))
            limited = lim["rate"] > 0
            if limited:
                b = self.bucket(q)
                most = b.allowed(self.now, lim["rate"], lim["rate-window-ms"])
                if c > most:
                    fail(f"TPOP took {c} from {qn!r}, its rate limit allows at most {most}")
                b.take(self.now, c)
            if c > avail:
                fail(f"TPOP took {c} from {qn!r}, only {avail} deliverable")
            info[qn] = (avail, c, limited)
        total = len(entries)
        all_avail = sum(a for a, _, _ in info.values())
        any_limited = any(lim for _, _, lim in info.values())
        if total < min(count, all_avail):
            # fewer than asked although more was deliverable: a rate limit held it back
            self.counters["rate_limited"] += 1
        any_limited = any(lim for _, _, lim in info.values())
        if total > count:
            fail(f"TPOP COUNT {count} gave {total}")
        if not any_limited and total != min(count, all_avail):
            fail(f"TPOP COUNT {count} gave {total}, model says {min(count, all_avail)} "
                 f"deliverable: { {k: v[0] for k, v in info.items()} }")
        top = max((c for _, c, _ in info.values()), default=0)
        # Round-robin: queues not exhausted differ by at most one.
        floor = top - 1
        for qn, (avail, c, limited) in info.items():
            if not limited and c < min(avail, floor):
                fail(f"TPOP not round-robin: {qn!r} gave {c} of {avail} deliverable while "
                     f"another gave {top}: { {k: v[1] for k, v in info.items()} }")
        for qn, got in by_q.items():
            q = self.q(qn)
            lim = self.limits(q)
            self._check_take(q, got, lease if lease is not None else lim["lease-ms"], len(got))

    def _end_copies(self, name, msgs, reply, copies, counter, command):
        """ACK (in-flight copies) and CANCEL (waiting copies): each message that has such a
        copy loses it; the reply counts them."""
        q = self.q(name)
        n = sum(getattr(q, copies).pop(m, None) is not None for m in msgs)
        self.counters[counter] += n
        self.tidy(q)
        if reply != n:
            fail(f"{command} {msgs!r} replied {reply!r}, model says {n}")

    def ack(self, name, msgs, reply):
        self._end_copies(name, msgs, reply, "flight", "acked", "ACK")

    def _roll_back(self, q, lim, m, delay, dead):
        f = q.flight.pop(m)
        if dead or f.deliveries > lim["retries"]:
            group = f.group
            q.dead[m] = Dead(self.now, (f.priority if f.priority is not None else 0)
                             if q.kind == "priority" else None, group)
            self.counters["dead"] += 1
            return "dead"
        w = q.waiting.get(m)
        if w is not None:
            w.deliveries = f.deliveries   # the newer waiting copy keeps score and group
        else:
            if delay is None:
                delay = self.backoff(lim, f.deliveries)
            if q.kind == "priority":
                w = Waiting(f.priority, f.deliveries, f.group, self.now + delay if delay > 0 else None)
            else:
                w = Waiting(self.now + delay, f.deliveries, f.group, None)
            q.waiting[m] = w
        if f.group is not None and w.group == f.group:
            # Back in its group, it goes again before the group's later messages.
            q.pins[f.group] = (m, w)
        return "requeued"

    def nack(self, name, m, delay, dead, reply):
        q = self.q(name)
        if m not in q.flight:
            if reply is not None:
                fail(f"NACK of {m!r} (not in flight) replied {reply!r}, the contract says nil")
            return
        r = self._roll_back(q, self.limits(q), m, delay, dead)
        self.counters["nacked"] += 1
        self.tidy(q)
        if reply != r.encode():
            fail(f"NACK of {m!r} replied {reply!r}, model says {r}")

    def sweep(self, name, limit, reply, after_prepare):
        """after_prepare: the members of prepare{Q} after the command (which expired leases
        a LIMIT took is the server's choice)."""
        q = self.q(name)
        expired = sorted(m for m, f in q.flight.items() if f.deadline <= self.now)
        if limit is None or len(expired) <= limit:
            chosen = expired
        else:
            chosen = [m for m in expired if m not in after_prepare]
            if len(chosen) != limit:
                fail(f"SWEEP LIMIT {limit} with {len(expired)} expired left "
                     f"{len(expired) - len(chosen)} of them in prepare")
        lim = self.limits(q)
        for m in chosen:
            self._roll_back(q, lim, m, None, False)
            self.counters["expired"] += 1
        self.tidy(q)
        if reply != len(chosen):
            fail(f"SWEEP replied {reply!r}, model says {len(chosen)}")

    def extend(self, name, m, ms, reply):
        q = self.q(name)
        f = q.flight.get(m)
        if f is None:
            if reply is not None:
                fail(f"EXTEND of {m!r} (not in flight) replied {reply!r}")
            return
        f.deadline = self.now + ms
        if reply != f.deadline:
            fail(f"EXTEND replied {reply!r}, model says {f.deadline}")

    def cancel(self, name, msgs, reply):
        self._end_copies(name, msgs, reply, "waiting", "cancelled", "CANCEL")

    def replay(self, name, count, reply, after_dead):
        """after_dead: members of dead{Q} after the command (ties in death time: the
        server's choice)."""
        q = self.q(name)
        order = sorted(q.dead, key=lambda m: q.dead[m].time)
        if count is None or count >= len(order):
            chosen = order
        else:
            chosen = [m for m in order if m not in after_dead]
            if len(chosen) != count:
                fail(f"REPLAY COUNT {count} replayed {len(chosen)} (dead before {len(order)})")
            cut = sorted(q.dead[m].time for m in order)[count - 1]
            for m in chosen:
                if q.dead[m].time > cut:
                    fail(f"REPLAY COUNT {count} took {m!r} (died {q.dead[m].time}) before an "
                         f"older death")
        for m in chosen:
            d = q.dead.pop(m)
            w = q.waiting.get(m)
            if w is not None:
                w.deliveries = 0
            else:
                q.waiting[m] = Waiting(d.priority if q.kind == "priority" else self.now, 0,
                                       d.group, None)
        self.counters["replayed"] += len(chosen)
        self.tidy(q)
        if reply != len(chosen):
            fail(f"REPLAY replied {reply!r}, model says {len(chosen)}")

    def claim(self, name, count, stale, reply):
        """REDRIVE CLAIM: claims older than `stale` first (which of them, when more are
        stale than `count`: the server's choice, named by the reply), re-claimed now;
        then dead messages, oldest death first (ties: the server's choice), out of
        dead{Q} with what their dead records kept."""
        q = self.q(name)
        if not isinstance(reply, list) or any(len(e) != 3 for e in reply):
            fail(f"REDRIVE CLAIM replied {reply!r}")
        old = [m for m, c in q.moving.items() if c[0] <= self.now - stale]
        n_old = min(count, len(old))
        for m, _g, _p in reply[:n_old]:
            if m not in old:
                fail(f"REDRIVE CLAIM took {m!r}, no stale claim (stale: {old!r})")
        taken = [(m, q.moving[m][1], q.moving[m][2]) for m, _g, _p in reply[:n_old]]
        order = sorted(q.dead, key=lambda m: q.dead[m].time)
        n_dead = min(count - n_old, len(order))
        chosen = [e[0] for e in reply[n_old:]]
        if len(reply) != n_old + n_dead or len(set(chosen)) != n_dead or \
                len({e[0] for e in reply[:n_old]}) != n_old:
            fail(f"REDRIVE CLAIM COUNT {count} replied {reply!r}: model takes {n_old} stale "
                 f"claims of {old!r}, then {n_dead} dead of {order!r}")
        if n_dead:
            cut = sorted(q.dead[m].time for m in order)[n_dead - 1]
            for m in chosen:
                if m not in q.dead or q.dead[m].time > cut:
                    fail(f"REDRIVE CLAIM took {m!r} before an older death ({order!r})")
        for m in chosen:
            d = q.dead.pop(m)
            taken.append((m, d.priority, d.group))
        exp = [[m, g, None if p is None else int(p)] for m, p, g in taken]
        if reply != exp:
            fail(f"REDRIVE CLAIM replied {reply!r}, model {exp!r}")
        for m, p, g in taken:
            q.moving[m] = (self.now, p, g)
        self.tidy(q)

    def claim_done(self, name, msgs, reply):
        q = self.q(name)
        n = sum(q.moving.pop(m, None) is not None for m in msgs)
        if reply != n:
            fail(f"REDRIVE DONE {msgs!r} replied {reply!r}, model {n}")

    def purge(self, name, dead, reply):
        """PURGE [DEAD]: every waiting and in-flight copy goes (and the dead with DEAD);
        the policy, the schedules, the claims, the push sequence and the deduplication
        records stay."""
        q = self.q(name)
        n = len(q.waiting) + len(q.flight) + (len(q.dead) if dead else 0)
        q.waiting, q.flight, q.pins = {}, {}, {}
        if dead:
            q.dead = {}
        self.tidy(q)
        if reply != n:
            fail(f"PURGE{' DEAD' if dead else ''} replied {reply!r}, model says {n}")

    def drop(self, name, reply):
        """DROP: the queue goes with its policy, schedules, claims, push sequence and
        deduplication records (its rate bucket too)."""
        q = self.q(name)
        had = int(not q.empty() or bool(q.policy) or bool(getattr(q, "schedules", {}))
                  or bool(q.seq or q.dedup or q.moving))
        self.queues[q.name] = Queue(q.name)
        if reply != had:
            fail(f"DROP replied {reply!r}, model says {had}")

    def info(self, name, reply):
        q = self.q(name)
        if isinstance(reply, dict):
            got = dict(reply)
        else:
            got = dict(zip(reply[0::2], reply[1::2]))
        got = {(k.decode() if isinstance(k, bytes) else k): v for k, v in got.items()}
        w = list(q.waiting.values())
        if q.kind in ("range", "fixed"):
            ready = sum(1 for x in w if x.score <= self.now)
            next_due = [min((x.score for x in w), default=None)]
        else:
            ready = sum(1 for x in w if not (x.hold is not None and x.hold > self.now))
            # a hold that ended but that no timer step or pop has released yet may count
            next_due = [min((x.hold for x in w if x.hold is not None and x.hold > self.now), default=None),
                        min((x.hold for x in w if x.hold is not None), default=None)]
        exp = {"kind": q.kind.encode() if q.kind else None, "waiting": len(w), "ready": ready,
               "inflight": len(q.flight), "dead": len(q.dead),
               "next_expiry": min((f.deadline for f in q.flight.values()), default=None),
               "schedules": len(getattr(q, "schedules", {}))}
        for k, v in exp.items():
            if got.get(k) != v:
                fail(f"INFO {q.name!r} {k}: server {got.get(k)!r}, model {v!r} ({q!r})")
        if got.get("next_due") not in next_due:
            fail(f"INFO {q.name!r} next_due: server {got.get('next_due')!r}, model {next_due}")

    def pending(self, name, count, reply):
        q = self.q(name)
        n = 100 if count is None else count
        fl = sorted(q.flight.items(), key=lambda kv: kv[1].deadline)
        if len(reply) != min(n, len(fl)):
            fail(f"PENDING gave {len(reply)} entries, model {min(n, len(fl))}")
        last = None
        for e in reply:
            m, d, dl, g = e
            f = q.flight.get(m)
            if f is None:
                fail(f"PENDING lists {m!r}, not in flight")
            if (d, dl, g) != (f.deliveries, f.deadline, f.group):
                fail(f"PENDING entry {e!r}, model {f!r}")
            if last is not None and dl < last:
                fail(f"PENDING not soonest deadline first: {reply!r}")
            last = dl
        if len(reply) < len(fl) and reply:
            # every delivery left out has a deadline no sooner than the last listed
            listed = {e[0] for e in reply}
            if any(f.deadline < last for m, f in fl if m not in listed):
                fail(f"PENDING COUNT {n} left out a sooner deadline")
        if len({e[0] for e in reply}) != len(reply):
            fail(f"PENDING lists a message twice: {reply!r}")

    def policy_set(self, name, pairs, reply):
        q = self.q(name)
        err = None
        for f, v in pairs:
            if f not in POLICY_BOUNDS:
                err = f"unknown field {f}"
            elif not (POLICY_BOUNDS[f][0] <= v <= POLICY_BOUNDS[f][1]):
                err = f"{f} {v} out of bounds"
        if err:
            if not isinstance(reply, Exception):
                fail(f"POLICY SET should fail ({err}); got {reply!r}")
            return
        if reply != b"OK":
            fail(f"POLICY SET replied {reply!r}")
        for f, v in pairs:
            q.policy[f] = v
        q.bucket = None

    def policy_get(self, name, reply):
        q = self.q(name)
        got = dict(zip(reply[0::2], reply[1::2])) if isinstance(reply, list) else dict(reply)
        got = {(k.decode() if isinstance(k, bytes) else k): v for k, v in got.items()}
        exp = self.limits(q)
        if got != exp:
            fail(f"POLICY GET {q.name!r}: server {got}, model {exp}")

    def policy_reset(self, name, reply):
        q = self.q(name)
        had = 1 if q.policy else 0
        q.policy = {}
        q.bucket = None
        if reply != had:
            fail(f"POLICY RESET replied {reply!r}, model {had}")

    # -- totals --------------------------------------------------------------------------
    def totals(self):
        w = f = d = 0
        for q in self.queues.values():
            w += len(q.waiting)
            f += len(q.flight)
            d += len(q.dead)
        return w, f, d


# ---------------------------------------------------------------------------------------
# keys
# ---------------------------------------------------------------------------------------

def _tag_of(key):
    """The queue a tagged key `prefix{Q}` belongs to, else None."""
    i = key.find(b"{")
    if i < 0 or not key.endswith(b"}"):
        return None
    return key[i + 1:-1]


def check_keys(model, dump):
    """dump: {key: (type, value)} (helpers.snapshot). Raises ModelMismatch on any
    difference from the model (see the module doc)."""
    model_schedules.check_sched_keys(model, dump)
    names = set(model.queues)
    for key, (t, _v) in dump.items():
        if key in names:
            if t != b"zset":
                fail(f"key {key!r} (queue store) has type {t!r}")
            continue
        tag = _tag_of(key)
        if tag is None or tag not in names:
            fail(f"stray key {key!r} ({t!r}): not one of a queue's keys")
    for name, q in model.queues.items():
        store = dict(dump.get(name, (b"zset", []))[1])
        prep = dict(dump.get(prep_key(name), (b"zset", []))[1])
        dead = dict(dump.get(dead_key(name), (b"zset", []))[1])
        check_ledger_keys(q, dump)
        others = {k: v for k, v in dump.items()
                  if _tag_of(k) == name and k not in (prep_key(name), dead_key(name),
                                                      model_schedules.sched_key(name))
                  and k not in ledger_keys(name)}
        exp_prep = {m: float(f.deadline) for m, f in q.flight.items()}
        if prep != exp_prep:
            fail(_zdiff(prep_key(name), prep, exp_prep))
        exp_dead = {m: float(d.time) for m, d in q.dead.items()}
        if dead != exp_dead:
            fail(_zdiff(dead_key(name), dead, exp_dead))
        if q.empty():
            if store or name in dump:
                fail(f"empty queue {name!r} still has its key: {store}")
            left = [k for k in others]
            if len(left) > (1 if q.policy else 0) or any(others[k][0] == b"zset" for k in left):
                fail(f"empty queue {name!r} left keys behind: {left} (policy {q.policy})")
            continue
        elsewhere = set()
        for k, (t, v) in others.items():
            if t == b"zset":
                elsewhere.update(m for m, _s in v)
        busy = q.busy_groups()
        key = model._better(q)
        # the v3 contract: a grouped message may wait outside `Q` while its group is in flight or
        # another waiting message of its group comes first (or ties) in the queue's order.
        # the v5 contract: a group's pinned (rolled-back) message heads it whatever its score: it is
        # the one in `Q`, and every other message of its group may wait outside.
        firsts = {}
        for w in q.waiting.values():
            if w.group is not None and not (w.hold is not None and w.hold > model.now):
                firsts.setdefault(w.group, []).append(key(w))
        for m, w in q.waiting.items():
            pin = q.pinned(w.group) if w.group is not None else None
            if pin is not None:
                behind = pin != m
            else:
                behind = w.group is not None and sum(k <= key(w) for k in firsts.get(w.group, ())) > 1
            held = ((w.hold is not None and w.hold > model.now)
                    or (w.group is not None and (w.group in busy or behind)))
            s = store.get(m)
            if s is not None:
                if s != float(w.score):
                    fail(f"{name!r}: waiting {m!r} has score {s} in Q, model {w!r}")
            elif not held:
                fail(f"{name!r}: waiting {m!r} ({w!r}) is not in Q "
                     f"(elsewhere: {m in elsewhere}); busy groups {busy}")
            elif m not in elsewhere:
                fail(f"{name!r}: waiting {m!r} ({w!r}) is in no key at all")
        extra = set(store) - set(q.waiting)
        if extra:
            fail(f"{name!r}: Q holds {sorted(extra)[:5]} the model has not waiting "
                 f"(in flight: {[m in q.flight for m in sorted(extra)[:5]]})")


def check_ledger_keys(q, dump):
    """seq{Q}, dedup{Q}, dedupexp{Q} and moving{Q} hold exactly the model's sequence,
    deduplication records and claims, each as the Keys section encodes it."""
    def enc_seen(r):
        e, first, count, note = r
        v = b"%d %s %d" % (e, b"-" if first is None else b"%d" % first, count)
        return v if note is None else v + b" " + note

    exp = {}
    if q.seq:
        exp[seq_key(q.name)] = (b"string", b"%d" % q.seq)
    if q.dedup:
        exp[dedup_key(q.name)] = (b"hash", sorted((i, enc_seen(r)) for i, r in q.dedup.items()))
        exp[dedupexp_key(q.name)] = (b"zset", sorted((float(r[0]), i) for i, r in q.dedup.items()))
    if q.moving:
        exp[moving_key(q.name)] = (b"hash", sorted(
            (m, b"%d %s %s" % (at, b"-" if p is None else b"%d" % int(p), g or b""))
            for m, (at, p, g) in q.moving.items()))
    got = {}
    for k in ledger_keys(q.name):
        if k in dump:
            t, v = dump[k]
            got[k] = (t, sorted((s, m) for m, s in v)) if t == b"zset" else (t, v)
    if got != exp:
        fail(f"{q.name!r}: sequence, deduplication or claim keys (server, model): {got!r} {exp!r}")


def _zdiff(key, got, exp, limit=6):
    d = [(m, got.get(m), exp.get(m)) for m in sorted(set(got) | set(exp)) if got.get(m) != exp.get(m)]
    return f"{key!r} differs (member, server, model): {d[:limit]}"
