"""The dashboard against a real server: the page in headless Chromium (the counts a test
pushed, a chart drawn, a dead letter replayed with --writable, a read-only page refusing
POSTs), /metrics parsed by prometheus_client, the JSON API with its paging, CSRF and
authentication refusals, and hostile message bytes shown escaped."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

import rmq
from dashboard_support import Dashboard, browser, clean_env, csrf_token, http, page_errors
from server_support import wait_for

HOSTILE = b"<script>document.title='pwned'</script>\xff\xfe\x00\x1b[31m\"'&"


@pytest.fixture
def start_dashboard(server: Any) -> Iterator[Any]:
    started: list[Dashboard] = []

    def start(*args: Any, **kw: Any) -> Dashboard:
        d = Dashboard(server.port, *args, **kw)
        started.append(d)
        return d.wait_ready()
    yield start
    for d in started:
        d.stop()


@pytest.fixture(scope="module")
def chrome_session() -> Iterator[Any]:
    yield from browser()


@pytest.fixture
def chrome(chrome_session: Any) -> Any:
    """The browser on a blank page, its console emptied (the last test's page is gone)."""
    chrome_session.get("about:blank")
    page_errors(chrome_session)
    return chrome_session


def make_dead(r: redis.Redis, queue: str, message: bytes) -> None:
    rmq.Queue(r, queue).push(message, priority=1)
    r.execute_command("RMQ.POP", queue, "COUNT", 1)
    assert r.execute_command("RMQ.NACK", queue, message, "DEAD") == b"dead"


def get_json(url: str) -> Any:
    status, body, _ = http("GET", url)
    assert status == 200, body
    return json.loads(body)


def wait_api_row(d: Dashboard, name: str, **expect: Any) -> dict[str, Any]:
    """The queue's row in /api/queues once the sampler shows `expect`."""
    def row() -> Any:
        rows = get_json(f"{d.url}/api/queues?match={quote(name)}&per_page=500")["queues"]
        got = next((q for q in rows if q["name"] == name), None)
        return got if got and all(got.get(k) == v for k, v in expect.items()) else None
    return wait_for(row, timeout=20, interval=0.2, what=f"{name} with {expect} in /api/queues")


def series_pixels(driver: Any, chart_id: str, rgb: tuple[int, int, int]) -> int:
    """How many pixels of the chart's canvas are drawn in the series colour."""
    return driver.execute_script("""
        const c = document.querySelector(arguments[0] + ' canvas');
        if (!c || !c.width) return 0;
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
            if (Math.abs(d[i] - arguments[1]) < 40 && Math.abs(d[i+1] - arguments[2]) < 40
                && Math.abs(d[i+2] - arguments[3]) < 40 && d[i+3] > 0) n++;
        return n;""", f"#{chart_id}", *rgb)


def shown(driver: Any, element_id: str) -> str:
    """An element's text as rendered, read in one script (live parts of the page are
    replaced as it updates itself, so a handle found before may be gone)."""
    return driver.execute_script(
        "const e = document.getElementById(arguments[0]); return e ? e.innerText : '';",
        element_id)


def flash(driver: Any) -> str:
    """The outcome an action shows on the page it returns to ("" until it is there)."""
    return driver.execute_script(
        "const f = document.getElementById('flash'); return f ? f.textContent : '';")


# -- the page in Chromium -------------------------------------------------------------

def test_page_lists_the_pushed_counts_and_draws_the_charts(start_dashboard: Any,
                                                           r: redis.Redis, chrome: Any) -> None:
    orders = rmq.Queue(r, "orders")
    orders.push(*[f"o{i}" for i in range(7)], priority=3)
    taken = orders.pop(count=2, lease_ms=60_000)
    make_dead(r, "mail", b"m1")
    rmq.Queue(r, "mail").push("m2", "m3", priority=1)
    d = start_dashboard()
    chrome.get(d.url + "/")

    def cells(name: str) -> Any:
        # read in one script: the page swaps its rows in as it updates itself
        return chrome.execute_script("""
            const row = [...document.querySelectorAll('#queues tbody tr')]
                .find(tr => tr.dataset.name === arguments[0]);
            if (!row) return null;
            const out = {};
            row.querySelectorAll('td[data-col]').forEach(td => {
                if (['waiting', 'ready', 'inflight', 'dead'].includes(td.dataset.col))
                    out[td.dataset.col] = td.textContent.trim(); });
            return out;""", name)
    assert wait_for(lambda: cells("orders") == {"waiting": "5", "ready": "5", "inflight": "2",
                                                "dead": "0"},
                    timeout=20, interval=0.2, what="orders' counts on the page")
    assert cells("mail") == {"waiting": "2", "ready": "2", "inflight": "0", "dead": "1"}
    assert "read-only" in shown(chrome, "mode")

    # the page updates by itself: a push shows without reloading
    orders.push("o-late", priority=3)
    wait_for(lambda: (cells("orders") or {}).get("waiting") == "6", timeout=20,
             interval=0.2, what="the new count without a reload")
    # the backlog chart draws its waiting series (blue) once it has a few points
    wait_for(lambda: len(get_json(d.url + "/api/history")["t"]) >= 3, timeout=20,
             interval=0.2, what="three samples")
    wait_for(lambda: series_pixels(chrome, "chart-backlog", (37, 99, 235)) > 20, timeout=20,
             interval=0.3, what="the backlog chart's waiting line drawn")
    assert page_errors(chrome) == []
    for m in taken:
        m.ack()


def test_replaying_a_dead_letter_from_the_page(start_dashboard: Any, r: redis.Redis,
                                               chrome: Any) -> None:
    make_dead(r, "jobs", b"job-1")
    d = start_dashboard("--writable")
    chrome.get(d.url + "/queues/jobs")
    assert "writable" in shown(chrome, "mode")
    assert "job-1" in shown(chrome, "dead-letters")
    chrome.find_element("xpath", "//button[text()='Replay all']").click()
    wait_for(lambda: "replayed 1" in flash(chrome), timeout=20,
             interval=0.2, what="the replay's outcome on the page")
    assert "no dead letters" in shown(chrome, "dead-letters")
    assert "job-1" in shown(chrome, "waiting-list")
    assert r.zcard("dead{jobs}") == 0 and r.zscore("jobs", "job-1") == 1.0
    # the queue's page updates by itself: a new dead letter shows without a reload
    make_dead(r, "jobs", b"job-2")
    wait_for(lambda: "job-2" in shown(chrome, "dead-letters"), timeout=20, interval=0.2,
             what="the new dead letter on the page")
    assert shown(chrome, "dead-total") == "1"
    assert page_errors(chrome) == []


def test_read_only_page_has_no_actions_and_refuses_posts(start_dashboard: Any,
                                                         r: redis.Redis, chrome: Any) -> None:
    make_dead(r, "ro", b"x")
    d = start_dashboard()
    chrome.get(d.url + "/queues/ro")
    assert "read-only" in shown(chrome, "mode")
    assert not chrome.find_elements("css selector", "form[method=post]")
    for action in ("replay", "cancel", "pause", "resume", "policy", "policy-reset"):
        status, body, _ = http("POST", f"{d.url}/queues/ro/{action}", {"hex": b"x".hex()},
                               headers={"Origin": d.url})
        assert status == 403 and "read-only" in body, action
    assert r.zcard("dead{ro}") == 1 and r.execute_command("RMQ.POLICY", "ro", "RESET") == 0


def test_hostile_bytes_are_escaped(start_dashboard: Any, r: redis.Redis, chrome: Any) -> None:
    make_dead(r, "evil", HOSTILE)
    q = rmq.Queue(r, "evil")
    q.push(HOSTILE + b"2", priority=1)
    r.execute_command("RMQ.PUSH", "evil", "PRIORITY", 1, "GROUP", HOSTILE, HOSTILE + b"3")
    r.execute_command("RMQ.POP", "evil", "COUNT", 1, "LEASE", 60_000)
    d = start_dashboard("--writable")
    status, html, headers = http("GET", d.url + "/queues/evil")
    assert status == 200
    assert "<script>document" not in html
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;\\xff\\xfe\\x00\\x1b[31m" \
        "&#34;&#39;&amp;" in html
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    chrome.get(d.url + "/queues/evil")
    assert chrome.title != "pwned"
    dead_text = shown(chrome, "dead-letters")
    assert "<script>document.title='pwned'</script>\\xff\\xfe\\x00\\x1b[31m\"'&" in dead_text
    pending_text = shown(chrome, "pending")
    assert pending_text.count("<script>") == 2, "message and group both shown as text"
    api = get_json(d.url + "/api/queues/evil")
    assert base64.b64decode(api["dead"]["items"][0]["message"]["base64"]) == HOSTILE
    assert api["dead"]["items"][0]["message"]["plain"] is False
    # the cancel button carries the exact bytes (hex) of a waiting message
    chrome.execute_script(
        "document.querySelector('#waiting-list button[type=submit]').click()")
    wait_for(lambda: "cancelled 1" in flash(chrome), timeout=20,
             interval=0.2, what="the cancel's outcome")
    assert r.zscore("evil", HOSTILE + b"2") is None


def test_hostile_queue_names_are_escaped(start_dashboard: Any, r: redis.Redis,
                                        chrome: Any) -> None:
    """A queue name is any bytes but braces: HTML in it is shown as text, bytes that are not
    UTF-8 as escapes, and the dashboard still reads that queue (the name goes back to the
    server as the bytes it came as)."""
    html_name = "<img src=x onerror=\"document.title='pwned'\">"
    binary_name = b"bin\xff\xfe"
    r.execute_command("RMQ.PUSH", html_name, "PRIORITY", 1, "a", "b")
    r.execute_command("RMQ.PUSH", binary_name, "PRIORITY", 1, "c", "d", "e")
    d = start_dashboard()
    assert wait_api_row(d, html_name, waiting=2)
    assert wait_api_row(d, "bin\\xff\\xfe", waiting=3)
    status, html, _ = http("GET", d.url + "/")
    assert status == 200 and "<img src=x" not in html
    assert "&lt;img src=x onerror=&#34;document.title=&#39;pwned&#39;&#34;&gt;" in html
    chrome.get(d.url + "/")
    wait_for(lambda: html_name in shown(chrome, "queues"), timeout=20,
             interval=0.2, what="the name shown as text")
    assert "bin\\xff\\xfe" in shown(chrome, "queues")
    assert chrome.title != "pwned"
    m = scrape(d.url + "/metrics")
    assert m[("rmq_queue_waiting", (("queue", "bin\\xff\\xfe"),))] == 3
    assert m[("rmq_queue_waiting", (("queue", html_name),))] == 2


# -- CSRF and the writable actions over HTTP --------------------------------------------

def test_posts_need_the_token_and_this_origin(start_dashboard: Any, r: redis.Redis) -> None:
    make_dead(r, "c", b"d1")
    d = start_dashboard("--writable")
    _, page, _ = http("GET", d.url + "/queues/c")
    token = csrf_token(page)
    url = d.url + "/queues/c/replay"
    refused = [
        ({}, {"Origin": d.url}),                                        # no token
        ({"csrf_token": "x" * 43}, {"Origin": d.url}),                  # wrong token
        ({"csrf_token": token}, {"Origin": "http://evil.example"}),     # other origin
        ({"csrf_token": token}, {"Referer": "http://evil.example/x"}),  # other referer
        ({"csrf_token": token}, {}),                                    # neither
    ]
    for form, headers in refused:
        status, body, _ = http("POST", url, form, headers)
        assert status == 403 and "refused" in body, (form, headers)
        assert r.zcard("dead{c}") == 1
    status, _, headers = http("POST", url, {"csrf_token": token}, {"Origin": d.url})
    assert status == 303 and "replayed" in headers["Location"]
    assert r.zcard("dead{c}") == 0


def test_pause_resume_policy_and_cancel(start_dashboard: Any, r: redis.Redis) -> None:
    q = rmq.Queue(r, "p")
    q.push("a", "b", priority=1)
    d = start_dashboard("--writable")
    _, page, _ = http("GET", d.url + "/queues/p")
    post = {"csrf_token": csrf_token(page)}
    origin = {"Origin": d.url}

    assert http("POST", d.url + "/queues/p/pause", post, origin)[0] == 303
    assert q.info()["paused"] == 1 and r.execute_command("RMQ.POP", "p") is None
    assert wait_api_row(d, "p", paused=1)
    assert http("POST", d.url + "/queues/p/resume", post, origin)[0] == 303
    assert q.info()["paused"] == 0

    form = {**post, "retries": "3", "was-retries": "16", "lease-ms": "30000",
            "was-lease-ms": "30000"}
    status, _, headers = http("POST", d.url + "/queues/p/policy", form, origin)
    assert status == 303 and "policy+set" in headers["Location"]
    assert q.policy()["retries"] == 3 and q.policy()["lease_ms"] == 30000
    # a value the server refuses: its error shown, nothing changed
    bad = {**post, "retries": "5000", "was-retries": "3"}
    status, _, headers = http("POST", d.url + "/queues/p/policy", bad, origin)
    assert status == 303 and "error=" in headers["Location"]
    assert q.policy()["retries"] == 3
    assert http("POST", d.url + "/queues/p/policy-reset", post, origin)[0] == 303
    assert q.policy()["retries"] == 16

    status, _, headers = http("POST", d.url + "/queues/p/cancel", {**post, "message": "a"},
                              origin)
    assert status == 303 and "cancelled+1" in headers["Location"]
    assert r.zrange("p", 0, -1) == [b"b"]


# -- /metrics and the JSON API --------------------------------------------------------

def scrape(url: str) -> dict[tuple[str, tuple], float]:
    status, body, _ = http("GET", url)
    assert status == 200, body
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body) for s in fam.samples}


