"""RMQ.PUSH's SEQUENCE and DEDUP options (the v4 contract, for rmq-gateway's FIFO queues).

Replies per message, stored contents and scores, the keys `seq{Q}`, `dedup{Q}` and
`dedupexp{Q}` with their values and expiry (read against the server's clock), windows
ending, pruning, every error (changing nothing), WRONGTYPE, replication to a replica,
RMQ.QUEUES listing them and plain pushes unchanged.
"""

from helpers import expect_error_unchanged, now_ms, start_replica, wait_replica_matches, zs
from server_support import wait_for

WINDOW = 300000


def push(r, *args):
    return r.execute_command("RMQ.PUSH", *args)


def test_sequence_numbers_contents_in_push_order(r):
    assert push(r, "q", "DELAY", 0, "SEQUENCE", "gw1 ", "a", "b") == [[b"added", 1, None], [b"added", 2, None]]
    assert push(r, "q", "DELAY", 0, "SEQUENCE", "gw1 ", "a") == [[b"added", 3, None]]
    assert r.get("seq{q}") == b"3"
    members = [m for m, _ in r.zrange("q", 0, -1, withscores=True)]
    assert members == [b"gw1 00000000000000000001 a", b"gw1 00000000000000000002 b", b"gw1 00000000000000000003 a"]
    # Same content, new number: two messages, popped in push order.
    got = r.execute_command("RMQ.POP", "q", "COUNT", 3)
    assert [e[0] for e in got] == members
    # The sequence outlives the queue emptying; INCR by hand is honoured.
    r.execute_command("RMQ.ACK", "q", *members)
    assert r.get("seq{q}") == b"3" and r.exists("q", "meta{q}", "prepare{q}") == 0
    r.incrby("seq{q}", 10)
    assert push(r, "q", "DELAY", 0, "SEQUENCE", "", "x") == [[b"added", 14, None]]
    assert r.zrange("q", 0, -1) == [b"00000000000000000014 x"]


def test_dedup_window_answers_duplicates_with_the_first_push(r):
    t0 = now_ms(r)
    first = push(r, "f", "DELAY", 0, "GROUP", "g", "SEQUENCE", "p ", "DEDUP", "id-1", WINDOW, "NOTE", "msg-A", "body")
    t1 = now_ms(r)
    assert first == [[b"added", 1, None]]
    rec = r.hget("dedup{f}", "id-1").split(b" ", 3)
    assert t0 + WINDOW <= int(rec[0]) <= t1 + WINDOW and rec[1:] == [b"1", b"1", b"msg-A"]
    assert r.zscore("dedupexp{f}", "id-1") == int(rec[0])
    for k in ("dedup{f}", "dedupexp{f}"):
        assert r.pexpiretime(k) == int(rec[0])
    # A duplicate: nothing pushed, nothing numbered, the first push's number and note.
    dup = push(r, "f", "DELAY", 0, "GROUP", "g", "SEQUENCE", "p ", "DEDUP", "id-1", WINDOW, "NOTE", "msg-B", "body")
    assert dup == [[b"duplicate", 1, b"msg-A"]]
    assert list(zs(r, "f")) == [b"p 00000000000000000001 body"]
    assert r.get("seq{f}") == b"1"
    # Even once the first copy is consumed.
    m = r.execute_command("RMQ.POP", "f")[0][0]
    r.execute_command("RMQ.ACK", "f", m)
    assert push(r, "f", "DELAY", 0, "SEQUENCE", "p ", "DEDUP", "id-1", 5, "other") == [[b"duplicate", 1, b"msg-A"]]
    # Another id is new; a push of two numbers both and records both.
    assert push(r, "f", "DELAY", 0, "SEQUENCE", "p ", "DEDUP", "id-2", WINDOW, "x", "y") == [[b"added", 2, None], [b"added", 3, None]]
    # Its duplicate names each message's number; a longer duplicate has none for the rest.
    assert push(r, "f", "DELAY", 0, "SEQUENCE", "p ", "DEDUP", "id-2", WINDOW, "x", "y", "z") == [
        [b"duplicate", 2, None], [b"duplicate", 3, None], [b"duplicate", None, None]]


def test_dedup_without_sequence_merges_and_says_so(r):
    assert push(r, "d", "PRIORITY", 5, "DEDUP", "a", WINDOW, "m", "m") == [[b"added", None, None], [b"merged", None, None]]
    assert push(r, "d", "PRIORITY", 7, "DEDUP", "b", WINDOW, "m") == [[b"merged", None, None]]
    assert zs(r, "d") == {b"m": 7.0}
    assert r.exists("seq{d}") == 0
    assert push(r, "d", "PRIORITY", 9, "DEDUP", "a", WINDOW, "m") == [[b"duplicate", None, None]]
    assert zs(r, "d") == {b"m": 7.0}, "a duplicate changes nothing"


