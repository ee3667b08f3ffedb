"""Command metadata (COMMAND DOCS / INFO / GETKEYS, arity enforced by Redis), the
maxmemory-policy eviction warning (server log and INFO rmq_eviction_risk) and the INFO rmq
counters after a scripted scenario (docs/COMMANDS.md: Model, Observability)."""

import time

import pytest

from helpers import (expect_error, info_rmq, nack, pop, pop_expire_sweep, push, raw_client,
                     wait_until)
from ops_support import BlockedPop, log_wait, pairs, tree, wait_blocked

# name -> (arity, flags that must be present, flags that must be absent)
COMMANDS = {
    # -2: a push without a mode reaches the module, whose error names the modes (v5)
    "rmq.push": (-2, {"write", "denyoom"}, {"readonly"}),
    "rmq.pop": (-2, {"write"}, {"readonly"}),
    "rmq.ack": (-3, {"write", "fast"}, {"readonly"}),
    "rmq.nack": (-3, {"write", "fast"}, {"readonly"}),
    "rmq.sweep": (-2, {"write"}, {"readonly"}),
    "rmq.extend": (4, {"write", "fast"}, {"readonly"}),
    "rmq.ackid": (-3, {"write", "fast"}, {"readonly"}),
    "rmq.nackid": (-3, {"write", "fast"}, {"readonly"}),
    "rmq.extendid": (4, {"write", "fast"}, {"readonly"}),
    "rmq.cancel": (-3, {"write"}, {"readonly"}),
    "rmq.replay": (-2, {"write", "denyoom"}, {"readonly"}),
    "rmq.redrive": (-3, {"write"}, {"readonly"}),
    "rmq.info": (2, {"readonly", "fast"}, {"write"}),
    "rmq.pending": (-2, {"readonly"}, {"write"}),
    "rmq.policy": (-3, {"readonly"}, {"write"}),
    "rmq.schedule": (-3, {"readonly"}, {"write"}),
    "rmq.route": (4, {"readonly", "fast"}, {"write"}),
    "rmq.tpop": (-3, {"write", "blocking"}, {"readonly"}),
    "rmq.queues": (-1, {"readonly"}, {"write"}),
    "rmq.trace": (-3, {"readonly"}, {"write"}),
    "rmq.purge": (-2, {"write"}, {"readonly"}),
    "rmq.drop": (2, {"write"}, {"readonly"}),
}

KEYLESS = {"rmq.route", "rmq.tpop", "rmq.queues"}

# name -> argument names, in order (top level; PUSH's mode is a oneof)
ARGUMENTS = {
    "rmq.push": ["queue", "mode", "group", "prefix", "dedup", "messages", "message"],
    "rmq.pop": ["queue", "count", "ms", "timeout-ms", "ids"],
    "rmq.ack": ["queue", "message"],
    "rmq.nack": ["queue", "message", "ms", "dead"],
    "rmq.sweep": ["queue", "count"],
    "rmq.extend": ["queue", "message", "ms"],
    "rmq.ackid": ["queue", "id"],
    "rmq.nackid": ["queue", "id", "ms", "dead"],
    "rmq.extendid": ["queue", "id", "ms"],
    "rmq.cancel": ["queue", "message"],
    "rmq.replay": ["queue", "count"],
    "rmq.redrive": ["queue", "operation"],
    "rmq.info": ["queue"],
    "rmq.pending": ["queue", "count"],
    "rmq.policy": ["queue", "operation"],
    "rmq.schedule": ["queue", "operation"],
    "rmq.route": ["topic", "slots", "basis"],
    "rmq.tpop": ["topic", "slots", "count", "quantum", "ms", "timeout-ms"],
    "rmq.queues": ["pattern", "count", "cursor"],
    "rmq.trace": ["queue", "message", "count"],
    "rmq.purge": ["queue", "dead"],
    "rmq.drop": ["queue"],
}

# a valid call of each (after the command name) for COMMAND GETKEYS
VALID = {
    "rmq.push": ["myq", "RANGE", "10", "m"],
    "rmq.pop": ["myq"],
    "rmq.ack": ["myq", "m"],
    "rmq.nack": ["myq", "m", "DELAY", "5", "DEAD"],
    "rmq.sweep": ["myq"],
    "rmq.extend": ["myq", "m", "10"],
    "rmq.ackid": ["myq", "1", "2"],
    "rmq.nackid": ["myq", "1", "DELAY", "5", "DEAD"],
    "rmq.extendid": ["myq", "1", "10"],
    "rmq.cancel": ["myq", "m", "n"],
    "rmq.replay": ["myq", "COUNT", "3"],
    "rmq.redrive": ["myq", "CLAIM"],
    "rmq.info": ["myq"],
    "rmq.pending": ["myq", "COUNT", "3"],
    "rmq.policy": ["myq", "GET"],
    "rmq.schedule": ["myq", "LIST"],
    "rmq.route": ["topic", "8", "basis"],
    "rmq.tpop": ["topic", "8"],
    "rmq.queues": ["COUNT", "5"],
    "rmq.trace": ["myq", "m"],
    "rmq.purge": ["myq", "DEAD"],
    "rmq.drop": ["myq"],
}

