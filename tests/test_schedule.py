"""RMQ.SCHEDULE (the v3 contract): repeating pushes fired by the server itself.

EVERY and CRON firings (counts, planned times read back from LIST and the queue's scores,
against the server clock), TIMES, END, DEL, SET replacing, every bad input (an error that
changes nothing), missed times while the server is blocked (DEBUG SLEEP) firing once, a
firing waking a blocked consumer, a replica's LIST, a promoted replica going on with the
old primary's planned times neither lost nor doubled, AOF and RDB restarts, and a cluster
slot migration. Cron and zone rules (daylight saving) are unit-tested in
src/core/cron_schedule_tests.rs with fixed instants.
"""

import struct
import threading
import time

import pytest
import redis

from cluster_support import Cluster, migrate_slot
from helpers import expect_error_unchanged, info_rmq, now_ms, rmq_info, start_replica, wait_replica_matches, zs
from server_support import Server, wait_for


def sset(r, q, name, *args):
    return r.execute_command("RMQ.SCHEDULE", q, "SET", name, *args)


def slist(r, q):
    """LIST as {name: (spec, next, fired, last)}, checking the shape and the order."""
    rep = r.execute_command("RMQ.SCHEDULE", q, "LIST")
    names = [e[0] for e in rep]
    assert names == sorted(names), "LIST is by name"
    out = {}
    for e in rep:
        assert len(e) == 5, e
        out[e[0]] = tuple(e[1:])
    return out


def fired_total(r):
    return info_rmq(r).get("schedule_fired", 0)


def test_every_fires_on_its_planned_times(r):
    t0 = now_ms(r)
    first = sset(r, "ev", "tick", "EVERY", 200, "DELAY", 50, "m")
    t1 = now_ms(r)
    assert t0 + 200 <= first <= t1 + 200
    before = fired_total(r)
    time.sleep(1.15)
    spec, nxt, fired, last = slist(r, "ev")[b"tick"]
    assert spec == b"EVERY 200 DELAY 50 MESSAGES m"
    assert 4 <= fired <= 6, fired
    # no drift: every planned time is first + k * 200
    assert last == first + (fired - 1) * 200 and nxt == last + 200
    assert nxt > now_ms(r) - 50
    # DELAY counts from the planned time; latest wins, so the message is due at last + 50
    assert zs(r, "ev") == {b"m": float(last + 50)}
    assert fired_total(r) - before == fired
    assert rmq_info(r, "ev")["schedules"] == 1
    assert info_rmq(r)["schedules"] >= 1


def test_cron_with_seconds_fires_every_second(r):
    first = sset(r, "cr", "s", "CRON", "* * * * * *", "TZ", "Europe/Paris", "PRIORITY", 7, "beat")
    assert first % 1000 == 0 and first > now_ms(r) - 1000
    wait_for(lambda: slist(r, "cr")[b"s"][1] >= first + 3000, timeout=6, what="three firings")
    _spec, nxt, fired, last = slist(r, "cr")[b"s"]
    assert fired == (last - first) // 1000 + 1 and last % 1000 == 0 and nxt == last + 1000
    assert zs(r, "cr") == {b"beat": 7.0}, "a priority firing merges into the waiting message"


def test_times_ends_the_schedule_and_end_bounds_it(r):
    sset(r, "tm", "three", "EVERY", 50, "TIMES", 3, "RANGE", 10, "GROUP", "g", "x")
    t = now_ms(r)
    sset(r, "tm", "bounded", "EVERY", 100, "END", t + 350, "RANGE", 10, "y")
    wait_for(lambda: b"three" not in slist(r, "tm"), timeout=3, what="TIMES 3 to delete the schedule")
    wait_for(lambda: slist(r, "tm")[b"bounded"][1] is None, timeout=3, what="END to stop it")
    _spec, nxt, fired, last = slist(r, "tm")[b"bounded"]
    assert (nxt, fired) == (None, 3) and last <= t + 350
    time.sleep(0.3)
    assert slist(r, "tm")[b"bounded"][2] == 3, "nothing fires after END"
    assert set(zs(r, "tm")) == {b"x", b"y"}


