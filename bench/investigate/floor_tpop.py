#!/usr/bin/env python3
"""The floor of the QUANTUM 1 drain ratio (issue 21): what Redis itself costs for the data
work of RMQ.POP COUNT 100 and of RMQ.TPOP t 64 COUNT 100 QUANTUM 1 with one RMQ.ACK per
queue, measured with bare Redis commands under callgrind (no module).

Starts one plain redis-server under `valgrind --tool=callgrind` on a free 127.0.0.1 port,
with the keys as the drains leave them: 64 queues `t_<i>` of 400 messages each and one
queue `q` of 25,600 (skiplists); `prepare{..}` and `meta{..}` with deliveries in flight
(24 per small queue, 1,600 for `q`), made a skiplist and a hashtable as the module does.
Then, for --rounds rounds each, the work of a delivery (move to prepare with a deadline,
a flight record) and of its ack (remove both), as the drains do it:

  POP    ZREMRANGEBYRANK q -100 -1 (the pop: the 100 best found and removed); ZADD
         prepare{q} (100); HSET meta{q} (100); ZREM prepare{q} (100); HDEL meta{q} (100)
         -- one visit and one ack per 100 messages
  TPOP   per queue, 36 for 2 messages and 28 for 1 (100 in all, QUANTUM 1):
         ZREMRANGEBYRANK t_i -k -1; ZADD prepare{t_i}; HSET meta{t_i}; ZREM prepare{t_i};
         HDEL meta{t_i} -- 64 visits and 64 acks per 100 messages

(ZPOPMAX would reply each score, formatted as a double: more than the rest of a message's
work, and nothing the module does. The members taken are read first, not counted.) The
reply the contract asks for is added from the module's own callgrind figures (--entry-pop,
--entry-tpop: RM_ReplyWithArray 227, RM_ReplyWithString 437, RM_ReplyWithLongLong 151 an
entry; TPOP's entry has the queue's name too).

Each command kind is counted in its own phase (redis-server's call(), the commands alone,
as profile_tpop's "command" figures), per message. A visit's or an ack's floor is the sum
of its commands' call(): one lookup of each key and the data work, plus a few hundred
instructions of each command's own bookkeeping that one module command would pay once
(so the floor is a little high for TPOP's 64 visits, and the ratio below a little low).
Prints the per-message sums and their ratio: the best POP/TPOP ratio of the commands'
data work that any implementation with one ACK per queue could reach.

With --wall, the same commands on a plain redis-server, timed by INFO commandstats (usec
per message; CONFIG RESETSTAT before each phase, no reply added): the floor in time, where
memory counts too. It needs a quiet machine.
"""

import argparse

from profile_tpop import BareMeter


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--entry-pop", type=int, default=227 + 437 + 151, help="reply of a POP entry")
    ap.add_argument("--entry-tpop", type=int, default=227 + 2 * 437 + 151, help="reply of a TPOP entry")
    ap.add_argument("--wall", action="store_true",
                    help="INFO commandstats usec on a plain server instead of callgrind (the replies not added)")
    a = ap.parse_args()
    meter = BareMeter(not a.wall)
    try:
        c, measure = meter.c, meter.measure

        deadline = 1_800_000_000_000
        convert = "x" * 100

        def fill(key, n, prefix):
            p = c.pipeline(transaction=False)
            for i in range(0, n, 500):
                members = {f"{prefix}{j}": deadline + j for j in range(i, min(n, i + 500))}
                p.zadd(f"prepare{{{key}}}", members)
                p.hset(f"meta{{{key}}}", mapping={f"f{m}": f"1:{s}" for m, s in members.items()})
            # As the module makes them (RedisQueue::convert_zset, convert_meta).
            p.zadd(f"prepare{{{key}}}", {convert: 0})
            p.zrem(f"prepare{{{key}}}", convert)
            p.hset(f"meta{{{key}}}", convert, 1)
            p.hdel(f"meta{{{key}}}", convert)
            p.execute()

        for i in range(64):
            c.zadd(f"t_{i}", {f"m{i}:{j}": 1 for j in range(400)})
            fill(f"t_{i}", 24, f"in{i}:")
        for b in range(0, 25_600, 1000):
            c.zadd("q", {f"p:{j}": 1 for j in range(b, b + 1000)})
        fill("q", 1600, "in:")

        phases = ("pop", "zadd", "hset", "zrem", "hdel")
        sums = {"pop": dict.fromkeys(phases, 0), "tpop": dict.fromkeys(phases, 0)}
        msgs = {"pop": 0, "tpop": 0}
        for _ in range(a.rounds):
            for who, plan in (("pop", [("q", 100)]), ("tpop", [(f"t_{i}", 2 if i < 36 else 1) for i in range(64)])):
                p = c.pipeline(transaction=False)
                for q, k in plan:
                    p.zrange(q, -k, -1)
                taken = [(q, [m.decode() for m in g]) for (q, _), g in zip(plan, p.execute())]
                sums[who]["pop"] += measure("pop", [("ZREMRANGEBYRANK", q, -k, -1) for q, k in plan])[0]
                msgs[who] += sum(len(ms) for _, ms in taken)
                steps = {
                    "zadd": lambda q, ms: ("ZADD", f"prepare{{{q}}}", *[x for m in ms for x in (deadline, m)]),
                    "hset": lambda q, ms: ("HSET", f"meta{{{q}}}", *[x for m in ms for x in (f"f{m}", f"1:{deadline}")]),
                    "zrem": lambda q, ms: ("ZREM", f"prepare{{{q}}}", *ms),
                    "hdel": lambda q, ms: ("HDEL", f"meta{{{q}}}", *[f"f{m}" for m in ms]),
                }
                for step, make in steps.items():
                    sums[who][step] += measure(step, [make(q, ms) for q, ms in taken])[0]
        per = {who: {k: v / msgs[who] for k, v in s.items()} for who, s in sums.items()}
        if not a.wall:
            per["pop"]["reply"], per["tpop"]["reply"] = a.entry_pop, a.entry_tpop
        print(f"per message, {meter.unit}:")
        for who in ("pop", "tpop"):
            parts = "  ".join(f"{k} {meter.fmt(v)}" for k, v in per[who].items())
            print(f"{who:5} per message: {parts}  total {meter.fmt(sum(per[who].values()))}")
        pop, tpop = sum(per["pop"].values()), sum(per["tpop"].values())
        print(f"floor: POP/TPOP QUANTUM 1 = {meter.fmt(pop)} / {meter.fmt(tpop)} = {pop / tpop:.3f}")
    finally:
        meter.stop()


if __name__ == "__main__":
    main()