def test_window_ends_and_ended_records_are_pruned(r):
    t0 = now_ms(r)
    for i in range(20):
        push(r, "w", "DELAY", 0, "DEDUP", f"old{i}", 300, f"m{i}")
    push(r, "w", "DELAY", 0, "DEDUP", "long", WINDOW, "keep")
    assert r.hlen("dedup{w}") == 21
    # The key lives as long as the longest window.
    assert r.pexpiretime("dedup{w}") >= t0 + WINDOW
    wait_for(lambda: now_ms(r) > t0 + 2000, timeout=30, what="windows end")
    # Ended: the id is new again.
    assert push(r, "w", "DELAY", 0, "DEDUP", "old0", 300, "again") == [[b"added", None, None]]
    # That push pruned 16 ended records (old0 among them or not) and wrote old0's anew.
    assert r.hlen("dedup{w}") in (5, 6)
    assert r.zcard("dedupexp{w}") == r.hlen("dedup{w}")
    push(r, "w", "DELAY", 0, "DEDUP", "next", 300, "n")
    assert set(r.hkeys("dedup{w}")) == {b"long", b"old0", b"next"}
    assert r.zrange("dedupexp{w}", 0, -1)[-1] == b"long"


def test_dedup_keys_expire_with_their_last_window(r):
    push(r, "e", "DELAY", 0, "DEDUP", "x", 200, "m")
    assert 0 < r.pttl("dedup{e}") <= 200
    wait_for(lambda: r.exists("dedup{e}", "dedupexp{e}") == 0, timeout=30, what="dedup keys expire")
    assert push(r, "e", "DELAY", 0, "DEDUP", "x", 200, "m") == [[b"merged", None, None]]


def test_errors_change_nothing(r):
    push(r, "k", "PRIORITY", 1, "SEQUENCE", "p", "DEDUP", "i", WINDOW, "m")
    cases = [
        (("k", "PRIORITY", 1, "DEDUP", "i2", 0, "m"), "invalid DEDUP"),
        (("k", "PRIORITY", 1, "DEDUP", "i2", "x", "m"), "invalid DEDUP"),
        (("k", "PRIORITY", 1, "DEDUP", "i2", 2 ** 41 + 1, "m"), "invalid DEDUP"),
        (("k", "PRIORITY", 1, "DEDUP", "", 5, "m"), "invalid DEDUP id"),
        (("k", "PRIORITY", 1, "DEDUP", "i" * 1025, 5, "m"), "invalid DEDUP id"),
        (("k", "PRIORITY", 1, "DEDUP", "i2", 5, "NOTE", "n" * 1025, "m"), "invalid NOTE"),
        (("k", "PRIORITY", 1, "SEQUENCE", "p" * 1025, "m"), "invalid SEQUENCE"),
        # The push itself fails: no number used, no record kept.
        (("k", "RANGE", 5, "SEQUENCE", "p", "DEDUP", "i2", 5, "m"), "kind mismatch"),
        (("k", "PRIORITY", 1, "SEQUENCE", "p", "DEDUP", "i2", 5, "m", ""), "empty message"),
    ]
    for args, words in cases:
        expect_error_unchanged(r, "RMQ.PUSH", *args, contains=[words])
    r.config_set("rmq.max-message-bytes", 25)
    try:
        # The numbered content counts: "p" + 20 digits + " " + 4 bytes = 26.
        expect_error_unchanged(r, "RMQ.PUSH", "k", "PRIORITY", 1, "SEQUENCE", "p", "abcd", contains=["max-message-bytes"])
    finally:
        r.config_set("rmq.max-message-bytes", 1048576)
    r.set("seq{k}", "not a number")
    expect_error_unchanged(r, "RMQ.PUSH", "k", "PRIORITY", 1, "SEQUENCE", "p", "m", contains=["push sequence"])
    r.set("seq{k}", str(2 ** 64 - 1))
    expect_error_unchanged(r, "RMQ.PUSH", "k", "PRIORITY", 1, "SEQUENCE", "p", "m", contains=["push sequence"])
    r.delete("seq{k}")


def test_wrongtype(r):
    for key, q in (("seq{a}", "a"), ("dedup{b}", "b"), ("dedupexp{c}", "c")):
        r.lpush(key, "x")
        expect_error_unchanged(r, "RMQ.PUSH", q, "DELAY", 0, "SEQUENCE", "p", "DEDUP", "i", 5, "m", contains=["WRONGTYPE"])
    # A plain push does not look at them.
    assert push(r, "a", "DELAY", 0, "m") == 1


def test_option_words_are_messages_without_enough_arguments(r):
    assert push(r, "o", "DELAY", 0, "SEQUENCE", "m") == 2
    assert push(r, "o2", "DELAY", 0, "DEDUP", "i", 5) == 3
    assert r.zcard("o2") == 3 and r.exists("dedup{o2}") == 0


