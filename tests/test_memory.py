"""Memory goes back after churn (issue 31 item 6): the module's process-wide tables (groups
in flight, topics' busy queues, lease and due-time index, blocked consumers, rate-limit
buckets, per-queue counters) give their peak capacity back once the queues are gone.

20,000 queues (topic slots, so the topic index is used, pushed with a GROUP, so the
in-flight group sets are too) are created and consumed away four times, pipelined, with
short leases so the lease index empties at once; no key is left. used_memory must come
back to within SLACK of where it started. SLACK covers what is bounded on purpose and
independent of the churn's size: the key-name cache (`storage::keys`, at most 4,096 queues'
derived names and headers, about 3 MB when full) and allocator rounding. On the build
before the tables shrank, the same churn left about 7 MB over the start.

Per-queue counters (RMQ.INFO) outlive their queues by the contract, for up to `stats-queues`
queues (default 100,000): that memory stays by design, so it is made small (about 120
bytes a queue, at most PER_COUNTED here with the slab's room to grow), and it goes when
`stats-queues` is lowered. On the build before, 80,000 counted queues held about 28 MB."""

from helpers import wait_until

QUEUES = 20_000
ROUNDS = 4
MB = 1 << 20
SLACK = 5 * MB
PER_COUNTED = 200


def used(c):
    return c.info("memory")["used_memory"]


def churn(c, rounds=ROUNDS, n=QUEUES):
    for rnd in range(rounds):
        pl = c.pipeline(transaction=False)
        for i in range(n):
            pl.execute_command("RMQ.PUSH", f"t{rnd}:{i}_0", "PRIORITY", 1, "GROUP", "g", "m")
        assert sum(pl.execute()) == n
        pl = c.pipeline(transaction=False)
        for i in range(n):
            pl.execute_command("RMQ.TPOP", f"t{rnd}:{i}", 1, "LEASE", 50)
            pl.execute_command("RMQ.ACK", f"t{rnd}:{i}_0", "m")
        got = pl.execute()
        assert got[1::2] == [1] * n, "every message taken and acked"
        assert c.dbsize() == 0, "no key left"


def test_tables_shrink_after_churn(start_server):
    c = start_server(module_args=["stats-queues", 0]).client()
    start = used(c)
    churn(c)
    # the lease index empties as the (already acked) leases' times pass
    assert wait_until(lambda: used(c) - start <= SLACK, timeout=20, interval=0.2), \
        f"{(used(c) - start) / MB:.1f} MB more than before the churn, no key left"


def test_counters_of_gone_queues_cost_little_and_go_when_the_setting_is_lowered(start_server):
    c = start_server().client()
    start = used(c)
    churn(c)
    counted = ROUNDS * QUEUES
    assert c.execute_command("RMQ.INFO", "t0:0_0")[-1] is not None, "counters survive the queue"
    assert wait_until(lambda: used(c) - start <= SLACK + counted * PER_COUNTED, timeout=20, interval=0.2), \
        f"{(used(c) - start) / counted:.0f} bytes a counted queue, no key left"
    c.config_set("rmq.stats-queues", 0)
    info = dict(zip(*[iter(c.execute_command("RMQ.INFO", "t0:0_0"))] * 2))
    assert info[b"pushed"] is None, "no longer counted"
    assert wait_until(lambda: used(c) - start <= SLACK, timeout=20, interval=0.2), \
        f"{(used(c) - start) / MB:.1f} MB more than before the churn with no queue counted"


def purged_used(c):
    """used_memory once the allocator has given back what it can (jemalloc's MEMORY PURGE;
    elsewhere the command answers OK and changes nothing)."""
    c.execute_command("MEMORY", "PURGE")
    return used(c)


def test_names_used_once_and_emptied_leave_nothing(start_server):
    """No memory for a queue without keys: with `stats-queues 0`, 50,000 distinct names
    pushed, popped (grouped, named, by TPOP, with the default 30 s lease) and acked until no
    key is left cost at most 1 MB. On the build before, their lease entries (kept until the
    acked leases' deadlines) and derived key names held about 11 MB."""
    c = start_server(module_args=["stats-queues", 0]).client()
    n = 50_000
    start = purged_used(c)
    pl = c.pipeline(transaction=False)
    for i in range(n):
        q = f"once:{i}"
        if i % 4 == 0:
            pl.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "GROUP", "g", "MESSAGES", "m")
        elif i % 4 == 1:
            pl.execute_command("RMQ.PUSH", q, "DELAY", 0, "MESSAGES", "m")
        elif i % 4 == 2:
            pl.execute_command("RMQ.PUSH", q + "_0", "PRIORITY", 1, "MESSAGES", "m")
        else:
            pl.execute_command("RMQ.PUSH", q, "DELAY", 0, "GROUP", "g", "MESSAGES", "m")
    assert pl.execute() == [1] * n
    pl = c.pipeline(transaction=False)
    for i in range(n):
        q = f"once:{i}"
        if i % 4 == 0:
            pl.execute_command("RMQ.POP", q, "IDS")
        elif i % 4 == 2:
            pl.execute_command("RMQ.TPOP", q, 1)
        else:
            pl.execute_command("RMQ.POP", q)
    got = pl.execute()
    pl = c.pipeline(transaction=False)
    for i, entries in enumerate(got):
        q = f"once:{i}"
        if i % 4 == 0:
            pl.execute_command("RMQ.ACKID", q, entries[0][2])
        elif i % 4 == 2:
            pl.execute_command("RMQ.ACK", q + "_0", "m")
        else:
            pl.execute_command("RMQ.ACK", q, "m")
    assert pl.execute() == [1] * n, "every message taken and acked"
    assert c.dbsize() == 0, "no key left"
    assert c.execute_command("RMQ.QUEUES") == [b"0", []]
    # Redis gives back its own share in its cron (the keyspace's hash table shrinks once
    # empty; the client's query and reply buffers once idle): seen 1.31 MB over on a loaded
    # machine when read at once, so the module's share is judged after that.
    assert wait_until(lambda: purged_used(c) - start <= MB, timeout=30, interval=0.5), \
        f"{(purged_used(c) - start) / MB:.2f} MB more than before {n} names were used and emptied"

