"""Reading the dashboard as a newcomer does, in headless Chromium: queue names in natural
order, chart legends showing the latest values without a hover, lag written one way for
every kind, and, once Redis stops answering, a banner saying since when the figures shown
are old (the test's own redis-server, stopped by its pid)."""

from __future__ import annotations

import calendar
import re
import time
from typing import Any

import redis

import rmq
from dashboard_support import Dashboard, http, page_errors
from server_support import wait_for
from test_dashboard import chrome, chrome_session, get_json, shown, start_dashboard  # noqa: F401


def row_names(driver: Any) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#queues tbody tr[data-name]')]"
        ".map(tr => tr.dataset.name);")


def legend(driver: Any, chart_id: str) -> dict[str, str]:
    """The chart's legend as shown: series label -> value."""
    return driver.execute_script("""
        const out = {};
        document.querySelectorAll(arguments[0] + ' .u-legend .u-series').forEach(tr => {
            const l = tr.querySelector('.u-label'), v = tr.querySelector('.u-value');
            if (l && v && l.textContent) out[l.textContent] = v.textContent; });
        return out;""", f"#{chart_id}")


def cell(driver: Any, name: str, col: str) -> Any:
    return driver.execute_script("""
        const tr = [...document.querySelectorAll('#queues tbody tr')]
            .find(tr => tr.dataset.name === arguments[0]);
        const td = tr && tr.querySelector('td[data-col="' + arguments[1] + '"]');
        return td ? td.textContent.trim() : null;""", name, col)


def test_names_sort_naturally_and_legends_show_the_latest_values(
        start_dashboard: Any, r: redis.Redis, chrome: Any) -> None:
    for i in (10, 2, 1, 9, 100):
        rmq.Queue(r, f"orders_{i}").push(*[f"m{j}" for j in range(i % 7 + 1)], priority=1)
    waiting = sum(i % 7 + 1 for i in (10, 2, 1, 9, 100))
    d = start_dashboard()
    chrome.get(d.url + "/")
    want = ["orders_1", "orders_2", "orders_9", "orders_10", "orders_100"]
    wait_for(lambda: row_names(chrome) == want, timeout=20, interval=0.2,
             what="the queues in natural order")
    # the sort link turns it round
    chrome.find_element("xpath", "//th/a[starts-with(text(), 'queue')]").click()
    wait_for(lambda: "desc=1" in chrome.current_url, timeout=20, interval=0.1,
             what="the descending list")
    assert row_names(chrome) == want[::-1]

    # the legends show the last sample's values; the mouse never went over a chart
    wait_for(lambda: len(get_json(d.url + "/api/history")["t"]) >= 3, timeout=20,
             interval=0.2, what="three samples")
    wait_for(lambda: legend(chrome, "chart-backlog").get("waiting") == str(waiting),
             timeout=20, interval=0.2, what="the backlog legend's latest waiting")
    backlog = legend(chrome, "chart-backlog")
    assert backlog["in flight"] == "0" and backlog["dead"] == "0"
    throughput = legend(chrome, "chart-throughput")
    assert re.search(r"\d\d:\d\d:\d\d", throughput.pop("Time")), "the latest sample's time"
    assert set(throughput) == {"pushed/s", "acked/s", "dead/s"}
    assert all(re.fullmatch(r"\d+(\.\d)?", v) for v in throughput.values()), throughput
    # it follows new samples
    rmq.Queue(r, "orders_2").push("late", priority=1)
    wait_for(lambda: legend(chrome, "chart-backlog").get("waiting") == str(waiting + 1),
             timeout=20, interval=0.2, what="the legend's new latest value")
    assert page_errors(chrome) == []


def test_lag_reads_the_same_for_every_kind(start_dashboard: Any, r: redis.Redis,
                                           chrome: Any) -> None:
    now_ms = int(r.time()[0]) * 1000
    r.execute_command("RMQ.PUSH", "late", "AT", now_ms - 95_000, "MESSAGES", "l")
    r.execute_command("RMQ.PUSH", "ontime", "DELAY", 3_600_000, "MESSAGES", "o")
    rmq.Queue(r, "prio").push("p", priority=1)
    d = start_dashboard()
    chrome.get(d.url + "/")
    wait_for(lambda: cell(chrome, "late", "lag") is not None, timeout=20, interval=0.2,
             what="the late queue's row")
    # the same words and units on the list and on the queue's page
    late = re.compile(r"1 min [3-5]\d s")
    assert late.fullmatch(cell(chrome, "late", "lag")), cell(chrome, "late", "lag")
    assert cell(chrome, "ontime", "lag") == "0.0 s"
    assert cell(chrome, "prio", "lag") == "none (priority)"
    for name, expect in (("late", late), ("ontime", re.compile(r"0\.0 s")),
                         ("prio", re.compile(r"none \(priority\)"))):
        chrome.get(d.url + f"/queues/{name}")
        assert expect.fullmatch(shown(chrome, "lag")), (name, shown(chrome, "lag"))


def test_a_stopped_redis_is_said_with_since_when_the_figures_are_old(
        start_server: Any, chrome: Any) -> None:
    own = start_server()
    c = own.client()
    rmq.Queue(c, "kept").push("k1", "k2", "k3", priority=1)
    c.close()
    d = Dashboard(own.port)
    try:
        d.wait_ready()
        chrome.get(d.url + "/queues/kept")  # read once: the page keeps what it showed
        assert shown(chrome, "waiting") == "3" and shown(chrome, "stale") == ""
        chrome.get(d.url + "/")
        wait_for(lambda: cell(chrome, "kept", "waiting") == "3", timeout=20, interval=0.2,
                 what="the queue's row")
        assert shown(chrome, "stale") == ""
        stopped_at = time.time()
        own.stop()  # by its pid (the harness never stops a server by name)

        # the list says so by itself, and keeps the last figures
        def banner() -> str:
            text = shown(chrome, "stale")
            return text if "Redis unreachable since" in text else ""
        text = wait_for(banner, timeout=30, interval=0.2, what="the stale banner")
        assert "the figures on this page are from" in text and "ConnectionError" in text
        assert cell(chrome, "kept", "waiting") == "3"
        since = re.search(r"since (\S+ \S+)Z", text).group(1)
        since_s = calendar.timegm(time.strptime(since.split(".")[0], "%Y-%m-%d %H:%M:%S"))
        assert since_s >= int(stopped_at) - 1, (since, stopped_at)
        # the age grows as the page updates itself
        age = wait_for(lambda: re.search(r"(\d+\.\d) s old", shown(chrome, "stale")),
                       timeout=20, interval=0.2, what="the figures' age")
        wait_for(lambda: (m := re.search(r"(\d+\.\d) s old", shown(chrome, "stale")))
                 and float(m.group(1)) > float(age.group(1)), timeout=20, interval=0.3,
                 what="the age growing")
        # the queue's page shows what it last read, marked the same way
        chrome.get(d.url + "/queues/kept")
        assert "Redis unreachable since" in shown(chrome, "stale")
        assert shown(chrome, "waiting") == "3"
        # a page never read says so; /metrics fails for Prometheus to see
        status, html, _ = http("GET", d.url + "/queues/never-read")
        assert status == 503 and "Redis unreachable since" in html
        assert http("GET", d.url + "/metrics")[0] == 503
        assert page_errors(chrome) == []
    finally:
        d.stop()
