#!/usr/bin/env python3
"""rmq-gateway side by side with moto's server (the peer a Python user would otherwise run).

    python3 bench/bench_gateway.py [--workers 4] [--rounds 3] [--seconds 10]

Its own redis-server with the module (tests/server_support.Server), its own rmq-gateway
(tests/gateway_support.Gateway) and its own `moto_server`, each on a free 127.0.0.1 port and
stopped by pid. For each peer, --rounds rounds of:
- throughput: --workers processes, each a boto3 client looping SendMessageBatch (10),
  ReceiveMessage (10, WaitTimeSeconds 1), DeleteMessageBatch for --seconds; messages
  consumed per second, and the server's CPU per message: the peer process's utime+stime
  (/proc/<pid>/stat) and, for RMQ, Redis's (INFO cpu) over the messages consumed;
- latency: one receiver long-polling (WaitTimeSeconds 20) while a sender sends one message
  every 20 ms; send -> receive time (both in this process, monotonic clock), p50 and p99.
Medians over the rounds. boto3 costs much CPU and shares the 2 cores with the server, so
msgs/s is bounded by both; the per-message server CPU is the figure that compares servers. Writes scripts/results/bench_gateway.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import harness
from harness import Server, free_port

REPO = harness.REPO
sys.path.insert(0, str(REPO / "tests"))

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

from gateway_support import Gateway  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def client(url):
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="bench",
                        aws_secret_access_key="bench", config=Config(retries={"max_attempts": 3}, read_timeout=60))


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def worker(url, queue_url, seconds, out):
    sqs = client(url)
    done = 0
    body = "x" * 100
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sqs.send_message_batch(QueueUrl=queue_url, Entries=[{"Id": str(i), "MessageBody": body} for i in range(10)])
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
        if got:
            sqs.delete_message_batch(QueueUrl=queue_url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
        done += len(got)
    out.put(done)


def throughput(url, pid, redis_client, workers, seconds, name):
    sqs = client(url)
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    out = mp.Queue()
    cpu0 = proc_cpu(pid)
    r0 = redis_cpu(redis_client)
    t0 = time.monotonic()
    procs = [mp.Process(target=worker, args=(url, queue_url, seconds, out)) for _ in range(workers)]
    for p in procs:
        p.start()
    total = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    wall = time.monotonic() - t0
    cpu = proc_cpu(pid) - cpu0
    rcpu = (redis_cpu(redis_client) - r0) if redis_client else None
    return {"msgs_s": total / wall, "cpu_us": cpu / total * 1e6,
            "redis_us": rcpu / total * 1e6 if rcpu is not None else None}


def redis_cpu(c):
    if c is None:
        return 0.0
    info = c.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


def latency(url, name, samples=200):
    sqs = client(url)
    recv = client(url)
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sent, got = {}, {}
    stop = threading.Event()

    def receiver():
        while not stop.is_set():
            for m in recv.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=20).get("Messages", []):
                got[m["Body"]] = time.monotonic()
                recv.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
            if len(got) >= samples:
                return

    t = threading.Thread(target=receiver)
    t.start()
    time.sleep(0.5)
    for i in range(samples):
        sent[str(i)] = time.monotonic()
        sqs.send_message(QueueUrl=queue_url, MessageBody=str(i))
        time.sleep(0.02)
    t.join(60)
    stop.set()
    lat = sorted((got[k] - sent[k]) * 1000 for k in sent if k in got)
    return {"p50_ms": statistics.median(lat), "p99_ms": lat[int(len(lat) * 0.99) - 1], "n": len(lat)}


def proc_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def idle_long_polls(gw, redis_client, n):
    """n raw HTTP long polls (WaitTimeSeconds 20) held open at once: the gateway's memory
    and CPU while they wait, and whether each is answered (empty) when its time runs out."""
    import json
    import socket
    sqs = client(gw.url)
    queue_url = sqs.create_queue(QueueName="idle")["QueueUrl"]
    body = json.dumps({"QueueUrl": queue_url, "WaitTimeSeconds": 20}).encode()
    req = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.0\r\n"
           f"X-Amz-Target: AmazonSQS.ReceiveMessage\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    rss0, clients0 = proc_rss_kib(gw.proc.pid), redis_client.info("clients")["connected_clients"]
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", gw.port))
        s.sendall(req)
        socks.append(s)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with urllib.request.urlopen(gw.url + "/metrics") as h:
            held = int(next(line.split()[1] for line in h.read().decode().splitlines() if line.startswith("rmq_gateway_long_polls ")))
        if held >= n:
            break
        time.sleep(0.2)
    cpu0 = proc_cpu(gw.proc.pid)
    time.sleep(3)
    cpu_idle = (proc_cpu(gw.proc.pid) - cpu0) / 3
    rss = proc_rss_kib(gw.proc.pid)
    redis_clients = redis_client.info("clients")["connected_clients"] - clients0
    answered = 0
    for s in socks:
        s.settimeout(40)
        if s.recv(64).startswith(b"HTTP/1.1 200"):
            answered += 1
        s.close()
    return {"held": held, "rss_mib": (rss - rss0) / 1024, "cpu_pct": cpu_idle * 100, "redis_clients": redis_clients, "answered": answered}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--idle-polls", type=int, default=2000)
    ap.add_argument("--gateway-threads", type=int, default=None, help="rmq-gateway --threads (default: its own)")
    args = ap.parse_args()
    server = Server(tag="rmq-bench-gw").start()
    gw = Gateway(server, extra=["--threads", args.gateway_threads] if args.gateway_threads else []).start()
    moto_port = free_port()
    moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(moto_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    moto_url = f"http://127.0.0.1:{moto_port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client(moto_url).list_queues()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        idle = idle_long_polls(gw, server.client(), args.idle_polls)
        print("idle long polls", idle, flush=True)
        results = {"rmq-gateway": [], "moto": []}
        rc = server.client()
        for rnd in range(args.rounds):
            for name, url, pid, red in (("rmq-gateway", gw.url, gw.proc.pid, rc), ("moto", moto_url, moto.pid, None)):
                t = throughput(url, pid, red, args.workers, args.seconds, f"tp{rnd}")
                t.update(latency(url, f"lat{rnd}"))
                results[name].append(t)
                print(name, rnd, {k: round(v, 2) if isinstance(v, float) else v for k, v in t.items()}, flush=True)
    finally:
        gw.stop()
        moto.terminate()
        moto.wait(10)
        server.stop()
    med = {n: {k: (statistics.median(r[k] for r in rs) if rs[0][k] is not None else None) for k in rs[0]} for n, rs in results.items()}
    g, m = med["rmq-gateway"], med["moto"]
    lines = [
        "# rmq-gateway vs moto_server",
        "",
        f"`python3 bench/bench_gateway.py --workers {args.workers} --rounds {args.rounds} --seconds {args.seconds:g}"
        f"{f' --gateway-threads {args.gateway_threads}' if args.gateway_threads else ''}`, "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores shared with other work "
        f"(load average {os.getloadavg()[0]:.1f} at the end). Medians of {args.rounds} rounds.",
        "",
        "Throughput: each of the workers (boto3, one process each) loops SendMessageBatch (10), ReceiveMessage (10) and "
        "DeleteMessageBatch; msgs/s counts messages consumed. Server CPU per message from /proc (the peer's process) and "
        "INFO cpu (Redis). Latency: send -> receive with a long poll waiting, one send every 20 ms.",
        "",
        "| peer | msgs/s | server CPU µs/msg | Redis CPU µs/msg | send→receive p50 ms | p99 ms |",
        "|---|---|---|---|---|---|",
    ]
    for n, x in med.items():
        rcpu = f"{x['redis_us']:.1f}" if x["redis_us"] is not None else "—"
        lines.append(f"| {n} | {x['msgs_s']:.0f} | {x['cpu_us']:.1f} | {rcpu} | {x['p50_ms']:.2f} | {x['p99_ms']:.2f} |")
    lines += ["", f"Ratios: msgs/s rmq-gateway / moto = {g['msgs_s'] / m['msgs_s']:.2f}; server CPU per message "
              f"moto / rmq-gateway = {m['cpu_us'] / g['cpu_us']:.1f}.", "",
              "The load generator (boto3, 4 processes) and the server under test share this machine's 2 cores, so msgs/s "
              "is bounded by both together; the server CPU per message is the comparison that does not depend on the generator.",
              "", f"Idle long polls: {idle['held']} of {args.idle_polls} held at once (WaitTimeSeconds 20, raw HTTP): the gateway's "
              f"memory grew by {idle['rss_mib']:.1f} MiB, its CPU while they waited was {idle['cpu_pct']:.1f}% of a core, "
              f"Redis held {idle['redis_clients']} more connections; {idle['answered']} were answered (empty) when their time ran out."]
    suffix = f"_threads{args.gateway_threads}" if args.gateway_threads else ""
    out = harness.RESULTS / f"bench_gateway{suffix}.md"
    harness.write_report(out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
