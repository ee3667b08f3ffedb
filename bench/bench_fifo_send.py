#!/usr/bin/env python3
"""What one rmq-gateway send costs the server (issue 32): a FIFO SendMessage as the module
command (`RMQ.PUSH … GROUP g SEQUENCE "rmqgw1 " DEDUP id 300000 NOTE id json`) against the
Lua script the gateway ran before (`SEND`: GET of the deduplication key, INCR, RMQ.PUSH,
SET PX, as EVALSHA), with a plain `RMQ.PUSH … GROUP g json` of the same content as the
floor; and a duplicate send (an id already seen) both ways.

Instructions per send inside redis-server's call() (valgrind --tool=callgrind, between
`callgrind_control -z` and `-d`: repeatable on a shared machine), one server, the three
ways in turn on queues of their own, median of --rounds. Writes
bench/results/bench_fifo_send.md (unless --no-write).
"""

import argparse
import json
import uuid

import harness
from harness import Callgrind, Server, median

# The gateway's SEND script before this change (gateway/src/store.rs), verbatim.
SEND = r"""
local out = {}
for i = 0, (#ARGV / 4) - 1 do
  local delay, group, dedup, json = ARGV[i*4+1], ARGV[i*4+2], ARGV[i*4+3], ARGV[i*4+4]
  local dkey = KEYS[3 + i]
  local seen = false
  if dedup == '1' then
    local prior = redis.call('GET', dkey)
    if prior then out[#out+1] = prior; seen = true end
  end
  if not seen then
    local seq = redis.call('INCR', KEYS[2])
    local raw = string.format('rmqgw1 %020d ', seq) .. json
    if group ~= '' then
      redis.call('RMQ.PUSH', KEYS[1], 'DELAY', delay, 'GROUP', group, raw)
    else
      redis.call('RMQ.PUSH', KEYS[1], 'DELAY', delay, raw)
    end
    if dedup == '1' then
      redis.call('SET', dkey, seq .. ' ' .. cjson.decode(json).id, 'PX', 300000)
    end
    out[#out+1] = tostring(seq)
  end
end
return out
"""


def sends(n):
    """n gateway-style sends: (dedup id, MessageId, JSON), 16 groups."""
    out = []
    for i in range(n):
        mid = str(uuid.UUID(int=i))
        body = {"id": mid, "body": f"order {i} paid", "sent": 1795000000000 + i, "sender": "AKID", "group": f"g{i % 16}",
                "dedup": f"d{i}"}
        out.append((f"d{i}", mid, json.dumps(body, separators=(",", ":"))))
    return out


def module_cmd(q, s):
    d, mid, js = s
    group = json.loads(js)["group"]
    return ("RMQ.PUSH", q, "DELAY", 0, "GROUP", group, "SEQUENCE", "rmqgw1 ", "DEDUP", d, 300000, "NOTE", mid, js)


def lua_cmd(sha, q, s):
    d, _mid, js = s
    group = json.loads(js)["group"]
    return ("EVALSHA", sha, 3, q, f"rmqgw:s{{{q}}}", f"rmqgw:d{{{q}}}:{d}", 0, group, "1", js)


def plain_cmd(q, s):
    _d, _mid, js = s
    return ("RMQ.PUSH", q, "DELAY", 0, "GROUP", json.loads(js)["group"], f"rmqgw1 00000000000000000001 {js}")


def per_send(c, meter, cmds):
    """Instructions per command inside call(), the commands pipelined 100 per round trip."""
    def run():
        for i in range(0, len(cmds), 100):
            p = c.pipeline(transaction=False)
            for cmd in cmds[i:i + 100]:
                p.execute_command(*cmd)
            p.execute()
    _, counted = meter.around(run, ["call"])
    return counted["call"] / len(cmds)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    server = Server(tag="rmq-bench-fifo")
    meter = Callgrind(server)
    server.start()
    try:
        c = server.client()
        sha = c.script_load(SEND)
        msgs = sends(a.messages)
        got = {}
        for r in range(a.rounds):
            c.flushall()
            ways = {
                "plain RMQ.PUSH (floor)": [plain_cmd(f"p{r}", s) for s in msgs],
                "RMQ.PUSH SEQUENCE DEDUP": [module_cmd(f"m{r}", s) for s in msgs],
                "Lua SEND (EVALSHA)": [lua_cmd(sha, f"l{r}", s) for s in msgs],
            }
            order = list(ways.items()) if r % 2 == 0 else list(ways.items())[::-1]
            for name, cmds in order:
                got.setdefault((name, "new"), []).append(per_send(c, meter, cmds))
            # The same sends again: all duplicates (the floor has none: it merges).
            for name in ("RMQ.PUSH SEQUENCE DEDUP", "Lua SEND (EVALSHA)"):
                got.setdefault((name, "duplicate"), []).append(per_send(c, meter, ways[name]))
            assert c.zcard(f"m{r}") + c.zcard(f"park{{m{r}}}") == a.messages
            assert c.zcard(f"l{r}") + c.zcard(f"park{{l{r}}}") == a.messages
            print(f"round {r + 1}: " + ", ".join(f"{k[0]} {k[1]} {v[-1]:,.0f}" for k, v in got.items()), flush=True)
    finally:
        server.stop()
    floor = median(got[("plain RMQ.PUSH (floor)", "new")])
    lines = [
        "# A gateway FIFO send on the server: module command vs the Lua script (bench/bench_fifo_send.py)\n",
        f"Instructions per send inside redis-server's call() (callgrind), median of {a.rounds} rounds of "
        f"{a.messages:,} sends (16 groups, 100 per round trip), {harness.cpu_model('this machine')}.\n",
        "| send | new message | duplicate | new / floor |",
        "|---|---:|---:|---:|",
    ]
    for name in ("plain RMQ.PUSH (floor)", "RMQ.PUSH SEQUENCE DEDUP", "Lua SEND (EVALSHA)"):
        new = median(got[(name, "new")])
        dup = got.get((name, "duplicate"))
        lines.append(f"| {name} | {new:,.0f} | {median(dup):,.0f} | {new / floor:.2f}× |" if dup else
                     f"| {name} | {new:,.0f} | — | {new / floor:.2f}× |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not a.no_write:
        harness.write_report(harness.RESULTS / "bench_fifo_send.md", text)


if __name__ == "__main__":
    main()