DOC_KEYS = {"summary", "since", "group", "complexity", "module", "arguments", "name", "type",
            "token", "flags", "key_spec_index", "display_text", "doc_flags", "history"}


def _without_display_text(x):
    """Valkey adds a display_text to every argument; the module sets none."""
    if isinstance(x, dict):
        return {k: _without_display_text(v) for k, v in x.items() if k != "display_text"}
    if isinstance(x, list):
        return [_without_display_text(v) for v in x]
    return x


def _docs(c, name):
    rep = c.execute_command("COMMAND", "DOCS", name)
    assert isinstance(rep, list) and len(rep) == 2 and rep[0] == name.encode(), rep
    return _without_display_text(tree(rep[1], DOC_KEYS))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_command_docs(server, name):
    d = _docs(raw_client(server), name)
    assert d["group"] == "module" and d["module"] == "rmq"
    assert len(d["summary"]) > 10
    assert d["complexity"].startswith("O(")
    assert d["since"]
    args = d["arguments"]
    assert [a["name"] for a in args] == ARGUMENTS[name]
    if name in KEYLESS:
        assert all(a["type"] != "key" for a in args), f"{name} is keyless"
    else:
        assert args[0] == {"name": "queue", "type": "key", "key_spec_index": 0}


def test_command_docs_argument_details(server):
    c = raw_client(server)
    push = _docs(c, "rmq.push")["arguments"]
    assert push[1]["type"] == "oneof"
    assert [(a["token"], a["type"]) for a in push[1]["arguments"]] == \
        [("RANGE", "integer"), ("PRIORITY", "integer"), ("AT", "unix-time"), ("DELAY", "integer")]
    assert push[2]["token"] == "GROUP" and push[2]["flags"] == ["optional"]
    assert push[3]["token"] == "SEQUENCE" and push[3]["flags"] == ["optional"]
    assert push[4]["type"] == "block" and push[4]["flags"] == ["optional"]
    assert [(a.get("token"), a["type"], a.get("flags")) for a in push[4]["arguments"]] == \
        [("DEDUP", "string", None), (None, "integer", None), ("NOTE", "string", ["optional"])]
    assert (push[5]["token"], push[5]["type"], push[5]["flags"]) == ("MESSAGES", "pure-token", ["optional"])
    assert push[6]["flags"] == ["multiple"]
    redrive = _docs(c, "rmq.redrive")["arguments"][1]
    assert [(a["token"], a["type"], a.get("flags")) for a in redrive["arguments"]] == \
        [("CLAIM", "block", None), ("DONE", "string", ["multiple"])]
    pol = _docs(c, "rmq.policy")["arguments"][1]
    assert pol["type"] == "oneof"
    set_ = pol["arguments"][0]
    assert set_["token"] == "SET" and set_["type"] == "block" and set_["flags"] == ["multiple"]
    assert [(a["name"], a["type"]) for a in set_["arguments"]] == [("field", "string"), ("value", "integer")]
    sched = _docs(c, "rmq.schedule")["arguments"][1]
    assert [(a["token"], a["type"]) for a in sched["arguments"]] == \
        [("SET", "block"), ("DEL", "string"), ("LIST", "pure-token")]
    set_ = sched["arguments"][0]["arguments"]
    assert [a["name"] for a in set_] == ["name", "timing", "unix-ms", "unix-ms", "n", "mode", "group", "messages",
                                     "message"]
    assert [(a.get("token"), a["type"]) for a in set_[1]["arguments"]] == [("EVERY", "integer"), (None, "block")]
    popa = _docs(c, "rmq.pop")["arguments"]
    assert [(a.get("token"), a.get("flags")) for a in popa[1:]] == \
        [("COUNT", ["optional"]), ("LEASE", ["optional"]), ("BLOCK", ["optional"]), ("IDS", ["optional"])]
    nacka = _docs(c, "rmq.nack")["arguments"]
    assert nacka[2]["token"] == "DELAY" and nacka[2]["flags"] == ["optional"]
    assert nacka[3] == {"name": "dead", "type": "pure-token", "token": "DEAD",
                        "flags": ["optional"]}
    for name in ("rmq.ack", "rmq.cancel"):
        assert _docs(c, name)["arguments"][1]["flags"] == ["multiple"]
    for name, tok in (("rmq.sweep", "LIMIT"), ("rmq.replay", "COUNT"), ("rmq.pending", "COUNT")):
        a = _docs(c, name)["arguments"][1]
        assert a["token"] == tok and a["type"] == "integer" and a["flags"] == ["optional"]