@pytest.mark.parametrize("command", ["dashboard", "exporter"])
def test_metrics_hold_the_queues_values(start_dashboard: Any, r: redis.Redis,
                                        command: str) -> None:
    name = f"m-{command}"  # per-queue counters outlive the queue's keys: a name per run
    q = rmq.Queue(r, name)
    q.push(*[f"x{i}" for i in range(10)], priority=2)
    q.push("x0", priority=2)                                  # merged
    got = q.pop(count=4, lease_ms=60_000)
    got[0].ack()
    got[1].nack(dead=True)
    got[2].nack()
    d = start_dashboard(command=command)
    m = scrape(d.url + "/metrics")
    info = q.info()
    lab = (("queue", name),)
    assert m[("rmq_queue_waiting", lab)] == info["waiting"] == 7
    assert m[("rmq_queue_ready", lab)] == 7
    assert m[("rmq_queue_inflight", lab)] == 1
    assert m[("rmq_queue_dead", lab)] == 1
    assert m[("rmq_queue_paused", lab)] == 0
    assert ("rmq_queue_lag_seconds", lab) not in m, "no lag for a priority queue"
    assert m[("rmq_queue_pushed_total", lab)] == 10
    assert m[("rmq_queue_popped_total", lab)] == 4
    assert m[("rmq_queue_acked_total", lab)] == 1
    assert m[("rmq_queue_nacked_total", lab)] == 2
    assert m[("rmq_queue_died_total", lab)] == 1
    assert m[("rmq_queue_expired_total", lab)] == 0
    server_info = r.info("rmq")
    for field in ("pushed", "merged", "popped", "acked", "nacked", "dead"):
        assert m[(f"rmq_{field}_total", ())] == server_info[f"rmq_{field}"] > 0
    assert ("rmq_blocked_clients", ()) in m
    # a fixed queue's lag, read after its message is due by the server's clock
    r.execute_command("RMQ.PUSH", f"late-{command}", "AT", 946_684_800_000, "old")
    key = ("rmq_queue_lag_seconds", (("queue", f"late-{command}"),))
    lag = wait_for(lambda: scrape(d.url + "/metrics").get(key), timeout=20, interval=0.2,
                   what="the late queue in a later sample")
    assert lag > 10 ** 8
    if command == "exporter":
        assert http("GET", d.url + "/")[0] == 404
    got[3].ack()


