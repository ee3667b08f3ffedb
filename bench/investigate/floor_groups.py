#!/usr/bin/env python3
"""The floor of the grouped drain ratio (issue 21: grouped / ungrouped msgs/s >= 0.6):
what Redis itself costs for the data work of draining grouped messages, against the same
messages ungrouped, with bare Redis commands (no module).

bench_v2 section 2's messages, adjacent order (group j's --per-group messages `m:<j>:<k>`
at PRIORITY groups - j, one after another), drained in rounds of 100 as its consumers do
(pop COUNT 100, then ack those 100), with 1,500 other deliveries in flight (the other
consumers'). Four peers, each on its own keys of one plain
redis-server on a free 127.0.0.1 port (under `valgrind --tool=callgrind` with
--callgrind, else plain):

  ungrouped  the data work of RMQ's ungrouped drain: the pop (ZREMRANGEBYRANK Q -100 -1:
             the 100 best found and removed, as RMQ does it without replying scores),
             each message's waiting record looked up (HMGET meta w<m>: absent here, but a
             copy rolled back keeps its delivery count there), ZADD prepare, HSET meta
             f<m> (the in-flight record with the priority a rollback restores); the ack:
             ZREM prepare, HDEL meta f<m>.
  layout     RMQ's layout (the v3 contract: a group's later messages are held back from their push
             on, in park{Q} scored in the queue's order, indexed by group in parkidx{Q};
             only each group's head is in Q; each waiting message's group in its w<m>
             record): the ungrouped work, plus at the pop the heads' records read (HMGET
             w<m>: their groups) and deleted (HDEL w<m>) and their index entries removed
             (ZREM parkidx); the in-flight record is g<m>; at the ack, per group, its next
             message found (ZRANGEBYSCORE parkidx h h LIMIT 0 1 on the group's hash), its
             group checked (HMGET w<m>: groups may share the hash) and its score read
             (ZMSCORE park), then moved back (ZREM park, ZADD Q).
  ideal      the least any layout can do that keeps the contract's keys: held-back messages in a
             list per group (`hb{Q}:<group>`, each entry `score:message`, in order: one
             LPOP both finds and removes a group's next), and one record per message
             (r<m>, its group; the pop overwrites it with the in-flight record instead of
             deleting one and writing another); the ungrouped work, plus at the pop the
             heads' records read (HMGET r<m>: their groups); at the ack, per group, LPOP
             hb{Q}:<group> and ZADD Q. It leaves out what the contract needs besides (INFO's
             `ready` and `next_due` over held-back timed messages without a scan, the busy
             state), so it is below any real layout.
  ideal+set  `ideal`, with the held-back messages also in one sorted set scored in the
             queue's order (as park{Q}), which INFO's `ready` and `next_due` over held-back
             timed messages need without a scan: the ack's ZREM from it too.

Each step is measured in its own phase, per message: with --callgrind, redis-server's
call() instructions (the commands alone, what profile_tpop's "command" figures count);
without, INFO commandstats usec (CONFIG RESETSTAT before each phase). Steps that one
command does for 100 messages share a command's fixed cost; the per-group steps
(ZRANGEBYSCORE, LPOP) pay one each, which a module would not (so their floors are a
little high). Prints each peer's steps and total per message, and the floor ratios
ungrouped / layout and ungrouped / ideal; RMQ's own work per message on top of Redis's
(its drain's figure minus this floor) is added to both sides in the note, not here.
"""

import argparse

from profile_tpop import BareMeter

DEADLINE = 1_800_000_000_000
# Deliveries of the other 15 consumers in flight during a round.
IN_FLIGHT = 1500


def fnv53(g: bytes) -> int:
    """The park index score of a group (codec::group_score): 53 bits of FNV-1a."""
    h = 0xCBF29CE484222325
    for b in g:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h & ((1 << 53) - 1)


def order_key(prio: int) -> bytes:
    """codec::order_key for a priority queue: descending priority sorts first."""
    u = (prio & 0xFFFFFFFFFFFFFFFF) ^ (1 << 63)
    return ((~u) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=2000)
    ap.add_argument("--per-group", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=40, help="rounds of 100 messages measured")
    ap.add_argument("--callgrind", action="store_true", help="count instructions (else commandstats usec)")
    a = ap.parse_args()
    meter = BareMeter(a.callgrind)
    c = meter.c
    try:
        fill(c, a.groups, a.per_group)
        peers = ("ungrouped", "layout", "ideal", "ideal+set")
        sums = {p: {} for p in peers}
        msgs = 0
        for _ in range(a.rounds):
            for peer in peers:
                # Which messages the pop takes, with their scores (not counted: the pop's
                # finding them is counted in its "pop" step).
                st = {"taken": c.zrange(q_of(peer), -100, -1, withscores=True)}
                for step, make, keep in steps_of(peer, a.groups):
                    cmds = make(st)
                    v, replies = meter.measure(f"{peer}-{step}", cmds) if cmds else (0, [])
                    sums[peer][step] = sums[peer].get(step, 0) + v
                    if keep:
                        st[keep] = replies
            msgs += len(st["taken"])
        if msgs == 0:
            raise SystemExit("floor_groups: nothing drained")
        total = {}
        print(f"per message, {meter.unit}; {msgs:,} messages of {a.groups:,} groups x {a.per_group} per peer:")
        for peer in peers:
            per = {k: v / msgs for k, v in sums[peer].items()}
            total[peer] = sum(per.values())
            parts = "  ".join(f"{k} {meter.fmt(v)}" for k, v in per.items())
            print(f"  {peer:9} {parts}  total {meter.fmt(total[peer])}")
        for peer in peers[1:]:
            print(f"floor: ungrouped / {peer} = {total['ungrouped'] / total[peer]:.3f}")
    finally:
        meter.stop()