def test_del_and_set_replacing(r):
    sset(r, "dq", "a", "EVERY", 100, "PRIORITY", 1, "m")
    sset(r, "dq", "b", "EVERY", 100, "PRIORITY", 1, "m")
    wait_for(lambda: slist(r, "dq")[b"a"][2] >= 2, timeout=3, what="two firings")
    # replacing counts anew and forgets the old planned times
    first = sset(r, "dq", "a", "EVERY", 60_000, "PRIORITY", 1, "m")
    assert slist(r, "dq")[b"a"] == (b"EVERY 60000 PRIORITY 1 MESSAGES m", first, 0, None)
    time.sleep(0.3)
    assert slist(r, "dq")[b"a"][2] == 0
    assert r.execute_command("RMQ.SCHEDULE", "dq", "DEL", "b", "nope", "b") == 1
    assert list(slist(r, "dq")) == [b"a"]
    assert r.execute_command("RMQ.SCHEDULE", "dq", "DEL", "a") == 1
    assert r.exists("sched{dq}") == 0, "the key goes with its last schedule"
    assert r.execute_command("RMQ.SCHEDULE", "dq", "LIST") == []


def test_a_cron_typo_is_said_in_the_projects_words(r):
    """Which field, which value and what it may be, not the parser library's text."""
    cases = {
        "61 * * * *": "invalid schedule: cron expression '61 * * * *': the minute field '61': "
                      "61 is out of range (0-59)",
        "* * * * MON-FRX": "the day of week field 'MON-FRX': 'FRX' is no day of week (0-7 or SUN-SAT)",
        "*/0 * * * *": "the minute field '*/0': a step of 0 never moves on",
        "0 9 * 13 *": "the month field '13': 13 is out of range (1-12 or JAN-DEC)",
        "@weird": "unknown shortcut (known: @yearly",
    }
    for expr, want in cases.items():
        with pytest.raises(redis.ResponseError) as got:
            r.execute_command("RMQ.SCHEDULE", "typo", "SET", "n", "CRON", expr, "RANGE", 1, "m")
        text = str(got.value)
        assert want in text, text
        assert "Component error" not in text and "CronPattern" not in text and "Pattern" not in text
    assert r.execute_command("RMQ.SCHEDULE", "typo", "LIST") == []


def test_bad_input_is_an_error_that_changes_nothing(r):
    sset(r, "bq", "keep", "EVERY", 60_000, "RANGE", 5, "k")
    r.execute_command("RMQ.PUSH", "bq", "RANGE", 5, "waiting")
    r.set("str", "x")
    now = now_ms(r)
    cases = [
        (["bq", "SET", "n", "CRON", "61 * * * *", "RANGE", 1, "m"], "cron"),
        (["bq", "SET", "n", "CRON", "* * * *", "RANGE", 1, "m"], "fields"),
        (["bq", "SET", "n", "CRON", "* * * * *", "TZ", "Mars/Base", "RANGE", 1, "m"], "zone"),
        (["bq", "SET", "n", "CRON", "0 0 30 2 *", "RANGE", 1, "m"], "never fires"),
        (["bq", "SET", "n", "EVERY", 100, "END", now - 1000, "RANGE", 1, "m"], "never fires"),
        (["bq", "SET", "n", "EVERY", 0, "RANGE", 1, "m"], "EVERY"),
        (["bq", "SET", "n", "EVERY", 2 ** 41 + 1, "RANGE", 1, "m"], "EVERY"),
        (["bq", "SET", "n", "EVERY", 100, "TIMES", 0, "RANGE", 1, "m"], "TIMES"),
        (["bq", "SET", "n", "EVERY", 100, "START", now + 2000, "END", now + 1000, "RANGE", 1, "m"], "START"),
        (["bq", "SET", "n", "EVERY", 100, "RANGE", 1], "message"),
        (["bq", "SET", "n", "EVERY", 100, "RANGE", 1, "GROUP", "g"], "message"),
        (["bq", "SET", "n", "EVERY", 100, "RANGE", 1, ""], "empty"),
        (["bq", "SET", "n", "EVERY", 100, "PRIORITY", 1, "m"], "kind"),
        (["bq", "SET", "n", "EVERY", 100, "AT", now, "m"], "AT"),
        (["bq", "SET", "n", "RANGE", 1, "m"], "EVERY"),
        (["bq", "SET", "n", "EVERY", 100, "CRON", "* * * * *", "RANGE", 1, "m"], "CRON"),
        (["bq", "SET", "", "EVERY", 100, "RANGE", 1, "m"], "name"),
        (["bq", "SET", "n", "EVERY", 100, "RANGE", 1, "m", "extra"], "extra"),
        (["bq", "FROB"], "SET, DEL or LIST"),
        (["bq", "DEL"], "wrong number"),
        (["bq", "LIST", "x"], "x"),
        (["b{q", "LIST"], "queue name"),
        (["str", "SET", "n", "EVERY", 100, "RANGE", 1, "m"], "WRONGTYPE"),
    ]
    for args, word in cases:
        expect_error_unchanged(r, "RMQ.SCHEDULE", *args, contains=word)
    r.set("sched{sq}", "x")
    for args in (["sq", "SET", "n", "EVERY", 100, "RANGE", 1, "m"], ["sq", "DEL", "n"], ["sq", "LIST"]):
        expect_error_unchanged(r, "RMQ.SCHEDULE", *args, contains="WRONGTYPE")
    assert list(slist(r, "bq")) == [b"keep"]