def test_api_pages_sorts_and_filters(start_dashboard: Any, r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(120):
        pipe.execute_command("RMQ.PUSH", f"bulk_{i:03d}", "PRIORITY", 1,
                             *[f"m{j}" for j in range(i % 7 + 1)])
    pipe.execute()
    d = start_dashboard()
    wait_api_row(d, "bulk_119", waiting=119 % 7 + 1)
    page3 = get_json(f"{d.url}/api/queues?match=bulk_*&per_page=50&page=3")
    assert (page3["total"], page3["pages"], page3["page"]) == (120, 3, 3)
    assert [q["name"] for q in page3["queues"]] == [f"bulk_{i:03d}" for i in range(100, 120)]
    top = get_json(f"{d.url}/api/queues?match=bulk&sort=waiting&desc=1&per_page=10")
    assert [q["waiting"] for q in top["queues"]] == [7] * 10
    assert top["totals"]["waiting"] == sum(i % 7 + 1 for i in range(120))
    one = get_json(f"{d.url}/api/queues/bulk_006")
    assert one["info"]["waiting"] == 7 and one["info"]["kind"] == "priority"
    assert one["policy"]["retries"] == 16
    assert sorted(w["message"]["text"] for w in one["waiting"]) == [f"m{j}" for j in range(7)]
    # a page shows the filter and the pager
    status, html, _ = http("GET", f"{d.url}/?match=bulk_1*&sort=name&page=1")
    assert status == 200 and "20 of" in html and "bulk_100" in html and "bulk_099" not in html


def test_dead_letters_are_paged(start_dashboard: Any, r: redis.Redis) -> None:
    msgs = [f"d{i:03d}" for i in range(120)]
    rmq.Queue(r, "dq").push(*msgs, priority=1)
    pipe = r.pipeline(transaction=False)
    for m, _ in r.execute_command("RMQ.POP", "dq", "COUNT", 120):
        pipe.execute_command("RMQ.NACK", "dq", m, "DEAD")
    pipe.execute()
    oldest_first = [m.decode() for m in r.zrange("dead{dq}", 0, -1)]
    d = start_dashboard()
    page = get_json(d.url + "/api/queues/dq?dead_offset=50")["dead"]
    assert (page["total"], page["offset"]) == (120, 50)
    assert [i["message"]["text"] for i in page["items"]] == oldest_first[50:100]
    _, html, _ = http("GET", d.url + "/queues/dq?dead_offset=100")
    assert "101–120 of 120, oldest death first" in html
    assert oldest_first[100] in html and oldest_first[99] not in html
    assert 'href="?dead_offset=50"' in html, "a link back to the previous page"


def test_rates_come_from_the_counters(start_dashboard: Any, r: redis.Redis) -> None:
    q = rmq.Queue(r, "rated")
    q.push("first", priority=1)
    d = start_dashboard()
    wait_api_row(d, "rated", waiting=1)
    q.push(*[f"r{i}" for i in range(50)], priority=1)
    wait_api_row(d, "rated", waiting=51)
    # averaged over the last minute, not one sample's delta: the dashboard has run less
    # than a minute, so the rate is the 50 pushes since its first sample, over the time
    # since then, and it stays so in the samples after the push
    first = get_json(d.url + "/api/history")["t"][0]
    for _ in range(3):
        listing = get_json(f"{d.url}/api/queues?match=rated")
        if listing["taken"] - first >= 50:
            break  # (only on a machine stalled for a minute)
        row = listing["queues"][0]
        assert row["pushed_rate"] == pytest.approx(50 / (listing["taken"] - first))
        wait_for(lambda: get_json(f"{d.url}/api/queues?match=rated")["taken"]
                 > listing["taken"], timeout=20, interval=0.1, what="the next sample")


# -- who may use it -------------------------------------------------------------------

def test_non_loopback_needs_authentication(server: Any, tmp_path: Any) -> None:
    env = clean_env()

    def start(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rmq", "dashboard", "--port",
                               str(server.port), *args], capture_output=True, text=True,
                              timeout=60, env=env)
    p = start("--listen", "0.0.0.0:1")
    assert p.returncode == 2 and "needs authentication" in p.stderr
    p = start("--listen", "0.0.0.0:1", "--writable")
    assert p.returncode == 2 and "--writable on the non-loopback address 0.0.0.0" in p.stderr
    p = start("--listen", "0.0.0.0:1", "--token", "secret")
    assert p.returncode == 2 and "unrecognized arguments" in p.stderr
    short = tmp_path / "short"
    short.write_text("abc\n")
    p = start("--listen", "0.0.0.0:1", "--token-file", str(short))
    assert p.returncode == 2 and "at least 16" in p.stderr


