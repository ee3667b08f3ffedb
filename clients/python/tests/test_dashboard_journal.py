"""A queue's journal and a message's timeline on its dashboard page, as a person meets
them in headless Chromium: the journal's rows newest first and live, filtered by event and
by text, the timeline of a message searched by its content (RMQ.TRACE) or opened from a
row, and what the page says when the journal is off or unreadable."""

from __future__ import annotations

from typing import Any

import redis
from selenium.webdriver.support.ui import Select

import rmq
from dashboard_support import http, page_errors
from server_support import wait_for
from test_dashboard import chrome, chrome_session, get_json, start_dashboard  # noqa: F401


def journal_rows(driver: Any) -> list[tuple[str, str, str]]:
    """(event, message, by) of each row of the journal table, top to bottom, read in one
    script (the section is replaced as the page updates itself)."""
    return [tuple(r) for r in driver.execute_script("""
        return [...document.querySelectorAll('#journal tbody tr[data-entry]')].map(tr => {
            const td = tr.querySelectorAll('td');
            return [tr.dataset.event, td[2].querySelector('.content').textContent,
                    td[4].textContent];
        });""")]


def entry_ids(driver: Any) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#journal tbody tr[data-entry]')]"
        ".map(tr => tr.dataset.entry);")


def timeline(driver: Any) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#timeline li[data-event]')]"
        ".map(li => li.dataset.event + ' ' + li.textContent.replace(/\\s+/g, ' ').trim());")


def a_day_of_work(server: Any, r: redis.Redis) -> None:
    """On `jq` (journal on): a pushed (due now), b pushed (due in an hour), a popped and
    acked by a client named worker-7."""
    assert r.execute_command("RMQ.POLICY", "jq", "SET", "journal", 1000) in (b"OK", "OK")
    r.execute_command("RMQ.PUSH", "jq", "DELAY", 0, "MESSAGES", "a")
    r.execute_command("RMQ.PUSH", "jq", "DELAY", 3_600_000, "MESSAGES", "b")
    worker = server.client()
    try:
        worker.client_setname("worker-7")
        [m] = rmq.Queue(worker, "jq").pop(count=1, lease_ms=60_000)
        assert m.body == b"a"
        m.ack()
    finally:
        worker.close()


def test_the_journal_shows_newest_first_updates_itself_and_filters(
        server: Any, start_dashboard: Any, r: redis.Redis, chrome: Any) -> None:
    a_day_of_work(server, r)
    pusher = str(r.client_id())
    d = start_dashboard()
    chrome.get(d.url + "/queues/jq")
    assert journal_rows(chrome) == [("acked", "a", "worker-7"), ("popped", "a", "worker-7"),
                                    ("pushed", "b", pusher), ("pushed", "a", pusher)]
    assert entry_ids(chrome) == [i.decode() for i, _ in r.xrevrange("journal{jq}")]

    # live: a new event shows at the top without a reload
    r.execute_command("RMQ.PUSH", "jq", "DELAY", 0, "MESSAGES", "c")
    wait_for(lambda: journal_rows(chrome)[:1] == [("pushed", "c", pusher)], timeout=20,
             interval=0.2, what="the new push at the top of the journal")
    assert len(journal_rows(chrome)) == 5

    # by event: every push, newest first
    Select(chrome.find_element("id", "journal-event")).select_by_value("pushed")
    chrome.find_element("css selector", "#journal-filter button").click()
    wait_for(lambda: "event=pushed" in chrome.current_url, timeout=20, interval=0.1,
             what="the filtered page")
    assert [(e, m) for e, m, _ in journal_rows(chrome)] == [("pushed", "c"), ("pushed", "b"),
                                                            ("pushed", "a")]
    # by text (the client's name, any case), with every event again
    Select(chrome.find_element("id", "journal-event")).select_by_value("")
    box = chrome.find_element("id", "journal-text")
    box.clear()
    box.send_keys("WORKER-7")
    chrome.find_element("css selector", "#journal-filter button").click()
    wait_for(lambda: "text=WORKER-7" in chrome.current_url, timeout=20, interval=0.1,
             what="the page filtered by text")
    assert journal_rows(chrome) == [("acked", "a", "worker-7"), ("popped", "a", "worker-7")]
    assert "2 matching among the newest 5 of 5 entries" in chrome.find_element(
        "id", "journal-section").text
    # the filter holds while the page updates itself: a push of another client stays out
    r.execute_command("RMQ.PUSH", "jq", "DELAY", 0, "MESSAGES", "d")
    refreshed = chrome.execute_script("return document.body.dataset.refreshed || '0'")
    wait_for(lambda: chrome.execute_script("return document.body.dataset.refreshed || '0'")
             != refreshed, timeout=20, interval=0.2, what="a live update")
    assert journal_rows(chrome) == [("acked", "a", "worker-7"), ("popped", "a", "worker-7")]
    assert page_errors(chrome) == []


