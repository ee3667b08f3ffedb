"""The dashboard's pure parts, without a server: showing bytes, the security rules, the
queue list's sorting, filtering and paging, and rates from counter deltas."""

from __future__ import annotations

import base64
import gzip
import time

import pytest

from rmq.dashboard import security, text
from rmq.dashboard.sampler import Sampler, matches, natural_key, row
from rmq.dashboard.source import QueueRow, Snapshot, info_dict, journal_entry, name_str


def test_show_escapes_what_is_not_plain_text() -> None:
    assert text.show(b"caf\xc3\xa9") == "café" and text.is_plain(b"caf\xc3\xa9")
    assert text.show(b"a\xffb\x00c\x1b") == "a\\xffb\\x00c\\x1b"
    assert not text.is_plain(b"a\xffb")
    # direction overrides and line separators would disguise what is shown
    assert text.show("x\u202ey\u2028".encode()) == "x\\u202ey\\u2028"
    assert text.show("tab\tand\nnewline".encode()) == "tab\tand\nnewline"
    # in content that is not UTF-8, tab and line feed are bytes like the others
    assert text.show(b"\x89PNG\r\n\x1a\n\t\xff-") == "\\x89PNG\\x0d\\x0a\\x1a\\x0a\\x09\\xff-"
    assert text.hexdump(b"\x00\xff") == "00 ff"
    assert text.hexdump(b"x" * 5000).endswith("…")
    j = text.message_json(b"<\xff>")
    assert j == {"text": "<\\xff>", "base64": base64.b64encode(b"<\xff>").decode(),
                 "plain": False}
    # a queue name that is not UTF-8 (kept as surrogates) shows as escapes too
    assert text.show(b"q\xfe".decode("utf-8", "surrogateescape")) == "q\\xfe"
    assert text.ms_time(1_700_000_000_123) == "2023-11-14 22:13:20.123Z"
    assert text.ms_time(None) == "–"


def test_loopback_and_start_rules() -> None:
    for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"):
        assert security.is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.1", "example.com"):
        assert not security.is_loopback(host), host
    none = security.Auth()
    assert security.start_refusal("127.0.0.1", True, none) is None
    assert "needs authentication" in security.start_refusal("0.0.0.0", False, none)
    assert "--writable" in security.start_refusal("0.0.0.0", True, none)
    assert security.start_refusal("0.0.0.0", True, security.Auth(token="t" * 16)) is None