def test_redis_credentials_from_the_environment(start_server: Any) -> None:
    """A password-protected server: without RMQ_REDIS_PASSWORD the dashboard stops at start
    and says why; with an ACL user (RMQ_REDIS_USERNAME) it lists only the queues that user
    may read (RMQ.QUEUES filters by ACL)."""
    s = start_server()  # its own server (the harness's start waits on a PING without auth)
    s.client().config_set("requirepass", "s3cret-pw")
    admin = redis.Redis(port=s.port, password="s3cret-pw")
    for q in ("mine", "theirs"):
        admin.execute_command("RMQ.PUSH", q, "PRIORITY", 1, "m")
    admin.execute_command("ACL", "SETUSER", "viewer", "on", ">view-pw", "~mine", "~*{mine}",
                          "+@all")
    env = clean_env()
    p = subprocess.run([sys.executable, "-m", "rmq", "dashboard", "--port", str(s.port),
                        "--listen", "127.0.0.1:1"], capture_output=True, text=True, timeout=60,
                       env=env)
    assert p.returncode == 1 and "authenticat" in p.stderr.lower(), p.stderr
    d = Dashboard(s.port, env={"RMQ_REDIS_USERNAME": "viewer",
                               "RMQ_REDIS_PASSWORD": "view-pw"}).wait_ready()
    try:
        assert wait_api_row(d, "mine", waiting=1)
        assert [q["name"] for q in get_json(d.url + "/api/queues")["queues"]] == ["mine"]
    finally:
        d.stop()
        admin.close()