def test_queues_lists_a_queue_with_only_these_keys(r):
    push(r, "only", "DELAY", 0, "SEQUENCE", "", "DEDUP", "i", WINDOW, "m")
    got = r.execute_command("RMQ.POP", "only")[0][0]
    r.execute_command("RMQ.ACK", "only", got)
    assert r.exists("only", "meta{only}") == 0
    assert r.execute_command("RMQ.QUEUES", "MATCH", "only") == [b"0", [b"only"]]
    r.delete("seq{only}", "dedup{only}", "dedupexp{only}")
    assert r.execute_command("RMQ.QUEUES", "MATCH", "only") == [b"0", []]


def test_replicates(start_server):
    primary = start_server()
    replica = start_replica(start_server, primary)
    p, rc = primary.client(), replica.client()
    push(p, "rq", "DELAY", 0, "GROUP", "g", "SEQUENCE", "p ", "DEDUP", "a", 300, "NOTE", "n", "m1")
    push(p, "rq", "DELAY", 0, "SEQUENCE", "p ", "DEDUP", "b", WINDOW, "m2")
    assert wait_replica_matches(p, rc, timeout=10)
    assert rc.pexpiretime("dedup{rq}") == p.pexpiretime("dedup{rq}") and p.pexpiretime("dedup{rq}") > 0
    a_ends = int(p.hget("dedup{rq}", "a").split(b" ")[0])
    wait_for(lambda: now_ms(p) > a_ends, timeout=30, what="a's window ends")
    # Pruned on the primary: the replica follows.
    push(p, "rq", "DELAY", 0, "SEQUENCE", "p ", "DEDUP", "c", WINDOW, "m3")
    assert not p.hexists("dedup{rq}", "a")
    assert wait_replica_matches(p, rc, timeout=10)
    assert rc.get("seq{rq}") == b"3"
    # A promoted replica keeps deduplicating.
    rc.replicaof("NO", "ONE")
    assert push(rc, "rq", "DELAY", 0, "SEQUENCE", "p ", "DEDUP", "b", WINDOW, "x") == [[b"duplicate", 2, None]]


def test_deleting_the_queue_by_hand_takes_them_along(r):
    push(r, "gone", "DELAY", 0, "SEQUENCE", "p", "DEDUP", "i", WINDOW, "m")
    push(r, "kept", "DELAY", 0, "SEQUENCE", "p", "DEDUP", "i", WINDOW, "m")
    r.execute_command("RMQ.POLICY", "kept", "SET", "retries", 3)
    r.delete("gone", "kept")
    wait_for(lambda: r.exists("seq{gone}", "dedup{gone}", "dedupexp{gone}", "meta{gone}") == 0,
             timeout=30, what="the queue's other keys go")
    assert r.execute_command("RMQ.QUEUES", "MATCH", "gone") == [b"0", []]
    # A queue with a policy keeps them, as it keeps the policy.
    assert r.exists("seq{kept}", "dedup{kept}", "dedupexp{kept}") == 3


def test_records_become_a_hashtable_and_a_skiplist_as_they_grow(r):
    """Each push looks an id up: past 16 records they are no listpacks (linear scans)."""
    for i in range(15):
        push(r, "big", "DELAY", 0, "DEDUP", f"id{i}", WINDOW, f"m{i}")
    assert r.object("encoding", "dedup{big}") == b"listpack"
    push(r, "big", "DELAY", 0, "DEDUP", "id15", WINDOW, "m15")
    assert (r.object("encoding", "dedup{big}"), r.object("encoding", "dedupexp{big}")) == (b"hashtable", b"skiplist")
    assert r.hlen("dedup{big}") == r.zcard("dedupexp{big}") == 16


def test_sequence_ends_at_2_63_minus_1(r):
    # The last number is answered as an integer; a push that would pass it is refused whole.
    r.set("seq{end}", 2 ** 63 - 3)
    assert push(r, "end", "DELAY", 0, "SEQUENCE", "", "a", "b") == [[b"added", 2 ** 63 - 2, None],
                                                                   [b"added", 2 ** 63 - 1, None]]
    before = (r.get("seq{end}"), r.zrange("end", 0, -1))
    assert before[0] == str(2 ** 63 - 1).encode()
    for n in (1, 2):
        expect_error_unchanged(r, "RMQ.PUSH", "end", "DELAY", 0, "SEQUENCE", "", *["m"] * n,
                               contains="2^63 - 1")
    r.set("seq{big}", 2 ** 63)
    expect_error_unchanged(r, "RMQ.PUSH", "big", "DELAY", 0, "SEQUENCE", "", "m", contains="2^63 - 1")
    assert (r.get("seq{end}"), r.zrange("end", 0, -1)) == before