def fill(c, groups, per_group):
    """The peers' keys as bench_v2's `gfill` leaves them, adjacent order."""
    p = c.pipeline(transaction=False)
    for j in range(groups):
        prio = groups - j
        g = f"g{j}".encode()
        ms = [f"m:{j:07}:{k:03}".encode() for k in range(per_group)]
        p.zadd("Q{u}", {m: prio for m in ms})
        # layout: the head in Q, the rest parked, all indexed, each with its w<m> record.
        p.zadd("Q{l}", {ms[0]: prio})
        p.zadd("park{l}", {m: prio for m in ms[1:]})
        p.zadd("parkidx{l}", {order_key(prio) + m: fnv53(g) for m in ms})
        p.hset("meta{l}", mapping={b"w" + m: b"0::" + g for m in ms})
        # ideal (and ideal+set): the head in Q, the rest in its group's list, one record each.
        for t in ("i", "s"):
            p.zadd(f"Q{{{t}}}", {ms[0]: prio})
            p.rpush(f"hb{{{t}}}:".encode() + g, *[b"%d:%s" % (prio, m) for m in ms[1:]])
            p.hset(f"meta{{{t}}}", mapping={b"r" + m: b"0::" + g for m in ms})
        # ideal+set: the held-back messages in a scored set too.
        p.zadd("park{s}", {m: prio for m in ms[1:]})
        if j % 200 == 199:
            p.execute()
    p.execute()
    # The other consumers' deliveries in flight (bench_v2's 16 consumers pop 100 each):
    # prepare{..} a skiplist and meta{..} a hashtable throughout, as in the drain.
    for t in "ulis":
        c.zadd(f"prepare{{{t}}}", {f"in:{j}": DEADLINE + j for j in range(IN_FLIGHT)})
        c.hset(f"meta{{{t}}}", mapping={f"fin:{j}": "1:1" for j in range(IN_FLIGHT)})


TAG = {"ungrouped": "u", "layout": "l", "ideal": "i", "ideal+set": "s"}


def q_of(peer):
    return f"Q{{{TAG[peer]}}}"


def steps_of(peer, n_groups):
    """One round of `peer` (pop 100, ack them, given the state `st` with the messages
    taken): (step, its commands given the state so far, where its replies are kept)."""
    t = TAG[peer]
    q, prep, meta = q_of(peer), f"prepare{{{t}}}", f"meta{{{t}}}"
    flight = {"ungrouped": b"f", "layout": b"g"}.get(peer, b"r")
    ideal = peer.startswith("ideal")

    def ms(st):
        return [m for m, _ in st["taken"]]

    def group_of(m):
        return b"g%d" % int(m.split(b":")[1])

    steps = [
        ("pop", lambda st: [("ZREMRANGEBYRANK", q, -len(ms(st)), -1)], None),
        ("zadd prepare", lambda st: [("ZADD", prep, *[x for m in ms(st) for x in (DEADLINE, m)])], None),
    ]
    if not ideal:
        # RMQ's pop reads each message's waiting record: its group, or (ungrouped: absent,
        # but looked up) the delivery count a copy rolled back keeps there.
        steps.append(("hmget w", lambda st: [("HMGET", meta, *[b"w" + m for m in ms(st)])], None))
    if peer == "layout":
        steps += [
            ("hdel w", lambda st: [("HDEL", meta, *[b"w" + m for m in ms(st)])], None),
            ("zrem parkidx", lambda st: [("ZREM", "parkidx{l}", *[order_key(int(s)) + m for m, s in st["taken"]])], None),
        ]
    if ideal:
        steps.append(("hmget r", lambda st: [("HMGET", meta, *[b"r" + m for m in ms(st)])], None))
    steps += [
        ("hset flight", lambda st: [("HSET", meta, *[x for m in ms(st) for x in (flight + m, b"1:1:" + group_of(m))])], None),
        ("zrem prepare", lambda st: [("ZREM", prep, *ms(st))], None),
        ("hdel flight", lambda st: [("HDEL", meta, *[flight + m for m in ms(st)])], None),
    ]

    def prio(m):
        return n_groups - int(m.split(b":")[1])

    if peer == "layout":
        def nexts(st):
            return [r[0][8:] for r in st["found"] if r]

        def each(make):
            return lambda st: make(st) if nexts(st) else []

        steps += [
            ("find next", lambda st: [("ZRANGEBYSCORE", "parkidx{l}", fnv53(group_of(m)), fnv53(group_of(m)),
                                       "LIMIT", 0, 1) for m in ms(st)], "found"),
            ("hmget w next", each(lambda st: [("HMGET", meta, *[b"w" + m for m in nexts(st)])]), None),
            ("zmscore park", each(lambda st: [("ZMSCORE", "park{l}", *nexts(st))]), None),
            ("zrem park", each(lambda st: [("ZREM", "park{l}", *nexts(st))]), None),
            ("zadd Q", each(lambda st: [("ZADD", q, *[x for m in nexts(st) for x in (prio(m), m)])]), None),
        ]
    if ideal:
        def entries(st):
            return [e.split(b":", 1) for e in st["next"] if e]

        hb = b"hb{%s}:" % TAG[peer].encode()
        steps += [
            ("lpop next", lambda st: [("LPOP", hb + group_of(m)) for m in ms(st)], "next"),
            ("zadd Q", lambda st: [("ZADD", q, *[x for e in entries(st) for x in e])] if entries(st) else [], None),
        ]
    if peer == "ideal+set":
        steps.append(("zrem park", lambda st: [("ZREM", "park{s}", *[e[1] for e in entries(st)])] if entries(st) else [],
                      None))
    return steps


if __name__ == "__main__":
    main()