def test_a_failed_push_is_skipped_and_counted(r):
    sset(r, "fq", "p", "EVERY", 100, "PRIORITY", 1, "m")
    # the queue takes another kind before the first firing: firings are skipped, it goes on
    r.execute_command("RMQ.PUSH", "fq", "RANGE", 60_000, "x")
    skipped = info_rmq(r).get("schedule_skipped", 0)
    wait_for(lambda: slist(r, "fq")[b"p"][2] >= 3, timeout=3, what="three firings")
    assert info_rmq(r)["schedule_skipped"] - skipped >= 3
    assert list(zs(r, "fq")) == [b"x"], "nothing was pushed"


def test_out_of_memory_refuses_set_and_skips_firings(r):
    sset(r, "oq", "p", "EVERY", 100, "PRIORITY", 1, "m")
    r.config_set("maxmemory", 1)
    try:
        skipped = info_rmq(r).get("schedule_skipped", 0)
        expect_error_unchanged(r, "RMQ.SCHEDULE", "oq", "SET", "n", "EVERY", 100, "PRIORITY", 1, "m",
                               contains="maxmemory")
        wait_for(lambda: info_rmq(r)["schedule_skipped"] - skipped >= 2, timeout=3,
                 what="firings skipped over maxmemory")
        assert zs(r, "oq") == {}
        # DEL and LIST still work, as consumers' commands do
        assert list(slist(r, "oq")) == [b"p"]
    finally:
        r.config_set("maxmemory", 0)
    wait_for(lambda: zs(r, "oq") == {b"m": 1.0}, timeout=3, what="a firing once memory is back")


def test_an_unreadable_schedule_is_listed_as_broken(r):
    sset(r, "uq", "good", "EVERY", 60_000, "RANGE", 5, "k")
    r.hset("sched{uq}", "junk", b"\x01not a schedule")
    listed = slist(r, "uq")
    assert list(listed) == [b"good", b"junk"]
    assert listed[b"junk"] == (b"broken: invalid schedule: not a stored schedule this version reads", None, None, None)
    assert rmq_info(r, "uq")["schedules"] == 2
    assert sset(r, "uq", "junk", "EVERY", 60_000, "RANGE", 5, "k") > 0
    assert list(slist(r, "uq")) == [b"good", b"junk"]
    assert r.execute_command("RMQ.SCHEDULE", "uq", "DEL", "junk", "good") == 2


NONE = -(2 ** 63)


