"""Memory goes back after churn (issue 31 item 6): the module's process-wide tables (groups
in flight, topics' busy queues, lease and due-time index, blocked consumers, rate-limit
buckets, per-queue counters) give their peak capacity back once the queues are gone.

20,000 queues (topic slots, so the topic index is used, pushed with a GROUP, so the
in-flight group sets are too) are created and consumed away four times, pipelined, with
short leases so the lease index empties at once; no key is left. used_memory must come
back to within SLACK of where it started. SLACK covers what is bounded on purpose and
independent of the churn's size: the key-name cache (`storage::keys`, at most 4,096 queues'
derived names and headers, about 3 MB when full) and allocator rounding. On the build
before the tables shrank, the same churn left about 7 MB over the start (and 30 MB more
with the default `stats-queues`)."""

from helpers import wait_until

QUEUES = 20_000
ROUNDS = 4
MB = 1 << 20
SLACK = 5 * MB


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
