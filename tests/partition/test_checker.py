"""The partition checker's rules on hand-made histories (no namespaces needed)."""

from checker import check


def push(m, t, ok=True, err=None, q="q"):
    return {"ev": "push", "m": m, "t0": t - 1, "t1": t, "ok": ok, "err": err, "q": q}


def deliver(m, t, n=1, popped=None):
    return {"ev": "deliver", "m": m, "t": t, "n": n,
            "popped": t - 0.5 if popped is None else popped}


def ack(m, t, confirmed=True, ok=True, popped=None):
    return {"ev": "ack", "m": m, "t0": t - 1, "t1": t, "ok": ok, "confirmed": confirmed,
            "popped": t - 2 if popped is None else popped}


FINAL = {"ev": "final", "store": ["waiting"], "prepare": ["inflight"], "dead": ["dead"]}


def test_lost_is_acknowledged_and_nowhere():
    r = check([push("got", 1), deliver("got", 2), push("waiting", 1), push("inflight", 1),
               push("dead", 1), push("gone", 1), push("never-acked", 1, ok=False, err="X"),
               FINAL])
    assert (r["acknowledged"], r["lost"], r["lost_sample"]) == (5, 1, ["gone"])
    assert r["finals"] == 1


def test_after_ack_counts_confirmed_acks_of_copies_no_push_may_have_remade():
    r = check([
        push("a", 1), deliver("a", 2), ack("a", 4), deliver("a", 6, n=2),          # counted
        push("b", 1), deliver("b", 2), ack("b", 4, confirmed=False), deliver("b", 6),
        push("c", 1), deliver("c", 2), ack("c", 4, ok=False), deliver("c", 6),
        # pushed again after its POP was sent (in flight, so a new copy): re-pushed
        push("d", 1), deliver("d", 2), push("d", 2.5), ack("d", 4, popped=1.5), deliver("d", 6),
        # a push of unknown outcome can land any time later: re-pushed
        push("e", 0.5, ok=False, err="ConnectionError"), push("e", 1), deliver("e", 2),
        ack("e", 4), deliver("e", 6),
        FINAL])
    assert (r["after_ack"], r["after_ack_repushed"]) == (1, 2)
    assert r["duplicates"] == 5 and r["delivered"] == 5


def test_recovery_is_the_first_acknowledged_push_after_each_heal():
    r = check([push("a", 1), push("b", 5), push("c", 9)], heals=[2, 6, 10])
    assert r["recovery_s"] == [3, 3, None]


def test_after_ack_is_a_pop_sent_after_the_ack_was_confirmed():
    """A POP in flight while the ACK ran (sent before it was confirmed, answered after, as
    when the acker's lease ran out first) may return the message: not counted."""
    r = check([push("a", 1), deliver("a", 2), ack("a", 5), deliver("a", 6, popped=4.9),
               push("b", 1), deliver("b", 2), ack("b", 5), deliver("b", 6, popped=5.1),
               FINAL])
    assert (r["after_ack"], r["after_ack_repushed"]) == (1, 0)


def test_recovery_waits_for_every_queue_to_take_pushes_again():
    # queue y (a faulted shard) takes a push 4 s after the first heal, x all along
    r = check([push("a", 1, q="x"), push("b", 3, q="x"), push("c", 6, q="y"),
               push("d", 1, q="y"), push("e", 8, q="x")], heals=[2, 7])
    assert r["recovery_s"] == [4, None]
