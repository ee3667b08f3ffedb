"""What the SQS benchmarks share (bench_gateway.py, perf_gateway.py): bench/driver's binary
and its credentials, the cores the servers and the load are pinned to, an SDK client for
setting queues up (never for load), and a process's CPU time from /proc."""

import os
import subprocess

import boto3
from botocore.config import Config

from server_support import REPO  # tests/ is on sys.path once harness is imported

TICKS = os.sysconf("SC_CLK_TCK")
DRIVER = REPO / "target" / "bench-driver" / "release" / "rmq-bench-driver"
KEY, SECRET = "bench", "bench-secret"
SERVER_CORE, LOAD_CORE = 0, 1


def client(url):
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, config=Config(retries={"max_attempts": 3}, read_timeout=60))


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def pin(pid, core):
    """Every thread of `pid` (and so the threads it starts later) onto `core`."""
    subprocess.run(["taskset", "-a", "-p", "-c", str(core), str(pid)], check=True, stdout=subprocess.DEVNULL)


def create_queue(url, name, kind):
    sqs = client(url)
    if kind == "fifo":
        return sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    if kind == "priority":
        return sqs.create_queue(QueueName=name, tags={"rmq:kind": "priority"})["QueueUrl"]
    return sqs.create_queue(QueueName=name)["QueueUrl"]