def test_a_message_timeline_by_its_content_or_from_a_journal_row(
        server: Any, start_dashboard: Any, r: redis.Redis, chrome: Any) -> None:
    a_day_of_work(server, r)
    d = start_dashboard()
    chrome.get(d.url + "/queues/jq")
    box = chrome.find_element("id", "trace-input")
    box.send_keys("a")
    chrome.find_element("css selector", "#trace-form button").click()
    wait_for(lambda: chrome.find_elements("id", "timeline"), timeout=20, interval=0.1,
             what="the timeline")
    events = timeline(chrome)
    # oldest first: the reverse of RMQ.TRACE's order
    traced = r.execute_command("RMQ.TRACE", "jq", "a")
    assert [e.split(" ")[0] for e in events] == ["pushed", "popped", "acked"] == [
        dict(zip(f[::2], f[1::2]))[b"event"].decode() for _, f in reversed(traced)]
    assert "by worker-7" in events[1] and "deliveries 1" in events[1]
    assert "by worker-7" in events[2]
    # a due time where the event leaves the message waiting (a range queue)
    due = dict(zip(traced[-1][1][::2], traced[-1][1][1::2]))[b"due"]
    from rmq.dashboard.text import ms_time
    assert f"due {ms_time(int(due))}" in events[0]

    # from the journal: b's row links to b's timeline
    chrome.execute_script("""
        const tr = [...document.querySelectorAll('#journal tbody tr[data-entry]')]
            .find(tr => tr.querySelector('.content').textContent === 'b');
        tr.querySelector('a.trace-link').click();""")
    wait_for(lambda: "trace_hex=62" in chrome.current_url, timeout=20, interval=0.1,
             what="b's timeline")
    assert [e.split(" ")[0] for e in timeline(chrome)] == ["pushed"]
    assert "of b, oldest first" in chrome.find_element("id", "timeline-section").text

    # a message the journal never saw
    chrome.get(d.url + "/queues/jq?trace=never-pushed")
    assert "no event of this message" in chrome.find_element("id", "timeline").text
    assert page_errors(chrome) == []


def test_binary_messages_are_traced_by_their_bytes(start_dashboard: Any,
                                                   r: redis.Redis) -> None:
    r.execute_command("RMQ.POLICY", "bq", "SET", "journal", 100)
    r.execute_command("RMQ.PUSH", "bq", "PRIORITY", 1, "MESSAGES", b"\xff\x00<i>")
    d = start_dashboard()
    api = get_json(d.url + "/api/queues/bq/journal")
    assert [(e["event"], e["message"]["text"]) for e in api["entries"]] == [
        ("pushed", "\\xff\\x00<i>")]
    status, html, _ = http("GET", d.url + "/queues/bq?trace_hex=ff003c693e")
    assert status == 200 and "\\xff\\x00&lt;i&gt;" in html and "<i>" not in html
    assert 'data-event="pushed"><span class="when">' in html
    t = get_json(d.url + "/api/queues/bq/trace?trace_hex=ff003c693e")
    assert [e["event"] for e in t["events"]] == ["pushed"] and t["events"][0]["priority"] == "1"
    assert http("GET", d.url + "/queues/bq?trace_hex=zz")[0] == 400
    assert http("GET", d.url + "/api/queues/bq/trace")[0] == 400


def test_a_journal_that_is_off_or_unreadable(start_dashboard: Any, r: redis.Redis) -> None:
    rmq.Queue(r, "plain").push("p", priority=1)
    rmq.Queue(r, "spoilt").push("s", priority=1)
    r.execute_command("RMQ.POLICY", "spoilt", "SET", "journal", 10)
    r.delete("journal{spoilt}")
    r.set("journal{spoilt}", "not a stream")
    d = start_dashboard()
    _, html, _ = http("GET", d.url + "/queues/plain")
    assert 'id="journal-off"' in html and "RMQ.POLICY plain SET journal 1000" in html
    assert "no entries" in html
    # the journal's key of another type: said on the page, the rest still shows
    status, html, _ = http("GET", d.url + "/queues/spoilt?trace=s")
    assert status == 200 and 'id="journal-off"' not in html
    assert "journal: ResponseError: WRONGTYPE" in html
    assert "RMQ.TRACE: ResponseError: WRONGTYPE" in html
    assert '<span class="content">s</span>' in html  # the waiting message
    assert get_json(d.url + "/api/queues/spoilt/journal")["error"].startswith(
        "ResponseError: WRONGTYPE")
