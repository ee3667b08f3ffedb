#!/usr/bin/env python3
"""rmq-gateway side by side with moto's server (the peer a Python user would otherwise run).

    python3 bench/bench_gateway.py [--workers 4] [--rounds 3] [--seconds 10] [--quick]

Its own redis-server with the module (tests/server_support.Server), its own rmq-gateway
(tests/gateway_support.Gateway) and its own `moto_server`, each on a free 127.0.0.1 port and
stopped by pid. For each peer, --rounds rounds of:
- throughput: --workers processes, each a boto3 client looping SendMessageBatch (10),
  ReceiveMessage (10, WaitTimeSeconds 1), DeleteMessageBatch for --seconds; messages
  consumed per second, and the server's CPU per message: the peer process's utime+stime
  (/proc/<pid>/stat) and, for RMQ, Redis's (INFO cpu) over the messages consumed;
- latency: one receiver long-polling (WaitTimeSeconds 20) while a sender sends one message
  every 20 ms; send -> receive time (both in this process, monotonic clock), p50 and p99.
  Measured three ways, so that what the client adds is seen apart from the server: with
  boto3 (from before send_message is called until receive_message has returned the message:
  boto3's request building, signing, parsing and MD5 checks on both sides are inside), with
  raw HTTP (http.client on kept-alive connections: little more than the gateway and Redis),
  and, for RMQ, Redis alone (RMQ.PUSH -> a blocked RMQ.POP, redis-py: the floor the gateway
  stands on).
Medians over the rounds. boto3 costs much CPU and shares the 2 cores with the server, so
msgs/s is bounded by both; the per-message server CPU is the figure that compares servers.
Writes bench/results/bench_gateway.md and bench_gateway.png (--out elsewhere); --quick is a
smoke run of well under a minute that writes to /tmp unless --out says otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
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


def percentiles(lat_ms):
    lat = sorted(lat_ms)
    return {"p50_ms": statistics.median(lat), "p99_ms": lat[max(0, int(len(lat) * 0.99) - 1)], "n": len(lat)}


def send_receive(send, receive, samples):
    """send(i) sends message str(i); receive() long-polls and returns when the receive call
    returned (monotonic) and the bodies it got, then ends their deliveries (after that time:
    the delete is not part of the latency). A receiver thread polls while the sender sends
    one message every 20 ms; returns the send -> receive percentiles and the median time
    send(i) took."""
    sent, got, send_took = {}, {}, []

    def receiver():
        while len(got) < samples:
            now, now_got = receive()
            for b in now_got:
                got[b] = now

    # A daemon: if a message were lost it would wait on; the figures count what arrived.
    t = threading.Thread(target=receiver, daemon=True)
    t.start()
    time.sleep(0.5)
    for i in range(samples):
        t0 = time.monotonic()
        sent[str(i)] = t0
        send(i)
        send_took.append(time.monotonic() - t0)
        time.sleep(0.02)
    t.join(60)
    out = percentiles([(got[k] - sent[k]) * 1000 for k in sent if k in got])
    out["send_ms"] = statistics.median(send_took) * 1000
    return out


def latency(url, name, samples):
    """With boto3: what a Python SQS user sees."""
    sqs = client(url)
    recv = client(url)
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]

    def receive():
        msgs = recv.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=20).get("Messages", [])
        now = time.monotonic()
        for m in msgs:
            recv.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
        return now, [m["Body"] for m in msgs]

    return send_receive(lambda i: sqs.send_message(QueueUrl=queue_url, MessageBody=str(i)), receive, samples)


class RawSqs:
    """AWS JSON 1.0 over one kept-alive http.client connection: the client's own cost is a
    JSON dump and parse. Neither server checks signatures here (the gateway has no
    credentials), so the Authorization header is SigV4-shaped but unsigned: moto routes a
    request to SQS by its credential scope."""

    HEADERS = {"Content-Type": "application/x-amz-json-1.0",
               "Authorization": "AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/sqs/aws4_request, "
                                "SignedHeaders=host;x-amz-date, Signature=0"}

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, action, body):
        self.conn.request("POST", "/", json.dumps(body), {**self.HEADERS, "X-Amz-Target": f"AmazonSQS.{action}"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{action}: HTTP {r.status} {data[:200]!r}")
        return json.loads(data)


def latency_raw(port, name, samples):
    sender, recv = RawSqs(port), RawSqs(port)
    queue_url = sender.call("CreateQueue", {"QueueName": name})["QueueUrl"]

    def receive():
        msgs = recv.call("ReceiveMessage", {"QueueUrl": queue_url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 20}).get("Messages", [])
        now = time.monotonic()
        for m in msgs:
            recv.call("DeleteMessage", {"QueueUrl": queue_url, "ReceiptHandle": m["ReceiptHandle"]})
        return now, [m["Body"] for m in msgs]

    return send_receive(lambda i: sender.call("SendMessage", {"QueueUrl": queue_url, "MessageBody": str(i)}), receive, samples)


def latency_redis(server, name, samples):
    """RMQ.PUSH -> a blocked RMQ.POP on another connection: Redis's and redis-py's share."""
    pusher, popper = server.client(), server.client()

    def receive():
        got = popper.execute_command("RMQ.POP", name, "COUNT", 10, "LEASE", 600_000, "BLOCK", 20_000) or []
        return time.monotonic(), [m.decode() for m, _ in got]

    return send_receive(lambda i: pusher.execute_command("RMQ.PUSH", name, "DELAY", 0, str(i)), receive, samples)


# Request/response exchanges per message at batch 10: 3 HTTP requests per 10 messages, each
# with one Redis round trip.
EXCHANGES_PER_MESSAGE = 0.6


def ping_floor(server, n=20000):
    """Redis's CPU per PING, one client, no pipelining: what one request/response exchange
    over loopback TCP costs a lean server on this machine (a socket read, a write and an
    epoll wait). The gateway makes 6 such exchanges per 10 messages at batch 10 (3 HTTP
    requests and one Redis round trip for each), so its CPU per message read against this
    floor compares machines whose syscalls cost very differently."""
    c = server.client()
    before = redis_cpu(c)
    subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(server.port), "-n", str(n), "-c", "1",
                    "-t", "ping_mbulk", "-q"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (redis_cpu(c) - before) / n * 1e6


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


PEERS = ("rmq-gateway", "moto")
# Latency rows: (label, label in the plot, key prefix in a round's results).
LATENCY = (("boto3", "boto3", ""), ("raw HTTP", "raw HTTP", "raw_"),
           ("Redis alone (RMQ.PUSH -> blocked RMQ.POP)", "Redis alone", "redis_"))


def plot(med, floor, path):
    """Server CPU per message (log scale: moto is ~100x) beside the transport floor, and
    send -> receive p50/p99 by method."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    bars = [("rmq-gateway", med["rmq-gateway"]["cpu_us"]), ("its Redis", med["rmq-gateway"]["redis_us"]),
            ("moto", med["moto"]["cpu_us"]), ("floor: 6 PINGs\nper 10 msgs", EXCHANGES_PER_MESSAGE * floor)]
    a.bar([n for n, _ in bars], [v for _, v in bars], color=["tab:blue", "tab:cyan", "tab:gray", "tab:olive"])
    a.axhline(10, color="tab:red", ls="--", lw=1, label="target: gateway ≤ 10 µs")
    a.set_yscale("log")
    a.set_ylabel("CPU µs per message consumed")
    a.set_title("server CPU per message (batch 10)")
    a.legend(fontsize=8)
    for i, (_, v) in enumerate(bars):
        a.text(i, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    rows = [(f"{peer}\n{short}", med[peer][f"{k}p50_ms"], med[peer][f"{k}p99_ms"])
            for peer in PEERS for _, short, k in LATENCY if med[peer].get(f"{k}p50_ms") is not None]
    x = range(len(rows))
    b.bar([i - 0.2 for i in x], [r[1] for r in rows], 0.4, label="p50", color="tab:blue")
    b.bar([i + 0.2 for i in x], [r[2] for r in rows], 0.4, label="p99", color="tab:orange")
    b.axhline(5, color="tab:red", ls="--", lw=1, label="target: p99 ≤ 5 ms")
    b.set_xticks(list(x), [r[0] for r in rows], fontsize=7)
    b.set_ylabel("ms")
    b.set_title("send → receive, a long poll waiting")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--samples", type=int, default=200, help="send -> receive samples per latency run")
    ap.add_argument("--idle-polls", type=int, default=2000)
    ap.add_argument("--gateway-threads", type=int, default=None, help="rmq-gateway --threads (default: its own)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round of 2 s, 50 samples, 50 idle polls; "
                    "writes to /tmp unless --out is given")
    ap.add_argument("--out", help="the report (its plot beside it, .png); default bench/results/bench_gateway"
                    "[_threadsN].md")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.samples, args.idle_polls = 1, 2.0, 50, 50
    suffix = f"_threads{args.gateway_threads}" if args.gateway_threads else ""
    out = args.out or (f"/tmp/bench_gateway{suffix}_quick.md" if args.quick else harness.RESULTS / f"bench_gateway{suffix}.md")
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
        floor = statistics.median(ping_floor(server) for _ in range(3))
        print(f"Redis CPU per PING: {floor:.1f} us", flush=True)
        idle = idle_long_polls(gw, server.client(), args.idle_polls)
        print("idle long polls", idle, flush=True)
        results = {n: [] for n in PEERS}
        rc = server.client()
        for rnd in range(args.rounds):
            for name, url, port, pid, red in (("rmq-gateway", gw.url, gw.port, gw.proc.pid, rc),
                                              ("moto", moto_url, moto_port, moto.pid, None)):
                t = throughput(url, pid, red, args.workers, args.seconds, f"tp{rnd}")
                t.update(latency(url, f"lat{rnd}", args.samples))
                t.update({f"raw_{k}": v for k, v in latency_raw(port, f"raw{rnd}", args.samples).items()})
                if red is not None:
                    t.update({f"redis_{k}": v for k, v in latency_redis(server, f"redis{rnd}", args.samples).items()})
                results[name].append(t)
                print(name, rnd, {k: round(v, 2) if isinstance(v, float) else v for k, v in t.items()}, flush=True)
    finally:
        gw.stop()
        moto.terminate()
        moto.wait(10)
        server.stop()
    keys = {k for rs in results.values() for r in rs for k in r}
    med = {n: {k: harness.median(r.get(k) for r in rs) for k in keys} for n, rs in results.items()}
    g, m = med["rmq-gateway"], med["moto"]
    cmd = (f"python3 bench/bench_gateway.py --workers {args.workers} --rounds {args.rounds} --seconds {args.seconds:g}"
           f" --samples {args.samples} --idle-polls {args.idle_polls}"
           f"{f' --gateway-threads {args.gateway_threads}' if args.gateway_threads else ''}")
    lines = [
        "# rmq-gateway vs moto_server",
        "",
        f"`{cmd}`, "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores shared with other work "
        f"(load average {os.getloadavg()[0]:.1f} at the end). Medians of {args.rounds} rounds.",
        "",
        "Throughput: each of the workers (boto3, one process each) loops SendMessageBatch (10), ReceiveMessage (10) and "
        "DeleteMessageBatch; msgs/s counts messages consumed. Server CPU per message from /proc (the peer's process) and "
        "INFO cpu (Redis).",
        "",
        "| peer | msgs/s | server CPU µs/msg | Redis CPU µs/msg |",
        "|---|---|---|---|",
    ]
    for n, x in med.items():
        rcpu = f"{x['redis_us']:.1f}" if x["redis_us"] is not None else "—"
        lines.append(f"| {n} | {x['msgs_s']:.0f} | {x['cpu_us']:.1f} | {rcpu} |")
    lines += ["", f"Ratios: msgs/s rmq-gateway / moto = {g['msgs_s'] / m['msgs_s']:.2f}; server CPU per message "
              f"moto / rmq-gateway = {m['cpu_us'] / g['cpu_us']:.1f}.", "",
              f"The transport floor on this machine: Redis spends {floor:.1f} µs of CPU per PING (one client, no "
              "pipelining: a socket read, a write and an epoll wait; median of 3 runs of redis-benchmark). At batch 10 "
              "the gateway makes 6 such exchanges per 10 messages (3 HTTP requests and one Redis round trip for each: "
              f"a queue's attributes are read once a second, not per request): {EXCHANGES_PER_MESSAGE * floor:.1f} µs per message at "
              "Redis's leanness. Its "
              f"CPU per message is {g['cpu_us'] / floor:.2f} PINGs' worth; the target, 10 µs, is {10 / floor:.2f} "
              "PINGs' worth on this machine.", "",
              f"The load generator (boto3, {args.workers} processes) and the server under test share this machine's "
              "cores, so msgs/s is bounded by both together; the server CPU per message is the comparison that does not "
              "depend on the generator.", "",
              f"Latency: send -> receive with a long poll (WaitTimeSeconds 20) waiting, one send every 20 ms, {args.samples} "
              "messages, sender and receiver threads of one process timing with its monotonic clock. *boto3* counts from "
              "before send_message is called until receive_message has returned the message, so boto3's own work on both "
              "sides (building, signing, sending and parsing the requests, checking MD5s) is inside it; *raw HTTP* does the "
              "same with http.client on kept-alive connections and unsigned JSON bodies, little more than the server's own "
              "path; *Redis alone* is RMQ.PUSH to a blocked RMQ.POP with redis-py, the floor under the gateway. "
              "*send* is how long the send call itself took (its round trip).", "",
              "| peer | measured with | send→receive p50 ms | p99 ms | send p50 ms |",
              "|---|---|---|---|---|"]
    for n in PEERS:
        for label, _, k in LATENCY:
            if med[n].get(f"{k}p50_ms") is not None:
                lines.append(f"| {n} | {label} | {med[n][f'{k}p50_ms']:.2f} | {med[n][f'{k}p99_ms']:.2f} | "
                             f"{med[n][f'{k}send_ms']:.2f} |")
    lines += ["", f"Idle long polls: {idle['held']} of {args.idle_polls} held at once (WaitTimeSeconds 20, raw HTTP): the gateway's "
              f"memory grew by {idle['rss_mib']:.1f} MiB, its CPU while they waited was {idle['cpu_pct']:.1f}% of a core, "
              f"Redis held {idle['redis_clients']} more connections; {idle['answered']} were answered (empty) when their time ran out."]
    png = os.path.splitext(str(out))[0] + ".png"
    plot(med, floor, png)
    lines += ["", f"![server CPU per message and send -> receive latency]({os.path.basename(png)})"]
    harness.write_report(out, "\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {out} and {png}")


if __name__ == "__main__":
    main()