def test_token_and_basic_auth(start_dashboard: Any, tmp_path: Any) -> None:
    token = "t" * 24
    d = start_dashboard(env={"RMQ_DASHBOARD_TOKEN": token})
    status, _, headers = http("GET", d.url + "/api/queues")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert http("GET", d.url + "/api/queues", headers={"Authorization": "Bearer nope"})[0] == 401
    assert http("GET", d.url + "/metrics",
                headers={"Authorization": f"Bearer {token}"})[0] == 200
    basic = base64.b64encode(f"anyone:{token}".encode()).decode()
    assert http("GET", d.url + "/", headers={"Authorization": f"Basic {basic}"})[0] == 200

    pair = tmp_path / "basic"
    pair.write_text("ops:s3cret-pass\n")
    d2 = start_dashboard("--basic-auth-file", pair)
    good = base64.b64encode(b"ops:s3cret-pass").decode()
    bad = base64.b64encode(b"ops:wrong").decode()
    assert http("GET", d2.url + "/", headers={"Authorization": f"Basic {good}"})[0] == 200
    assert http("GET", d2.url + "/", headers={"Authorization": f"Basic {bad}"})[0] == 401
    assert http("GET", d2.url + "/")[0] == 401


def test_a_foreign_host_name_is_refused(start_dashboard: Any) -> None:
    d = start_dashboard()
    assert http("GET", d.url + "/", headers={"Host": "evil.example"})[0] == 403
    assert http("GET", d.url + "/", headers={"Host": f"localhost:{d.port}"})[0] == 200


