"""the contract's RMQ.SCHEDULE in the model (model_support.Model): SET / DEL / LIST and the firings
the timer makes when the test clock moves, for the timings the fuzzer uses: `EVERY ms`
and the 6-field `*/k * * * * *` (every k seconds, k dividing 60), each with START, END,
TIMES, and the RANGE / PRIORITY / DELAY modes with or without a group.

A firing is the push RMQ.PUSH would make (same checks: a failing one is skipped and
counted in schedule_skipped); missed times fire once, then the schedule goes on from its
next time after now; TIMES deletes it after its n-th firing. The server fires, in one
timer step before rolling back leases, every due schedule in order of (planned time,
queue, name).
"""

import struct

MAX_EVERY = 2 ** 41
MIN_AT = 946684800000
TWO53 = 2 ** 53


class Sched:
    def __init__(self, every, cron_k, start, end, times, mode, value, group, msg, text):
        self.every, self.cron_k = every, cron_k
        self.start, self.end, self.times = start, end, times
        self.mode, self.value, self.group, self.msg, self.text = mode, value, group, msg, text
        self.next, self.fired, self.last = None, 0, None

    def __repr__(self):
        return f"Sched({self.text!r}, next={self.next}, fired={self.fired}, last={self.last})"

    def _bounded(self, t):
        if t is None or t > (self.end if self.end is not None else TWO53) or t > TWO53:
            return None
        return t

    def _cron_from(self, t, inclusive):
        """The first multiple of k seconds at or after (inclusive) / after t."""
        step = self.cron_k * 1000
        n = -(-t // step) * step
        return n if (inclusive or n > t) else n + step

    def first(self, now):
        if self.every is not None:
            start = self.start if self.start is not None else now + self.every
            if start < now:
                start += -(-(now - start) // self.every) * self.every
            return self._bounded(start)
        return self._bounded(self._cron_from(max(now, self.start or now), True))

    def after(self, planned, now):
        if self.every is not None:
            steps = (now - planned) // self.every + 1 if now >= planned else 1
            return self._bounded(planned + steps * self.every)
        return self._bounded(self._cron_from(max(now, planned), False))


def _fail(msg):
    from model_support import fail  # (model_support imports this module)
    fail(msg)


def _scheds(q):
    if not hasattr(q, "schedules"):
        q.schedules = {}
    return q.schedules


def schedule_set(model, name, sname, sched, reply, syntax_error=None):
    """RMQ.SCHEDULE name SET sname ... (already parsed into `sched`, or a syntax error the
    server must answer)."""
    q = model.q(name)
    kind = {"RANGE": "range", "PRIORITY": "priority", "DELAY": "fixed"}[sched.mode] if sched else None
    err = syntax_error
    if err is None and q.kind is not None and q.kind != kind and not q.empty():
        err = "kind mismatch"
    elif err is None and not sched.msg:
        err = "empty message"
    elif err is None and len(sched.msg) > model.settings["max-message-bytes"]:
        err = "message too long"
    first = None
    if err is None:
        first = sched.first(model.now)
        if first is None:
            err = "never fires"
    if err is not None:
        if not isinstance(reply, Exception):
            _fail(f"SCHEDULE SET should fail ({err}); got {reply!r}")
        return
    if isinstance(reply, Exception) or reply != first:
        _fail(f"SCHEDULE SET replied {reply!r}, model's first firing {first}")
    sched.next = first
    _scheds(q)[sname] = sched


def schedule_del(model, name, snames, reply):
    s = _scheds(model.q(name))
    n = 0
    for x in snames:
        if s.pop(x, None) is not None:
            n += 1
    if reply != n:
        _fail(f"SCHEDULE DEL replied {reply!r}, model {n}")


def schedule_list(model, name, reply):
    exp = [[n, s.text, s.next, s.fired, s.last] for n, s in sorted(_scheds(model.q(name)).items())]
    if reply != exp:
        _fail(f"SCHEDULE LIST replied {reply!r}, model {exp}")


def fire_due(model):
    """The timer's firings at model.now (before it rolls back leases)."""
    due = sorted((s.next, qname, sname) for qname, q in model.queues.items()
                 for sname, s in _scheds(q).items() if s.next is not None and s.next <= model.now)
    for planned, qname, sname in due:
        q = model.queues[qname]
        s = q.schedules[sname]
        mode, value = s.mode, s.value
        if mode == "DELAY":
            mode, value = "AT", min(planned + value, TWO53)
        err, _added = model.push_effect(qname, mode, value, s.group, [s.msg])
        if err is None:
            model.counters["schedule_fired"] += 1
        else:
            model.counters["schedule_skipped"] += 1
        s.fired += 1
        if s.times is not None and s.fired >= s.times:
            del q.schedules[sname]
            continue
        s.last = planned
        s.next = s.after(planned, model.now)


def sched_key(name):
    return b"sched{" + name + b"}"


def check_sched_keys(model, dump):
    """sched{Q} exists exactly while Q has schedules; each field's state is the model's
    (the value starts with a version byte and little-endian next, fired, last)."""
    for name, q in model.queues.items():
        s = _scheds(q)
        got = dump.get(sched_key(name))
        if not s:
            if got is not None:
                _fail(f"{sched_key(name)!r} exists, the model has no schedule")
            continue
        if got is None or got[0] != b"hash":
            _fail(f"{sched_key(name)!r} is {got!r}, the model has {s}")
        fields = dict(got[1])
        if set(fields) != set(s):
            _fail(f"{sched_key(name)!r} holds {sorted(fields)}, model {sorted(s)}")
        none = -2 ** 63
        for sname, v in fields.items():
            nxt, fired, last = struct.unpack_from("<qqq", v, 1)
            state = (None if nxt == none else nxt, fired, None if last == none else last)
            want = (s[sname].next, s[sname].fired, s[sname].last)
            if state != want:
                _fail(f"schedule {name!r}/{sname!r}: server {state}, model {want}")
