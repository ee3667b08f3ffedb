"""Test helpers for the dashboard: start `python -m rmq dashboard|exporter` on a free
loopback port (stopped by pid), plain HTTP calls, and a headless Chromium (Debian's
chromium + chromium-driver, driven by Selenium) with a fresh profile."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from conftest import subprocess_env
from server_support import free_port

CHROMIUM = os.environ.get("RMQ_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("RMQ_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1400,1000")


def clean_env() -> dict[str, str]:
    """The child's environment without the dashboard's settings a developer may have set
    (a token there would make every request of the tests a 401)."""
    return {k: v for k, v in subprocess_env().items()
            if not k.startswith(("RMQ_DASHBOARD_", "RMQ_REDIS_"))}


class Dashboard:
    """One `python -m rmq <command>` process on 127.0.0.1:<free port>."""

    def __init__(self, redis_port: int, *args: Any, command: str = "dashboard",
                 env: Optional[dict[str, str]] = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "rmq", command, "--port", str(redis_port),
                "--listen", f"127.0.0.1:{self.port}", *map(str, args)]
        if "--interval" not in args:
            argv += ["--interval", "0.5"]
        self.log = tempfile.NamedTemporaryFile(prefix="rmq-dashboard-", suffix=".log",
                                               delete=False)
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     env={**clean_env(), **(env or {})})

    def wait_ready(self, timeout: float = 60) -> "Dashboard":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the dashboard exited ({self.proc.returncode}):\n{self.output()}")
            try:
                with urllib.request.urlopen(self.url + "/metrics", timeout=5):
                    return self
            except urllib.error.HTTPError:
                return self  # answering (e.g. 401 when auth is required)
            except OSError:
                time.sleep(0.1)
        pytest.fail(f"the dashboard did not answer within {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
        os.unlink(self.log.name)


def http(method: str, url: str, data: Optional[dict[str, str]] = None,
         headers: Optional[dict[str, str]] = None) -> tuple[int, str, Any]:
    """(status, body, headers) without following redirects; headers looked up by name in
    any case."""
    body = None
    if data is not None:
        body = urllib.parse.urlencode(data).encode()
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a: Any, **k: Any) -> None:
            return None
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=20) as resp:
            return resp.status, resp.read().decode(), resp.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace"), e.headers


def csrf_token(page_html: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', page_html)
    assert m, "the writable page carries a CSRF token"
    return m.group(1)


def browser() -> Iterator[Any]:
    """A headless Chromium through chromedriver, its profile in a fresh temporary dir."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail(f"{CHROMIUM} and {CHROMEDRIVER} are needed (scripts/install-deps installs "
                    "Debian's chromium and chromium-driver)", pytrace=False)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="rmq-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # see page_errors()
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def page_errors(driver: Any) -> list[str]:
    """The console's errors since the last call: a script error, or anything the page's
    Content-Security-Policy refused (an inline style or script would be)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
