"""Push, pop and ack phases sent from Python, each measured apart: in server usec per call
(`Usec`: INFO commandstats, CONFIG RESETSTAT before the phase, with the load meter's
disturbance) or in instructions (`Instr`: harness.Callgrind, the whole server and the
commands alone). bench_delivery_features.py and bench_ops.py measure with them.
"""

import time

from . import pinned
from .callgrind import Callgrind


def cmdstats(c):
    """INFO commandstats as {command: (calls, usec)}."""
    return {k[len("cmdstat_"):]: (v["calls"], v["usec"]) for k, v in c.info("commandstats").items()}


def per_call(stats, cmd):
    calls, usec = stats.get(cmd, (0, 0))
    return usec / calls if calls else None


class Usec:
    """Server usec per call from INFO commandstats (CONFIG RESETSTAT before the phase)."""
    unit = "usec"

    def phase(self, c, cmd, calls, fn):
        """fn() sends `calls` calls of `cmd`; returns (usec per call, disturbance, {})."""
        c.config_resetstat()
        meter = pinned.LoadMeter()
        fn()
        dist = pinned.disturbance(meter.read())
        return per_call(cmdstats(c), cmd), dist, {}


class Instr:
    """Instructions the server executed (harness.Callgrind): repeatable whatever else the
    machine does. Two counts: `total`, the whole server (the dump's summary: commands,
    network I/O, parsing, replies, timers), and `cmd`, the commands alone (the inclusive
    cost of redis-server's call(), which runs one command: what INFO commandstats times);
    and the inclusive cost of each of the server's functions `fns` (e.g. RM_StreamAdd)."""
    unit = "instr"

    def __init__(self, server, fns=()):
        self.meter = Callgrind(server)
        self.fns = tuple(fns)

    def around(self, fn):
        """fn()'s result and {total, cmd, each of fns}: the instructions it made the server run."""
        r, d = self.meter.around(fn, ["call", *self.fns])
        return r, {"total": d["total"], "cmd": d["call"], **{f: d[f] for f in self.fns}}

    def phase(self, c, cmd, calls, fn):
        """As Usec.phase: (whole-server instructions per call, 0, {"cmd": command-only per
        call, and each of fns per call})."""
        _, d = self.around(fn)
        return d["total"] / calls, 0.0, {"cmd": d["cmd"] / calls, **{f: d[f] / calls for f in self.fns}}


def pipelined(c, n, add, per_rt=100):
    """Sends n steps, per_rt per round trip; add(pipe, i) adds step i's commands. Returns the
    replies, in order."""
    out = []
    for start in range(0, n, per_rt):
        p = c.pipeline(transaction=False)
        for i in range(start, min(n, start + per_rt)):
            add(p, i)
        out.extend(p.execute())
    return out


def instr_phases(c, n, batch, meter, policy="", warm_ms=0):
    """The `cpu` phases of the driver, sent from here so that each is counted apart under
    callgrind: FLUSHALL (and the policy); push n messages in commands of `batch`, pop them
    all (COUNT batch), ack them all; 100 single commands or 10 of 100 per round trip.
    Returns {push, pop, ack: meter.phase's (value per message, disturbance, extras)}."""
    c.flushall()
    if policy:
        c.execute_command("RMQ.POLICY", "q", "SET", *policy.split())
        if warm_ms:
            c.execute_command("RMQ.POP", "q")
            time.sleep(warm_ms / 1000)
    msgs = [f"msg:{i:016}" for i in range(n)]
    per_rt = max(1, min(100, 1000 // batch))
    cmds = -(-n // batch)
    chunks = [msgs[i * batch:(i + 1) * batch] for i in range(cmds)]
    got = []
    out = {"push": meter.phase(c, "rmq.push", n, lambda: pipelined(
        c, cmds, lambda p, i: p.execute_command("RMQ.PUSH", "q", "PRIORITY", i % 8, *chunks[i]), per_rt))}
    pop = ("RMQ.POP", "q") + (("COUNT", batch) if batch > 1 else ())
    out["pop"] = meter.phase(c, "rmq.pop", n, lambda: got.extend(
        pipelined(c, cmds, lambda p, i: p.execute_command(*pop), per_rt)))
    popped = sorted(e[0].decode() for r in got for e in (r or []))
    if popped != msgs:
        raise RuntimeError(f"cpu phases: popped {len(popped)} of {n}")
    out["ack"] = meter.phase(c, "rmq.ack", n, lambda: pipelined(
        c, cmds, lambda p, i: p.execute_command("RMQ.ACK", "q", *chunks[i]), per_rt))
    return out