def test_command_docs_all_at_once(server):
    c = raw_client(server)
    rep = pairs(c.execute_command("COMMAND", "DOCS", *COMMANDS))
    assert set(rep) == set(COMMANDS)
    listed = c.execute_command("COMMAND", "LIST", "FILTERBY", "MODULE", "rmq")
    assert sorted(x.decode() for x in listed) == sorted(COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_command_info(server, name):
    c = raw_client(server)
    (entry,) = c.execute_command("COMMAND", "INFO", name)
    arity, must, must_not = COMMANDS[name]
    assert entry[0] == name.encode()
    assert entry[1] == arity
    flags = {f.decode() for f in entry[2]}
    assert must <= flags and not (must_not & flags), flags
    assert "module" in flags
    specs = entry[8]
    if name in KEYLESS:
        assert entry[3:6] == [0, 0, 0] and specs == []
        return
    assert entry[3:6] == [1, 1, 1]
    assert len(specs) == 1
    spec = tree(specs[0], {"flags", "begin_search", "find_keys", "type", "spec", "index",
                           "lastkey", "keystep", "limit"})
    assert spec["begin_search"] == {"type": "index", "spec": {"index": 1}}
    assert spec["find_keys"] == {"type": "range",
                                 "spec": {"lastkey": 0, "keystep": 1, "limit": 0}}
    if "write" in flags or name in ("rmq.policy", "rmq.schedule"):
        # RMQ.POLICY and RMQ.SCHEDULE are flagged readonly so that GET and LIST answer on
        # replicas; SET writes.
        assert "RW" in spec["flags"]
    else:
        assert spec["flags"] == ["RO", "access"]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_arity_enforced_by_redis(r, name):
    arity, _, _ = COMMANDS[name]
    n = abs(arity) - 1                            # arguments after the command name
    for k in range(n):
        args = VALID[name][:k]
        msg = expect_error(r, name, *args, contains="wrong number of arguments")
        assert name in msg
    if arity > 0:
        expect_error(r, name, *VALID[name], "extra", contains="wrong number of arguments")
    assert r.dbsize() == 0


@pytest.mark.parametrize("name", [n for n in COMMANDS if n not in KEYLESS])
def test_command_getkeys(server, name):
    c = raw_client(server)
    assert c.execute_command("COMMAND", "GETKEYS", name.upper(), *VALID[name]) == [b"myq"]
    keys = c.execute_command("COMMAND", "GETKEYSANDFLAGS", name, *VALID[name])
    assert keys[0][0] == b"myq"


@pytest.mark.parametrize("name", sorted(KEYLESS))
def test_command_getkeys_keyless(r, name):
    expect_error(r, "COMMAND", "GETKEYS", name.upper(), *VALID[name], contains="no key arguments")


# ---------------------------------------------------------------------------------------
# eviction warning
# ---------------------------------------------------------------------------------------

WARNING = "WARNING maxmemory-policy is"


def _risk(c):
    return info_rmq(c)["eviction_risk"]


def test_no_eviction_warning_by_default(server, r):
    assert r.config_get("maxmemory-policy")["maxmemory-policy"] in (b"noeviction", "noeviction")
    assert _risk(r) == 0
    assert "rmq_eviction_risk" in info_rmq(r)
    assert WARNING not in server.log_text()


def test_eviction_warning_allkeys_lru(start_server):
    s = start_server(extra_conf=["--maxmemory-policy", "allkeys-lru"])
    c = s.client()
    log = log_wait(s, f"{WARNING} allkeys-lru")
    assert f"{WARNING} allkeys-lru" in log
    assert "use noeviction" in log
    assert _risk(c) == 1
    c.config_set("maxmemory-policy", "noeviction")
    assert _risk(c) == 0
    c.config_set("maxmemory-policy", "allkeys-lfu")
    assert _risk(c) == 1
    assert f"{WARNING} allkeys-lfu" in log_wait(s, f"{WARNING} allkeys-lfu")
    c.config_set("maxmemory-policy", "volatile-lru")
    assert _risk(c) == 0
    c.execute_command("CONFIG", "SET", "maxmemory", "0", "maxmemory-policy", "allkeys-random")
    assert _risk(c) == 1
    assert f"{WARNING} allkeys-random" in log_wait(s, f"{WARNING} allkeys-random")
    for p in ("volatile-lfu", "volatile-random", "volatile-ttl", "noeviction"):
        c.config_set("maxmemory-policy", p)
        assert _risk(c) == 0, p
    assert s.log_text().count(WARNING) == 3, "one warning per change to an allkeys-* policy"


def test_eviction_risk_from_noeviction_to_allkeys(server, r):
    try:
        r.config_set("maxmemory-policy", "allkeys-lru")
        assert _risk(r) == 1
        assert f"{WARNING} allkeys-lru" in log_wait(server, f"{WARNING} allkeys-lru")
    finally:
        r.config_set("maxmemory-policy", "noeviction")
    assert _risk(r) == 0


# ---------------------------------------------------------------------------------------
# INFO rmq
# ---------------------------------------------------------------------------------------

FIELDS = ["pushed", "merged", "popped", "acked", "nacked", "expired", "dead", "replayed",
          "cancelled", "group_waits", "rate_limited", "blocked_clients", "sweep_runs",
          "sweep_max_us", "schedule_fired", "schedule_skipped", "schedules", "eviction_risk"]


def _raw_info(c):
    raw = c.execute_command("INFO", "rmq")
    return raw.decode() if isinstance(raw, bytes) else raw


def test_info_rmq_section_fields(server):
    c = raw_client(server)
    text = _raw_info(c)
    lines = [ln for ln in text.splitlines() if ln]
    assert lines[0] == "# rmq"
    names = [ln.split(":", 1)[0] for ln in lines[1:]]
    assert names == ["rmq_" + f for f in FIELDS]
    for ln in lines[1:]:
        assert ln.split(":", 1)[1].isdigit(), ln
    assert "rmq_pushed:" in _raw_info_everything(c)
    assert "# rmq" in c.execute_command("INFO", "modules").decode()


def _raw_info_everything(c):
    raw = c.execute_command("INFO", "everything")
    return raw.decode() if isinstance(raw, bytes) else raw


def test_info_rmq_counters_after_scenario(start_server):
    s = start_server()
    r = s.client()
    started = time.monotonic()
    counters = {f: info_rmq(r)[f] for f in FIELDS}
    assert all(v == 0 for v in counters.values()), counters

    push(r, "q", "PRIORITY", 3, "a")
    push(r, "q", "PRIORITY", 2, "b")
    push(r, "q", "PRIORITY", 1, "c")              # pushed 3
    push(r, "q", "PRIORITY", 1, "c")              # merged 1
    push(r, "q", "PRIORITY", 0, "d")              # pushed 4
    assert pop(r, "q", "COUNT", 3, "LEASE", 600000) == [(b"a", 1), (b"b", 1), (b"c", 1)]
    r.execute_command("RMQ.ACK", "q", "a", "zz")  # acked 1
    assert nack(r, "q", "b") == b"requeued"       # nacked 1
    assert nack(r, "q", "c", "DEAD") == b"dead"   # nacked 2, dead 1
    assert nack(r, "q", "c") is None              # not counted
    r.execute_command("RMQ.EXTEND", "q", "zz", 5)  # nothing counted
    popped, swept, _ = pop_expire_sweep(r, "q")   # pops b (popped 4), expired 1
    assert popped == [(b"b", 2)] and swept == 1
    assert r.execute_command("RMQ.REPLAY", "q") == 1           # replayed 1
    assert r.execute_command("RMQ.CANCEL", "q", "b", "c", "d") == 3   # cancelled 3
    assert r.dbsize() == 0

    runs = info_rmq(r)["sweep_runs"]
    b = BlockedPop(s, "w", "BLOCK", 5000, "LEASE", 30)
    assert wait_blocked(r, 1)
    assert info_rmq(r)["blocked_clients"] == 1
    push(r, "w", "DELAY", 0, "x")                 # pushed 5; served: popped 5
    assert b.finish() == [[b"x", 1]]
    assert wait_until(lambda: info_rmq(r)["blocked_clients"] == 0, timeout=2)
    # the timer rolls x's 30 ms lease back: expired 2
    assert wait_until(lambda: info_rmq(r)["expired"] == 2, timeout=3.0)

    info = info_rmq(r)
    got = {f: info[f] for f in FIELDS}
    assert got["sweep_runs"] > runs
    # The longest timer step began and ended within this test (it started at 0, above).
    assert got["sweep_max_us"] <= (time.monotonic() - started) * 1e6
    got.pop("sweep_runs")
    got.pop("sweep_max_us")
    assert got == {"pushed": 5, "merged": 1, "popped": 5, "acked": 1, "nacked": 2,
                   "expired": 2, "dead": 1, "replayed": 1, "cancelled": 3, "group_waits": 0,
                   "rate_limited": 0, "blocked_clients": 0, "schedule_fired": 0,
                   "schedule_skipped": 0, "schedules": 0, "eviction_risk": 0}