def stored(nxt, *, fired=0, last=None, start=None, end=None, times=None, every=60_000, cron=None,
           mode=(0, 5), group=None, msg=b"m", text=b"hand-written"):
    """A `sched{Q}` field value in the module's format (core::cron_schedule::Stored::encode):
    version 1; next, fired, last, start, end, times (i64 LE, NONE for none); the timing;
    the mode (0 RANGE, 1 PRIORITY, 2 DELAY, 3 AT) and its value; the group; the message and
    LIST's text (u64 LE length-prefixed)."""
    def blob(b):
        return struct.pack("<Q", len(b)) + b
    opt = [NONE if v is None else v for v in (nxt, fired, last, start, end, times)]
    out = b"\x01" + struct.pack("<6q", *opt)
    out += b"\x00" + struct.pack("<q", every) if cron is None else b"\x01" + blob(cron[0]) + blob(cron[1])
    out += struct.pack("<Bq", *mode) + bytes([group is not None]) + blob(group or b"") + blob(msg) + blob(text)
    return out


def test_hand_written_schedules_are_checked_as_set_checks_them(r):
    """Issue 31: a hand-written or corrupted sched{Q} value was fired as it was found: a
    message pushed at a score of -9.2e18, the AT mode, a firing past END. Now it is checked
    as SET checks its arguments, never fired, and LIST shows it as broken."""
    now = now_ms(r)
    # the control: a good value written by hand fires (the encoding above is the module's)
    r.hset("tmp", "ok", stored(now - 1000, mode=(1, 7), msg=b"good"))
    r.rename("tmp", "sched{hq_ok}")
    wait_for(lambda: zs(r, "hq_ok") == {b"good": 7.0}, timeout=10, what="a good hand-written schedule fired")
    bad = {
        b"delay_min": (stored(now - 1000, mode=(2, -(2 ** 63) + 1)), "DELAY"),
        b"delay_neg": (stored(now - 1000, mode=(2, -5)), "DELAY"),
        b"priority": (stored(now - 1000, mode=(1, -(2 ** 62))), "PRIORITY"),
        b"at": (stored(now - 1000, mode=(3, now)), "AT is not"),
        b"past_end": (stored(now - 1000, end=now - 2000), "planned time"),
        b"every_0": (stored(now - 1000, every=0), "EVERY"),
        b"zone": (stored(now - 1000, cron=(b"* * * * *", b"Nowhere/Land")), "time zone"),
        b"times": (stored(now - 1000, fired=3, times=3), "TIMES"),
        b"empty": (stored(now - 1000, msg=b""), "empty message"),
        b"cut": (stored(now - 1000)[:-3], "not a stored schedule"),
    }
    fired = info_rmq(r).get("schedule_fired", 0)
    r.hset("tmp", mapping={name: v for name, (v, _) in bad.items()})
    r.rename("tmp", "sched{hq}")
    time.sleep(1.5)
    assert not r.exists("hq") and zs(r, "hq") == {}, "nothing fired"
    assert info_rmq(r).get("schedule_fired", 0) == fired
    listed = slist(r, "hq")
    assert set(listed) == set(bad)
    for name, (_, why) in bad.items():
        spec, nxt, nfired, last = listed[name]
        assert spec.startswith(b"broken: ") and why.encode() in spec, (name, spec)
        assert (nxt, nfired, last) == (None, None, None)
    assert rmq_info(r, "hq")["schedules"] == len(bad), "counted, and listed"
    # a broken schedule can be replaced or deleted as any other
    assert sset(r, "hq", "at", "EVERY", 60_000, "RANGE", 5, "k") > 0
    assert slist(r, "hq")[b"at"][0] == b"EVERY 60000 RANGE 5 MESSAGES k"
    assert r.execute_command("RMQ.SCHEDULE", "hq", "DEL", *bad) == len(bad)
    assert not r.exists("sched{hq}")


def test_broken_schedules_stay_unfired_after_a_reload(start_server):
    s = start_server(extra_conf=["--enable-debug-command", "yes"])
    r = s.client()
    now = now_ms(r)
    r.hset("sched{rq}", mapping={"delay": stored(now + 300, mode=(2, -(2 ** 62))),
                                  "at": stored(now + 300, mode=(3, now))})
    r.execute_command("DEBUG", "RELOAD")
    time.sleep(1.5)
    assert not r.exists("rq") and info_rmq(r).get("schedule_fired", 0) == 0
    assert info_rmq(r)["schedules"] == 0, "the timer holds no broken schedule"
    assert all(v[0].startswith(b"broken: ") for v in slist(r, "rq").values())


