"""Starting rmq-gateway for the tests: the binary target/release/rmq-gateway (RMQ_GATEWAY
overrides) on a free 127.0.0.1 port against a test server, ready when its "listening" line
is printed; stopped by pid (SIGTERM, then SIGKILL if it does not exit in time)."""

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from server_support import REPO, free_port

START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


def gateway_path():
    p = Path(os.environ.get("RMQ_GATEWAY", REPO / "target" / "release" / "rmq-gateway")).resolve()
    if not p.is_file():
        pytest.fail(f"rmq-gateway not found at {p}: run `cargo build --release`", pytrace=False)
    return str(p)


class Gateway:
    def __init__(self, server, credentials=None, extra=(), listen=None, redis_url=None,
                 cluster_seeds=None):
        """`cluster_seeds` (a list of redis:// URLs) starts it with --cluster, not --redis."""
        self.cluster_seeds = cluster_seeds
        self.redis_url = None if cluster_seeds else (redis_url or f"redis://{server.addr}")
        self.credentials = credentials
        self.extra = [str(a) for a in extra]
        self.listen = listen
        self.proc = None
        self.port = None
        self.dir = tempfile.mkdtemp(prefix="rmq-gw-")
        self.outfile = os.path.join(self.dir, "out.log")

    def argv(self):
        argv = [gateway_path(), "--listen", self.listen or f"127.0.0.1:{self.port}"]
        if self.cluster_seeds:
            argv += ["--cluster", ",".join(self.cluster_seeds)]
        else:
            argv += ["--redis", self.redis_url]
        if self.credentials is not None:
            path = os.path.join(self.dir, "credentials")
            with open(path, "w") as f:
                f.write(self.credentials)
            argv += ["--credentials", path]
        return argv + self.extra

    def launch(self):
        if self.listen is None:
            self.port = free_port()
        self.proc = subprocess.Popen(self.argv(), stdout=open(self.outfile, "ab"),
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self

    def start(self):
        self.launch()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if "listening on" in self.output():
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"rmq-gateway exited: {self.output()}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"rmq-gateway did not start: {self.output()}")

    def output(self):
        with open(self.outfile, errors="replace") as f:
            return f.read()

    def wait_exit(self, timeout=STOP_TIMEOUT):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        """SIGTERM by pid; returns the exit code."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
        return self.proc.returncode if self.proc else None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def sqs(self, key="test", secret="test", region="us-east-1", **config):
        cfg = Config(retries={"total_max_attempts": 1}, read_timeout=60, **config)
        return boto3.client("sqs", endpoint_url=self.url, region_name=region,
                            aws_access_key_id=key, aws_secret_access_key=secret, config=cfg)


def error_code(exc):
    """The SQS error code of a `pytest.raises(ClientError)` result."""
    return exc.value.response["Error"]["Code"]


def error_message(exc):
    """The SQS error message of a `pytest.raises(ClientError)` result."""
    return exc.value.response["Error"]["Message"]
