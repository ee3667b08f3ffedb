#!/usr/bin/env python3
"""docs/dashboard.png and docs/dashboard-queue.png: the dashboard over a few busy queues.

    python3 scripts/dashboard_screenshot.py [--seconds 40] [--more DIR]

Starts its own redis-server with the module (tests/server_support.Server, a free port,
stopped by pid), fills a 16-slot `orders` topic, a `mail` range queue, a `billing` queue
with dead letters (one of them binary) and a journal, a `legacy` queue whose `meta{legacy}` was
overwritten with a string (its server refuses its RMQ.INFO) and a `farq` queue due in
2^52 ms (past year 9999), runs a small producer/consumer load for `--seconds` so the charts
move, then opens `python -m rmq dashboard --writable` in headless Chromium
(tests/dashboard_support) and saves the list page and the billing queue's page (its
journal, and the timeline of one invoice that died); with
`--more DIR`, the pages of `legacy` and `farq` too, into DIR.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (REPO / "tests", REPO / "clients/python", REPO / "clients/python/tests"):
    sys.path.insert(0, str(p))

import rmq  # noqa: E402
from dashboard_support import Dashboard, browser  # noqa: E402
from server_support import Server  # noqa: E402


def load(r, stop: threading.Event) -> None:
    """Pushes in bursts and a consumer that acks most, nacks some and kills a few."""
    orders = rmq.Topic(r, "orders", 16)
    rnd = random.Random(7)
    n = 0
    while not stop.is_set():
        burst = rnd.randint(20, 120)
        orders.push(*[f"order-{n + i}" for i in range(burst)], priority=rnd.randint(1, 9))
        n += burst
        r.execute_command("RMQ.PUSH", "mail", "RANGE", 2000, f"mail-{n % 50}")
        for q in orders.queues[: rnd.randint(4, 16)]:
            for m in rmq.Queue(r, q).pop(count=rnd.randint(2, 10), lease_ms=30_000):
                roll = rnd.random()
                if roll < 0.9:
                    m.ack()
                elif roll < 0.98:
                    m.nack()
                else:
                    m.nack(dead=True)
        time.sleep(0.25)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--more", type=Path, help="also save the legacy and farq pages here")
    args = ap.parse_args()
    server = Server(tag="rmq-screenshot").start()
    dash = None
    stop = threading.Event()
    try:
        r = server.client()
        r.client_setname("billing-worker")  # the journal's `by`
        billing = rmq.Queue(r, "billing")
        billing.set_policy(retries=3, backoff_ms=500, journal=1000)
        billing.push("invoice-1017", "invoice-1018", b"\x89PNG\r\n\x1a\n\x00\xffbinary",
                     "<b>not bold</b>", priority=5)
        for m in billing.pop(count=4, lease_ms=60_000):
            m.nack(dead=True)
        billing.push("invoice-1019", "invoice-1020", priority=5)
        billing.pop(count=1, lease_ms=600_000)
        r.execute_command("RMQ.PUSH", "reports", "AT", int(time.time() * 1000) - 95_000,
                          "daily-report")
        r.execute_command("RMQ.POLICY", "reports", "SET", "paused", 1)
        r.execute_command("RMQ.PUSH", "legacy", "PRIORITY", 1, "old-job")
        r.set("meta{legacy}", "hello")
        r.execute_command("RMQ.PUSH", "farq", "DELAY", 2 ** 52, "far-future")
        worker = threading.Thread(target=load, args=(server.client(), stop), daemon=True)
        worker.start()
        dash = Dashboard(server.port, "--writable", "--interval", "1")
        dash.wait_ready()
        time.sleep(args.seconds)
        for driver in browser():
            driver.set_window_size(1400, 1000)
            driver.get(dash.url + "/")  # by name: legacy, which cannot be read, among the others
            time.sleep(3)
            driver.save_screenshot(str(REPO / "docs/dashboard.png"))
            driver.set_window_size(1400, 2300)
            driver.get(dash.url + "/queues/billing?trace=invoice-1017")
            time.sleep(1)
            driver.save_screenshot(str(REPO / "docs/dashboard-queue.png"))
            if args.more:
                for name in ("legacy", "farq"):
                    driver.set_window_size(1400, 1000)
                    driver.get(dash.url + f"/queues/{name}")
                    time.sleep(1)
                    driver.save_screenshot(str(args.more / f"dashboard-{name}.png"))
        print("wrote docs/dashboard.png and docs/dashboard-queue.png")
    finally:
        stop.set()
        if dash:
            dash.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