def test_missed_times_fire_once_after_a_blocked_server(start_server):
    r = start_server(extra_conf=["--enable-debug-command", "yes"]).client()
    sset(r, "ms", "t", "EVERY", 250, "PRIORITY", 1, "m")
    wait_for(lambda: slist(r, "ms")[b"t"][2] >= 1, timeout=3, what="a first firing")
    _s, _n, fired0, last0 = slist(r, "ms")[b"t"]
    r.execute_command("DEBUG", "SLEEP", 2)  # about 8 planned times pass
    time.sleep(0.1)
    _s, nxt, fired, last = slist(r, "ms")[b"t"]
    t = now_ms(r)
    assert 1 <= fired - fired0 <= 2, f"{fired - fired0} firings for the missed times"
    assert (last - last0) % 250 == 0 and (nxt - last0) % 250 == 0
    assert last < t < nxt + 50, "then it goes on from the next future time"
    assert nxt - last0 >= 2000


def test_a_firing_wakes_a_blocked_consumer(server, r):
    c = server.client()
    got = {}
    th = threading.Thread(target=lambda: got.update(v=c.execute_command("RMQ.POP", "wq", "BLOCK", 5000)))
    th.start()
    time.sleep(0.1)
    t0 = time.monotonic()
    sset(r, "wq", "w", "EVERY", 300, "PRIORITY", 1, "job")
    th.join(6)
    assert got["v"] == [[b"job", 1]]
    assert time.monotonic() - t0 < 1.5


def test_schedule_keys_moved_by_hand_fire_where_they_arrive(start_server):
    s = start_server(extra_conf=["--enable-debug-command", "yes"])
    r = s.client()
    r1 = s.client(db=1)
    sset(r, "ra", "x", "EVERY", 100, "PRIORITY", 1, "m")
    sset(r, "mv", "x", "EVERY", 100, "PRIORITY", 1, "m")
    sset(r, "cp", "x", "EVERY", 100, "PRIORITY", 1, "m")
    assert r.rename("sched{ra}", "sched{rb}")
    assert r.move("sched{mv}", 1)
    assert r.copy("sched{cp}", "sched{cq}")
    wait_for(lambda: zs(r, "rb") and zs(r1, "mv") and zs(r, "cp") and zs(r, "cq"), timeout=3,
             what="firings where the keys went")
    assert not r.exists("ra", "mv")
    # the index is rebuilt after SWAPDB, DEBUG RELOAD and FLUSHALL
    r.execute_command("SWAPDB", 0, 1)
    r.delete("mv")
    wait_for(lambda: zs(r, "mv"), timeout=3, what="a firing after SWAPDB")
    r.execute_command("DEBUG", "RELOAD")
    f = slist(r, "mv")[b"x"][2]
    wait_for(lambda: slist(r, "mv")[b"x"][2] > f, timeout=3, what="a firing after DEBUG RELOAD")
    assert info_rmq(r)["schedules"] == 4
    r.flushall()
    assert info_rmq(r)["schedules"] == 0
    time.sleep(0.3)
    assert r.dbsize() == 0 and r1.dbsize() == 0


def test_replica_lists_the_same_and_fires_nothing(start_server):
    p = start_server()
    rep = start_replica(start_server, p)
    pc, rc = p.client(), rep.client()
    t = now_ms(pc)
    sset(pc, "rq", "a", "EVERY", 100, "END", t + 450, "PRIORITY", 1, "m")
    sset(pc, "rq", "c", "CRON", "0 0 * * *", "TZ", "America/New_York", "RANGE", 5, "n")
    wait_for(lambda: slist(pc, "rq")[b"a"][1] is None, timeout=3, what="the schedule to end")
    assert wait_replica_matches(pc, rc)
    assert slist(rc, "rq") == slist(pc, "rq")
    assert slist(rc, "rq")[b"a"][2] == 4
    with pytest.raises(redis.ResponseError, match="(?i)read ?only"):
        sset(rc, "rq", "x", "EVERY", 100, "RANGE", 1, "m")
    assert info_rmq(rc).get("schedules") == 0 and info_rmq(rc).get("schedule_fired") == 0