def test_schedules_on_the_queue_page(start_dashboard: Any, r: redis.Redis) -> None:
    from rmq.dashboard.text import ms_time
    hourly = r.execute_command("RMQ.SCHEDULE", "sched", "SET", "hourly", "EVERY", 3_600_000,
                               "PRIORITY", 1, "<hourly>")
    r.execute_command("RMQ.SCHEDULE", "sched", "SET", "tick", "EVERY", 200, "PRIORITY", 2, "t")
    d = start_dashboard()

    def fired() -> Any:
        s = {x["name"]: x for x in get_json(d.url + "/api/queues/sched")["schedules"]}
        return s if s["tick"]["fired"] >= 1 else None
    s = wait_for(fired, timeout=20, interval=0.2, what="the tick schedule fired")
    assert (s["hourly"]["next"], s["hourly"]["fired"], s["hourly"]["last"]) == (hourly, 0, None)
    assert s["hourly"]["spec"] == "EVERY 3600000 PRIORITY 1 MESSAGES <hourly>"
    assert s["tick"]["last"] is not None and s["tick"]["next"] > s["tick"]["last"]
    _, html, _ = http("GET", d.url + "/queues/sched")
    assert 'id="schedules"' in html and "EVERY 3600000 PRIORITY 1 MESSAGES &lt;hourly&gt;" in html
    assert ms_time(hourly) in html
    # the tick's row: how many firings and the last one's time
    row = re.search(r"<tr><td>tick</td>(.*?)</tr>", html, re.S)
    assert row, html
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert int(cells[-2]) >= 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z", cells[-1]), cells


