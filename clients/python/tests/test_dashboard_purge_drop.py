"""Purging and dropping a queue from its dashboard page (RMQ.PURGE Q [DEAD], RMQ.DROP Q):
only with --writable, only once the person has typed the queue's name; read-only, the
buttons are absent and the endpoints refuse."""

from __future__ import annotations

from typing import Any

import redis

import rmq
from dashboard_support import csrf_token, http, page_errors
from server_support import wait_for
from test_dashboard import chrome, chrome_session, flash, make_dead, start_dashboard  # noqa: F401


def a_busy_queue(r: redis.Redis, name: str) -> None:
    """3 waiting, 1 in flight, 1 dead, a policy."""
    q = rmq.Queue(r, name)
    q.set_policy(retries=5)
    make_dead(r, name, b"gone")
    q.push("w1", "w2", "w3", "f1", priority=1)
    r.execute_command("RMQ.POP", name, "COUNT", 1, "LEASE", 600_000)
    assert (r.zcard(name), r.zcard(f"dead{{{name}}}")) == (3, 1)


def confirm_and_click(driver: Any, typed: str, button: str, dead: bool = False) -> None:
    driver.find_element("css selector", "#remove summary").click()
    box = driver.find_element("id", "confirm")
    box.clear()
    box.send_keys(typed)
    if dead:
        driver.find_element("id", "purge-dead").click()
    driver.find_element("id", button).click()


def test_read_only_has_no_purge_or_drop_and_refuses_them(start_dashboard: Any,
                                                         r: redis.Redis, chrome: Any) -> None:
    a_busy_queue(r, "ro")
    d = start_dashboard()
    chrome.get(d.url + "/queues/ro")
    assert not chrome.find_elements("id", "remove")
    assert not chrome.find_elements("id", "purge") and not chrome.find_elements("id", "drop")
    for action in ("purge", "drop"):
        status, body, _ = http("POST", f"{d.url}/queues/ro/{action}",
                               {"confirm": "ro", "dead": "1"}, headers={"Origin": d.url})
        assert status == 403 and "read-only" in body, action
    assert (r.zcard("ro"), r.zcard("dead{ro}")) == (3, 1)
    assert page_errors(chrome) == []


def test_purge_and_drop_need_the_queue_name_typed(start_dashboard: Any, r: redis.Redis,
                                                  chrome: Any) -> None:
    a_busy_queue(r, "keep")
    d = start_dashboard("--writable")
    chrome.get(d.url + "/queues/keep")
    for typed, button in (("kee", "purge"), ("", "drop"), ("KEEP", "drop")):
        chrome.get(d.url + "/queues/keep")
        confirm_and_click(chrome, typed, button)
        wait_for(lambda: "type the queue's name to confirm" in flash(chrome), timeout=20,
                 interval=0.2, what="the refusal")
        assert (r.zcard("keep"), r.zcard("dead{keep}")) == (3, 1), (typed, button)
    # and without the page's CSRF token, even with the name
    status, _, _ = http("POST", d.url + "/queues/keep/drop", {"confirm": "keep"},
                        headers={"Origin": d.url})
    assert status == 403 and r.exists("dead{keep}")
    # an invalid name is refused before anything runs
    _, page, _ = http("GET", d.url + "/queues/keep")
    status, body, _ = http("POST", d.url + "/queues/a%7Bb%7D/purge",
                           {"csrf_token": csrf_token(page), "confirm": "a{b}"},
                           {"Origin": d.url})
    assert status == 400 and "invalid queue name" in body


# -- these two need RMQ.PURGE and RMQ.DROP in the module ----------------------------------

def test_purge_from_the_page(start_dashboard: Any, r: redis.Redis, chrome: Any) -> None:
    a_busy_queue(r, "full")
    d = start_dashboard("--writable")
    chrome.get(d.url + "/queues/full")
    confirm_and_click(chrome, "full", "purge")
    wait_for(lambda: flash(chrome), timeout=20, interval=0.2, what="the purge's outcome")
    assert "purged 4 message(s)" in flash(chrome), flash(chrome)
    assert r.zcard("full") == 0 and r.zcard("dead{full}") == 1
    assert r.execute_command("RMQ.PENDING", "full") == []
    assert rmq.Queue(r, "full").policy()["retries"] == 5, "the policy stays"
    confirm_and_click(chrome, "full", "purge", dead=True)
    wait_for(lambda: "purged 1 message(s), dead letters included" in flash(chrome),
             timeout=20, interval=0.2, what="the dead letters purged")
    assert r.zcard("dead{full}") == 0
    assert "no dead letters" in chrome.find_element("id", "dead-letters").text
    assert page_errors(chrome) == []


def test_drop_from_the_page(start_dashboard: Any, r: redis.Redis, chrome: Any) -> None:
    a_busy_queue(r, "doomed")
    rmq.Queue(r, "other").push("o", priority=1)
    d = start_dashboard("--writable")
    chrome.get(d.url + "/queues/doomed")
    confirm_and_click(chrome, "doomed", "drop")
    wait_for(lambda: flash(chrome), timeout=20, interval=0.2, what="the drop's outcome")
    assert "dropped queue doomed" in flash(chrome), flash(chrome)
    assert "/queues/" not in chrome.current_url, "back on the queue list"
    assert r.keys("*{doomed}*") == [] and not r.exists("doomed")
    names = r.execute_command("RMQ.QUEUES")[1]
    assert b"doomed" not in names and b"other" in names
    wait_for(lambda: chrome.execute_script(
        "return [...document.querySelectorAll('#queues tbody tr[data-name]')]"
        ".map(tr => tr.dataset.name)") == ["other"], timeout=20, interval=0.2,
        what="the list without the dropped queue")
    # dropping it again: nothing left to drop (RMQ.DROP answers 0)
    _, page, _ = http("GET", d.url + "/queues/other")
    status, _, headers = http("POST", d.url + "/queues/doomed/drop",
                              {"csrf_token": csrf_token(page), "confirm": "doomed"},
                              {"Origin": d.url})
    assert status == 303 and "had+nothing+to+drop" in headers["Location"]
    assert page_errors(chrome) == []
