"""The benchmarks' own helpers (bench/harness): the callgrind meter, the stats, the report
writer. make test runs this file beside tests/ (the server harness is tested in
tests/test_harness.py)."""

import shutil

import pytest

import harness
import server_support  # noqa: E402  (harness put tests/ on sys.path)
from harness.callgrind import Callgrind


@pytest.mark.skipif(shutil.which("callgrind_control") is None, reason="valgrind not installed")
def test_callgrind_counts_grow_with_the_work():
    s = harness.Server(module=None, tag="rmq-harness")
    meter = Callgrind(s)
    s.start()
    try:
        c = s.client()
        _, few = meter.around(lambda: [c.set(f"k{i}", "v") for i in range(10)], ["call"])
        _, many = meter.around(lambda: [c.set(f"k{i}", "v") for i in range(2000)], ["call"])
        # 200 times the SETs: well over ten times the server's instructions, whatever the
        # event loop and the cron added meanwhile.
        assert 0 < few["total"] and many["total"] > 10 * few["total"]
        # Function counts need the binary's symbols (some servers of the matrix are
        # stripped: then call() is not found and counts 0).
        if few["call"]:
            assert few["call"] < few["total"] and many["call"] > 20 * few["call"]
        assert not list(meter.dir.glob("cg.*.out.*")), "count() removes its dumps"
    finally:
        s.stop()


def test_callgrind_release_runs_the_server_plain_again():
    s = harness.Server(module=None, tag="rmq-harness")
    meter = Callgrind(s)
    assert s.wrapper[0] == "valgrind" and s.start_timeout >= 120 and "LD_PRELOAD" in s.env
    meter.release()
    assert s.wrapper == [] and s.start_timeout == server_support.START_TIMEOUT and s.env == {}


@pytest.mark.skipif(shutil.which("callgrind_control") is None, reason="valgrind not installed")
def test_callgrind_servers_given_the_same_commands_count_the_same():
    # Sorted sets of one score: each insert walks the skiplist by member, so its levels
    # (random() at each insert) and the keys' dict (its hash seed) move the count by
    # several percent from one start to the next unless the meter fixes the seeds.
    counts = []
    for _ in range(2):
        s = harness.Server(module=None, tag="rmq-harness")
        meter = Callgrind(s)
        s.start()
        try:
            c = s.client()
            # (Past 128 members the set is a skiplist.)
            _, d = meter.around(lambda: [c.zadd("z", {f"member-{i:08}": 1}) for i in range(3000)], ["call"])
            counts.append(d["call"])
        finally:
            s.stop()
    if counts[0]:
        assert abs(counts[0] - counts[1]) <= counts[0] * 0.001, counts


def test_median_and_spread_leave_out_missing_rounds():
    assert harness.median([3, None, 1, 2]) == 2
    assert harness.median([None]) is None
    assert harness.spread([1, 2, 3]) == 1.0
    assert harness.spread([5]) == 0.0
    assert harness.spread([0, 0]) == 0.0


def test_write_report_makes_the_folder_and_ends_in_one_newline(tmp_path):
    out = harness.write_report(tmp_path / "a" / "r.md", "# title\n\n")
    assert out.read_text() == "# title\n"
    assert harness.RESULTS == harness.REPO / "bench" / "results"