def test_grafana_and_alerts_use_exported_metrics(start_dashboard: Any, r: redis.Redis) -> None:
    """docs/grafana-dashboard.json and docs/prometheus-alerts.yml name only metrics that
    /metrics gives (a renamed metric would leave a silent panel or an alert never firing)."""
    docs = Path(__file__).resolve().parents[3] / "docs"
    r.execute_command("RMQ.PUSH", "doc-q", "AT", 946_684_800_000, "old")
    d = start_dashboard(command="exporter")
    exported = {name for name, _ in scrape(d.url + "/metrics")}
    grafana = json.loads((docs / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in grafana["panels"] for t in p["targets"]]
    used = set(re.findall(r"\brmq_[a-z_]+", " ".join(exprs)))
    used |= set(re.findall(r"\brmq_[a-z_]+", (docs / "prometheus-alerts.yml").read_text()))
    # rmq-gateway's own metrics come from the gateway (tests/test_gateway.py checks them).
    used = {m for m in used if not m.startswith("rmq_gateway_")}
    assert {"rmq_queue_dead", "rmq_queue_lag_seconds", "rmq_queue_died_total"} <= used
    assert used <= exported, used - exported


def test_queue_names_follow_the_cursor(r: redis.Redis) -> None:
    """More queues than one RMQ.QUEUES call gives: the opaque cursor is followed to "0"."""
    from rmq.dashboard.source import SCAN_COUNT, Source, queue_names
    count = 2 * SCAN_COUNT + 500
    pipe = r.pipeline(transaction=False)
    for i in range(count):
        pipe.execute_command("RMQ.PUSH", f"many_{i}", "PRIORITY", 1, "m")
    pipe.execute()
    names = queue_names(r)
    assert len(names) == count and set(names) == {f"many_{i}" for i in range(count)}
    snap = Source(r).snapshot()
    assert len(snap.queues) == count and snap.queues["many_7"].info["waiting"] == 1


# -- one queue never takes the others down (issue 31) -----------------------------------

def spoil(r: redis.Redis) -> None:
    """Queues x and z made by RMQ.PUSH, then one of their keys overwritten with another
    type (meta{x} a string, dead{z} a hash): their server refuses their RMQ.INFO. Each keeps
    a waiting message, so it is listed whichever keys make a name a queue."""
    r.execute_command("RMQ.PUSH", "x", "PRIORITY", 1, "x1", "x2")
    r.set("meta{x}", "hello")
    make_dead(r, "z", b"z0")
    r.execute_command("RMQ.PUSH", "z", "PRIORITY", 1, "z1")
    r.delete("dead{z}")
    r.hset("dead{z}", "a", "b")
    for q in ("x", "z"):
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            r.execute_command("RMQ.INFO", q)


def test_a_bad_queue_is_shown_with_its_error_beside_the_others(
        start_dashboard: Any, r: redis.Redis, chrome: Any) -> None:
    rmq.Queue(r, "good1").push("a", "b", "c", priority=1)
    rmq.Queue(r, "good2").push("d", priority=1)
    spoil(r)
    d = start_dashboard()
    listing = get_json(d.url + "/api/queues?per_page=500")
    assert listing["error"] is None
    rows = {q["name"]: q for q in listing["queues"]}
    assert rows["good1"]["waiting"] == 3 and rows["good1"]["error"] is None
    assert rows["good2"]["waiting"] == 1
    for q in ("x", "z"):
        assert "WRONGTYPE" in rows[q]["error"] and rows[q]["waiting"] is None
    m = scrape(d.url + "/metrics")
    assert m[("rmq_queue_waiting", (("queue", "good1"),))] == 3
    assert m[("rmq_queue_waiting", (("queue", "good2"),))] == 1
    assert m[("rmq_queue_read_error", (("queue", "x"),))] == 1
    assert m[("rmq_queue_read_error", (("queue", "z"),))] == 1
    assert ("rmq_queue_read_error", (("queue", "good1"),)) not in m
    assert ("rmq_queue_waiting", (("queue", "x"),)) not in m
    # its own page shows what could be read and what its server refused
    one = get_json(d.url + "/api/queues/z")
    assert any(e.startswith("RMQ.INFO: ") and "WRONGTYPE" in e for e in one["errors"])
    assert [w["message"]["text"] for w in one["waiting"]] == ["z1"]
    assert get_json(d.url + "/api/queues/good1")["errors"] == []
    # as a person sees it: the list with the bad rows marked, the bad queue's page
    chrome.get(d.url + "/")
    wait_for(lambda: "unreadable: ResponseError: WRONGTYPE" in shown(chrome, "queues"),
             timeout=20, interval=0.2, what="the bad rows marked")
    table = shown(chrome, "queues")
    assert "good1" in table and "good2" in table
    chrome.get(d.url + "/queues/x")
    assert "WRONGTYPE" in shown(chrome, "read-errors")
    assert "None" not in shown(chrome, "info") and "waiting\n–" in shown(chrome, "info")
    assert "x1" in shown(chrome, "waiting-list")
    assert page_errors(chrome) == []


def test_a_time_past_year_9999_renders(start_dashboard: Any, r: redis.Redis) -> None:
    """DELAY 2^52 ms is accepted by the module; the page shows the due time as ms."""
    assert r.execute_command("RMQ.PUSH", "farq", "DELAY", 2 ** 52, "m") == 1
    due = int(r.zscore("farq", "m"))
    d = start_dashboard()
    status, html, _ = http("GET", d.url + "/queues/farq")
    assert status == 200, html
    assert f"{due} ms after 1970 (past year 9999)" in html
    one = get_json(d.url + "/api/queues/farq")
    assert one["waiting"][0]["score"] == due and one["info"]["next_due"] == due


def test_metrics_labels_are_distinct_and_parse(start_dashboard: Any, r: redis.Redis) -> None:
    """A name that is not UTF-8 and the ASCII spelling of its escape get different labels;
    CR, LF and NUL in a name are escaped, so prometheus_client's parser reads the scrape."""
    names = {b"\xff\xfe": 1, b"\\xff\\xfe": 2, b"cr\rq": 3, b"nul\x00q": 4, b"lf\nq": 5,
             b"back\\slash": 6}
    for name, count in names.items():
        r.execute_command("RMQ.PUSH", name, "PRIORITY", 1, *[f"m{i}" for i in range(count)])
    d = start_dashboard()
    m = scrape(d.url + "/metrics")
    waiting = {dict(k[1])["queue"]: v for k, v in m.items() if k[0] == "rmq_queue_waiting"}
    assert waiting == {"\\xff\\xfe": 1, "\\\\xff\\\\xfe": 2, "cr\\x0dq": 3,
                       "nul\\x00q": 4, "lf\\x0aq": 5, "back\\\\slash": 6}


@pytest.mark.parametrize("path", ["/api/queues/a%7Bb%7D", "/queues/a%7Bb%7D",
                                  "/queues/%7D"])
def test_an_invalid_queue_name_in_a_url_is_a_400(start_dashboard: Any, path: str) -> None:
    d = start_dashboard()
    status, body, _ = http("GET", d.url + path)
    assert status == 400 and "invalid queue name" in body, (status, body)


def test_an_invalid_queue_name_in_a_post_is_a_400(start_dashboard: Any, r: redis.Redis) -> None:
    rmq.Queue(r, "ok").push("a", priority=1)
    d = start_dashboard("--writable")
    _, page, _ = http("GET", d.url + "/queues/ok")
    status, body, _ = http("POST", d.url + "/queues/a%7Bb%7D/pause",
                           {"csrf_token": csrf_token(page)}, {"Origin": d.url})
    assert status == 400 and "invalid queue name" in body, (status, body)


@pytest.mark.parametrize("command", ["dashboard", "exporter"])
def test_a_scrape_serves_the_last_sample(start_dashboard: Any, r: redis.Redis,
                                         command: str) -> None:
    """With a sample an hour apart, scrapes read nothing from the server: RMQ.QUEUES and
    RMQ.INFO are not called again, and every scrape gives the same sample."""
    rmq.Queue(r, "s").push("a", "b", priority=1)
    d = start_dashboard("--interval", 3600, command=command)
    calls = r.info("commandstats")
    first = scrape(d.url + "/metrics")
    rmq.Queue(r, "s").push("c", priority=1)
    for _ in range(3):
        assert scrape(d.url + "/metrics") == first
    after = r.info("commandstats")
    for c in ("cmdstat_rmq.queues", "cmdstat_rmq.info"):
        assert after[c]["calls"] == calls[c]["calls"], c
    assert first[("rmq_queue_waiting", (("queue", "s"),))] == 2
    taken = first[("rmq_dashboard_sample_time_seconds", ())]
    assert abs(taken - float(r.time()[0])) < 3600