def test_auth_from_files_and_environment(tmp_path) -> None:
    f = tmp_path / "token"
    f.write_text("  abcdefghijklmnopqrstuvwxyz\n")
    assert security.Auth.load(token_file=str(f), env={}).token == "abcdefghijklmnopqrstuvwxyz"
    a = security.Auth.load(env={security.TOKEN_ENV: "x" * 20, security.BASIC_ENV: "u:p:w"})
    assert a.token == "x" * 20 and a.basic == ("u", "p:w")
    assert not security.Auth.load(env={}).configured
    with pytest.raises(ValueError, match="user:password"):
        security.Auth.load(env={security.BASIC_ENV: "nopassword"})
    with pytest.raises(ValueError, match="at least 16"):
        security.Auth.load(env={security.TOKEN_ENV: "short"})

    def basic(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    assert a.allows("Bearer " + "x" * 20) and a.allows(basic("anyone", "x" * 20))
    assert a.allows(basic("u", "p:w")) and not a.allows(basic("v", "p:w"))
    for bad in (None, "", "Bearer", "Bearer y", "Basic !!!", basic("u", "p"), "Digest x"):
        assert not a.allows(bad), bad
    assert security.Auth().allows(None)


def test_host_and_csrf_checks() -> None:
    none, token = security.Auth(), security.Auth(token="t" * 16)
    assert security.host_allowed("127.0.0.1:8080", "127.0.0.1", none)
    assert security.host_allowed("localhost:8080", "127.0.0.1", none)
    assert not security.host_allowed("evil.example:8080", "127.0.0.1", none)
    assert security.host_allowed("evil.example", "127.0.0.1", token)

    own = "http://127.0.0.1:8080/"
    ok = dict(token="k", origin="http://127.0.0.1:8080", referer=None, host_url=own)
    assert security.csrf_refusal("k", **ok) is None
    assert security.csrf_refusal(None, **ok) == "missing or wrong CSRF token"
    assert security.csrf_refusal("j", **ok) == "missing or wrong CSRF token"
    assert "cross-site" in security.csrf_refusal("k", "k", "http://127.0.0.1:8081", None, own)
    assert "cross-site" in security.csrf_refusal("k", "k", "null", None, own)
    assert security.csrf_refusal("k", "k", None, own + "queues/x", own) is None
    assert "Referer" in security.csrf_refusal("k", "k", None, "http://evil/", own)
    assert "without Origin" in security.csrf_refusal("k", "k", None, None, own)


def test_filter_matches_text_or_glob() -> None:
    assert matches("orders_12", "ders") and matches("Orders_12", "ORD")
    assert matches("orders_12", "orders_1?") and not matches("orders_123", "orders_1?")
    assert matches("mail", "*") and not matches("mail", "x*")


class FakeSource:
    """Snapshots given by the test, in order."""

    def __init__(self, *snaps: Snapshot) -> None:
        self.snaps = list(snaps)

    def snapshot(self) -> Snapshot:
        return self.snaps.pop(0)


def snap(taken: float, queues: dict[str, dict], pushed: int) -> Snapshot:
    return Snapshot(taken, {n: QueueRow(n, None, info) for n, info in queues.items()},
                    {None: {"rmq_pushed": pushed, "rmq_acked": 0, "rmq_dead": 0}})


def test_rates_sorting_and_paging() -> None:
    first = snap(100.0, {f"q{i:02d}": {"waiting": i, "pushed": 10, "acked": 0, "died": None}
                         for i in range(30)}, pushed=300)
    second = snap(102.0, {f"q{i:02d}": {"waiting": i, "pushed": 10 + 2 * i, "acked": 0,
                                        "died": None, "lag_ms": None if i % 2 else i}
                          for i in range(30)}, pushed=300 + 870)
    s = Sampler(FakeSource(first, second), interval=2)
    s.sample()
    assert s.page()["queues"][3]["pushed_rate"] is None, "no rate before two samples"
    s.sample()
    p = s.page(sort="pushed_rate", desc=True, per_page=7, page=1)
    assert [r["name"] for r in p["queues"]] == [f"q{i:02d}" for i in range(29, 22, -1)]
    assert p["queues"][0]["pushed_rate"] == 29.0 and p["queues"][0]["died_rate"] is None
    assert (p["total"], p["pages"]) == (30, 5)
    last = s.page(sort="pushed_rate", desc=True, per_page=7, page=99)
    assert last["page"] == 5 and [r["name"] for r in last["queues"]] == ["q01", "q00"]
    # unknown values sort last either way
    lag = s.page(sort="lag_ms", desc=True, per_page=30)["queues"]
    assert [r["lag_ms"] for r in lag[:2]] == [28, 26] and lag[-1]["lag_ms"] is None
    lag = s.page(sort="lag_ms", per_page=30)["queues"]
    assert lag[0]["lag_ms"] == 0 and lag[-1]["lag_ms"] is None
    assert s.page(match="q2?", sort="bogus")["total"] == 10
    assert s.page(match="q2?")["totals"]["waiting"] == sum(range(20, 30))
    h = s.series()
    assert h["t"] == [100.0, 102.0] and h["pushed"] == [None, 435.0]
    assert h["waiting"] == [sum(range(30))] * 2


def test_a_counter_going_back_gives_no_rate() -> None:
    assert row("q", None, {"pushed": 5}, [((9, 0, 0), 2.0)])["pushed_rate"] is None
    assert row("q", None, {"pushed": 9}, [((5, 0, 0), 2.0)])["pushed_rate"] == 2.0
    # gone back since the minute's anchor (a restart): the previous sample's delta instead
    assert row("q", None, {"pushed": 7}, [((9, 0, 0), 60.0), ((5, 0, 0), 2.0)]
               )["pushed_rate"] == 1.0


def test_rates_are_averaged_over_the_last_minute() -> None:
    """A burst of 120 pushes at the start, then none: the rate is the minute's average
    (not 60/s for one sample, then 0), and the burst leaves it once it is a minute old."""
    times = [0.0, 2.0, 4.0, *[4.0 + 2 * i for i in range(1, 40)]]
    pushed = [0, 120, *[120] * (len(times) - 2)]
    s = Sampler(FakeSource(*[snap(t, {"q": {"pushed": p, "acked": 0, "died": 0}}, pushed=p)
                            for t, p in zip(times, pushed)]), interval=2)
    seen = {}
    for t in times:
        s.sample()
        seen[t] = (s.page()["queues"][0]["pushed_rate"], s.series()["pushed"][-1])
    assert seen[0.0] == (None, None)
    assert seen[2.0] == (60.0, 60.0)  # all the dashboard has seen: 2 s
    assert seen[30.0] == (4.0, 4.0)  # 120 over the 30 s since its first sample
    assert seen[60.0] == (2.0, 2.0)
    # the anchors are 10 s apart: past the minute the rate is measured from the newest
    # anchor at least 60 s old (here t=10 s, after the burst)
    assert seen[70.0] == (0.0, 0.0) and seen[80.0] == (0.0, 0.0)


def test_queue_names_sort_naturally() -> None:
    names = ["orders_10", "orders_2", "Orders_1", "orders_2b", "billing", "orders_01", "a10b2",
             "a10b10", "a9"]
    s = Sampler(FakeSource(snap(1.0, {n: {"waiting": 1} for n in names}, pushed=0)),
                interval=2)
    s.sample()
    order = [r["name"] for r in s.page(per_page=50)["queues"]]
    assert order == ["a9", "a10b2", "a10b10", "billing", "Orders_1", "orders_01", "orders_2",
                     "orders_2b", "orders_10"]
    assert [r["name"] for r in s.page(desc=True)["queues"]] == order[::-1]
    # another column's ties stay in the names' natural order
    assert [r["name"] for r in s.page(sort="waiting", desc=True)["queues"]] == order
    assert natural_key("x²") < natural_key("x³")  # digits other than 0-9 are letters


def test_lag_is_shown_one_way_for_every_kind() -> None:
    assert text.lag(0, "range") == "0.0 s" and text.lag(400, "fixed") == "0.4 s"
    assert text.lag(95_000, "range") == "1 min 35 s"
    assert text.lag(7_380_000, None) == "2 h 03 min"
    assert text.lag(3 * 86_400_000 + 3_600_000, "fixed") == "3 d 01 h"
    assert text.lag(None, "priority") == "none (priority)"
    assert text.lag(None, None) == "–"


def test_journal_entries_are_read_whatever_their_bytes() -> None:
    e = journal_entry(b"1796616152376-3", [b"event", b"acked", b"message", b"\xff<x>",
                                          b"deliveries", b"2", b"by", b"w\xfe", b"id", b"99"])
    assert e == {"entry": "1796616152376-3", "time": 1796616152376, "message": b"\xff<x>",
                 "event": "acked", "sha1": None, "deliveries": "2", "by": "w\\xfe",
                 "id": "99", "due": None, "priority": None}


def test_an_outage_is_dated_from_its_first_failed_read() -> None:
    class Flaky:
        def __init__(self) -> None:
            self.up = True

        def snapshot(self) -> Snapshot:
            if not self.up:
                raise ConnectionError("refused")
            return snap(time.time(), {"q": {"waiting": 3}}, pushed=0)
    src = Flaky()
    s = Sampler(src, interval=1)
    s.sample()
    assert s.outage() == (None, None)
    src.up = False
    before = time.time()
    s.sample()
    since, error = s.outage()
    assert since is not None and since >= before and error == "ConnectionError: refused"
    s.sample()
    assert s.outage()[0] == since, "dated from the first failure"
    assert s.page()["queues"][0]["waiting"] == 3, "the last figures stay"
    src.up = True
    s.sample()
    assert s.outage() == (None, None)


def test_a_failed_read_is_kept_for_the_page() -> None:
    class Failing:
        def snapshot(self) -> Snapshot:
            raise ConnectionError("server gone")
    s = Sampler(Failing(), interval=1)
    s.sample()
    assert s.page()["error"] == "ConnectionError: server gone" and s.page()["queues"] == []


def test_slow_reads_space_the_samples_out() -> None:
    class Slow:
        def snapshot(self) -> Snapshot:
            time.sleep(0.05)
            return snap(time.time(), {}, pushed=0)
    s = Sampler(Slow(), interval=0.01)
    s.sample()
    assert s.pause >= 4 * 0.05
    fast = Sampler(FakeSource(snap(1.0, {}, pushed=0)), interval=2)
    fast.sample()
    assert fast.pause == 2


def test_listen_addresses() -> None:
    import argparse

    from rmq.dashboard.commands import listen_address
    assert listen_address("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert listen_address("[::1]:9808") == ("::1", 9808)
    assert listen_address("0.0.0.0:80") == ("0.0.0.0", 80)
    for bad in ("8080", ":8080", "host:", "host:http"):
        with pytest.raises(argparse.ArgumentTypeError):
            listen_address(bad)


def test_labels_are_one_per_name_and_every_scrape_parses() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from rmq.dashboard.metrics import exposition
    names = [b"\xff\xfe", "\\xff\\xfe", "cr\rq", "nul\x00q", "lf\nq", "tab\tq", "\\", "\\\\",
             "\u202egnp.exe", "plain", "é", b"\xc3", "\\xc3"]
    labels = [text.label(n) for n in names]
    assert len(set(labels)) == len(names)
    assert labels[:2] == ["\\xff\\xfe", "\\\\xff\\\\xfe"] and labels[-4:-2] == ["plain", "é"]
    queues = {name_str(n): {"waiting": i}
              for i, n in enumerate(names)}
    body = exposition(snap(1.0, queues, pushed=0)).decode()
    got = {s.labels["queue"]: s.value for fam in text_string_to_metric_families(body)
           for s in fam.samples if s.name == "rmq_queue_waiting"}
    assert got == {label: i for i, label in enumerate(labels)}


def test_times_past_year_9999_are_shown_as_ms() -> None:
    assert text.ms_time(253402300799999) == "9999-12-31 23:59:59.999Z"
    assert text.ms_time(2 ** 53) == f"{2 ** 53} ms after 1970 (past year 9999)"
    assert text.ms_time(b"4.5e15") == "4500000000000000 ms after 1970 (past year 9999)"
    assert text.ms_time(-2 ** 53) == f"{2 ** 53} ms before 1970 (before year 1)"
    assert text.ms_time(None) == "–"


def test_a_bad_queue_keeps_its_row_and_the_metrics() -> None:
    from prometheus_client.parser import text_string_to_metric_families
    s = snap(5.0, {"good": {"waiting": 3}}, pushed=0)
    s.queues["bad"] = QueueRow("bad", None, info_dict(None), "ResponseError: WRONGTYPE x")
    sampler = Sampler(FakeSource(s), interval=2)
    sampler.sample()
    rows = {r["name"]: r for r in sampler.page()["queues"]}
    assert rows["bad"]["error"] == "ResponseError: WRONGTYPE x" and rows["bad"]["waiting"] is None
    assert rows["good"]["error"] is None and rows["good"]["waiting"] == 3
    body, error = sampler.scrape()
    assert error is None
    samples = {(x.name, x.labels.get("queue")): x.value
               for fam in text_string_to_metric_families(body.decode()) for x in fam.samples}
    assert samples[("rmq_queue_waiting", "good")] == 3
    assert samples[("rmq_queue_read_error", "bad")] == 1
    assert ("rmq_queue_waiting", "bad") not in samples
    assert samples[("rmq_dashboard_sample_time_seconds", None)] == 5.0


def test_metrics_refuse_when_the_last_sample_failed() -> None:
    """A scrape after a failed read is a 503 (Prometheus's `up` then says so), not the
    older sample passed off as current."""
    from rmq.dashboard.app import create_app

    class Flaky:
        def __init__(self) -> None:
            self.fail = False

        def snapshot(self) -> Snapshot:
            if self.fail:
                raise ConnectionError("server gone")
            return snap(1.0, {"q": {"waiting": 1}}, pushed=0)
    source = Flaky()
    sampler = Sampler(source, interval=1)
    sampler.sample()
    client = create_app(source, sampler).test_client()
    ok = client.get("/metrics", base_url="http://127.0.0.1/")
    assert ok.status_code == 200 and b'rmq_queue_waiting{queue="q"} 1.0' in ok.data
    assert "Content-Encoding" not in ok.headers
    # as Prometheus asks for it: the same text, gzip-compressed
    packed = client.get("/metrics", base_url="http://127.0.0.1/",
                        headers={"Accept-Encoding": "gzip"})
    assert packed.status_code == 200 and packed.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(packed.data) == ok.data
    source.fail = True
    sampler.sample()
    gone = client.get("/metrics", base_url="http://127.0.0.1/")
    assert gone.status_code == 503 and b"ConnectionError: server gone" in gone.data
    assert client.get("/metrics", base_url="http://127.0.0.1/").status_code == 503


def test_a_queue_error_stays_with_its_queue_a_server_error_fails_the_read() -> None:
    """WRONGTYPE (or NOPERM) is about one queue: its row keeps it. MOVED, CLUSTERDOWN or a
    lost connection are about the server: the read fails, so that under Cluster the
    primaries are learnt again, as before."""
    import redis
    from redis.exceptions import ClusterDownError, MovedError

    from rmq.dashboard.source import Source

    class Pipe:
        def __init__(self, replies: list) -> None:
            self.replies = replies

        def execute_command(self, *args: object) -> None:
            pass

        def execute(self, raise_on_error: bool = True) -> list:
            assert raise_on_error is False
            return self.replies

    class Client:
        def __init__(self, replies: list) -> None:
            self.replies = replies

        def info(self, section: str) -> dict:
            return {}

        def execute_command(self, *args: object) -> list:
            assert args[0] == "RMQ.QUEUES"
            return [b"0", [b"a", b"b"]]

        def pipeline(self, transaction: bool) -> Pipe:
            return Pipe(self.replies)

    wrong = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind")
    got = Source(Client([wrong, [b"waiting", 2]])).snapshot().queues
    assert got["a"].error == f"ResponseError: {wrong}" and got["a"].info["waiting"] is None
    assert got["b"].error is None and got["b"].info["waiting"] == 2
    for server_error in (MovedError("3999 127.0.0.1:7001"), ClusterDownError("down"),
                         redis.ConnectionError("gone")):
        with pytest.raises(type(server_error)):
            Source(Client([[b"waiting", 1], server_error])).snapshot()