def test_promoted_replica_goes_on_without_losing_or_doubling_a_time(start_server):
    p = start_server()
    rep = start_replica(start_server, p)
    pc, rc = p.client(), rep.client()
    every = 1000
    sset(pc, "pq", "a", "EVERY", every, "PRIORITY", 1, "m")
    # just after a firing has reached the replica, stop the primary and promote
    wait_for(lambda: (slist(rc, "pq").get(b"a") or (0, 0, 0))[2] >= 2, timeout=6, what="firings on the replica")
    f0 = slist(rc, "pq")[b"a"][2]
    wait_for(lambda: slist(rc, "pq")[b"a"][2] > f0, timeout=3, what="the next firing on the replica")
    p.kill9()
    _s, nxt0, fired0, last0 = slist(rc, "pq")[b"a"]
    assert rc.execute_command("REPLICAOF", "NO", "ONE") in (b"OK", True)
    wait_for(lambda: slist(rc, "pq")[b"a"][2] >= fired0 + 2, timeout=5, what="the promoted replica to fire")
    _s, nxt, fired, last = slist(rc, "pq")[b"a"]
    assert nxt0 == last0 + every
    # one firing per planned time: none fired twice (the old primary's last one is not
    # fired again) and none lost
    assert fired - fired0 == (last - last0) // every
    assert info_rmq(rc)["schedule_fired"] == fired - fired0


@pytest.mark.parametrize("mode", ["aof", "rdb"])
def test_schedules_survive_a_restart(mode):
    conf = ["--appendonly", "yes"] if mode == "aof" else []
    s = Server(conf=conf, tag="rmq-sched").start()
    try:
        c = s.client()
        sset(c, "pq", "a", "EVERY", 200, "PRIORITY", 1, "m")
        sset(c, "pq", "b", "CRON", "0 9 * * MON", "TZ", "Asia/Tokyo", "DELAY", 5, "w")
        wait_for(lambda: slist(c, "pq")[b"a"][2] >= 2, timeout=3, what="firings")
        if mode == "rdb":
            assert c.save()
        else:
            time.sleep(1.1)  # appendfsync everysec
        before = slist(c, "pq")
        s.restart(graceful=mode == "rdb")
        c = s.client()
        after = slist(c, "pq")
        assert after[b"b"] == before[b"b"]
        assert after[b"a"][0] == before[b"a"][0] and after[b"a"][2] >= before[b"a"][2]
        f = after[b"a"][2]
        wait_for(lambda: slist(c, "pq")[b"a"][2] >= f + 2, timeout=3, what="firings after the restart")
        assert info_rmq(c)["schedules"] == 2
    finally:
        s.stop()


def test_cluster_slot_migration_keeps_firing_on_the_new_owner():
    cl = Cluster(masters=3, replicas=0, tag="rmq-sched-cluster").start()
    try:
        q = "sched:moving"
        slot = cl.keyslot(q)
        src = cl.owner_of_slot(slot)
        dst = next(p for p, _id, _r in cl.primaries() if p is not src)
        sc = src.conn()
        sset(sc, q, "a", "EVERY", 100, "PRIORITY", 1, "m")
        wait_for(lambda: slist(sc, q)[b"a"][2] >= 2, timeout=3, what="firings on the first owner")
        moved = migrate_slot(cl, slot, src, dst)
        assert b"sched{" + q.encode() + b"}" in moved
        dc = dst.conn()
        f = slist(dc, q)[b"a"][2]
        wait_for(lambda: slist(dc, q)[b"a"][2] >= f + 3, timeout=3, what="firings on the new owner")
        assert zs(dc, q) == {b"m": 1.0}
        wait_for(lambda: info_rmq(sc)["schedules"] == 0, timeout=3, what="the old owner to drop it")
        assert sc.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    finally:
        cl.stop()
