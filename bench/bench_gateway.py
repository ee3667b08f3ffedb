#!/usr/bin/env python3
"""rmq-gateway side by side with ElasticMQ (what people run instead of SQS) and moto's server
(the mock a Python user would otherwise run), in one run, driven by one native generator.

    python3 bench/bench_gateway.py [--rounds 3] [--seconds 10] [--warmup 20] [--connections 8] [--quick]
    python3 bench/bench_gateway.py --from-json bench/results/bench_gateway.json   (report + plot again)

Starts, each on a free 127.0.0.1 port and stopped by pid: a redis-server with the module and
an rmq-gateway (with credentials: every request's SigV4 is checked), ElasticMQ's server
(org.elasticmq:elasticmq-server_2.13 from Maven Central through bench/elasticmq/pom.xml, on
the JDK, with a config file of its own) and `moto_server`. The servers share core 0, the
generator (bench/driver's sqs-load and sqs-latency modes: SigV4 signed by the driver itself,
kept-alive connections, never boto3) and this script core 1 (taskset), so every server has
the same one core and the generator the other.

For each round, each peer, each queue kind (standard; FIFO; priority, RMQ only: the tag
rmq:kind=priority and the attribute rmq.priority — ElasticMQ and moto have no priority queue):
- throughput: --connections threads, each looping SendMessageBatch (10), ReceiveMessage
  (10, WaitTimeSeconds 1), DeleteMessageBatch for --seconds; messages consumed per second,
  and server CPU per message: utime+stime from /proc of the gateway and of Redis (RMQ), of
  the JVM (ElasticMQ), of moto's process, over the messages consumed;
- latency at low load: one SendMessage every 20 ms (--samples of them) while a long poll
  (WaitTimeSeconds 20) waits; send -> receive p50/p99 (one process, one clock); and once a
  round, beneath it, RMQ.PUSH -> a blocked RMQ.POP on the same Redis at the same rate (the
  driver's latency mode): what Redis and the machine's scheduling add at that moment.
Before the rounds, --warmup seconds of load per peer and queue kind (the JVM's JIT).
And once: --idle-polls (10,000) raw long polls held open on the gateway at once: its memory
per poll, its CPU while they wait, and whether every one was answered (empty) at the end of
its wait rather than refused.

Medians over the rounds. Writes bench/results/bench_gateway.md, bench_gateway.png and every
round's figures as bench_gateway.json (--out elsewhere); --quick is a smoke run (about a
minute and a half) that writes to /tmp unless --out says otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import harness
from harness import Server, free_port

REPO = harness.REPO
sys.path.insert(0, str(REPO / "tests"))

import boto3  # noqa: E402  (queue setup only: the load is the driver's)
from botocore.auth import SigV4Auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

from gateway_support import Gateway  # noqa: E402
from harness.sqs_load import (DRIVER, KEY, LOAD_CORE, SECRET, SERVER_CORE, TICKS, client, create_queue,  # noqa: E402
                              pin, proc_cpu)

ELASTICMQ_POM = REPO / "bench" / "elasticmq" / "pom.xml"
ELASTICMQ_CLASSPATH = REPO / "target" / "elasticmq" / "classpath.txt"
PEERS = ("rmq-gateway", "ElasticMQ", "moto")
KINDS = ("standard", "fifo", "priority")


def proc_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def raise_fd_limit():
    """10,000 idle polls need 10,000 sockets here: the soft limit up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def wait_sqs(url, deadline_s=60, proc=None):
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            client(url).list_queues()
            return
        except Exception:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{url}: the server exited ({proc.returncode})")
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


class ElasticMq:
    """ElasticMQ's server on the JDK: the classpath Maven resolved, a config of its own
    (the port, no stats listener)."""

    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rmq-bench-elasticmq-")
        self.proc = None

    @staticmethod
    def classpath():
        if not ELASTICMQ_CLASSPATH.exists():
            ELASTICMQ_CLASSPATH.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mvn", "-B", "-q", "-ntp", "-f", str(ELASTICMQ_POM), "dependency:build-classpath",
                            f"-Dmdep.outputFile={ELASTICMQ_CLASSPATH}"], check=True)
        return ELASTICMQ_CLASSPATH.read_text().strip()

    def start(self):
        conf = os.path.join(self.dir, "elasticmq.conf")
        with open(conf, "w") as f:
            f.write('include classpath("application.conf")\n'
                    f'node-address {{ protocol = http, host = "127.0.0.1", port = {self.port}, context-path = "" }}\n'
                    f'rest-sqs {{ enabled = true, bind-port = {self.port}, bind-hostname = "127.0.0.1", sqs-limits = strict }}\n'
                    "rest-stats { enabled = false }\n")
        self.log = open(os.path.join(self.dir, "elasticmq.log"), "ab")
        self.proc = subprocess.Popen(["java", f"-Dconfig.file={conf}", "-cp", self.classpath(), "org.elasticmq.server.Main"],
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_sqs(self.url, 90, self.proc)
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def driver(mode, port, queue_url, kind, **opts):
    argv = ["taskset", "-c", str(LOAD_CORE), str(DRIVER), mode, "--endpoint", f"127.0.0.1:{port}", "--queue-url", queue_url,
            "--kind", kind, "--access-key", KEY, "--secret", SECRET]
    for k, v in opts.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout)


def throughput(peer, kind, name, args):
    queue_url = create_queue(peer["url"], name, kind)
    cpu0 = {role: proc_cpu(pid) for role, pid in peer["pids"].items()}
    r = driver("sqs-load", peer["port"], queue_url, kind, connections=args.connections, secs=peer["seconds"], batch=10)
    n = max(r["consumed"], 1)
    cpu = {role: (proc_cpu(pid) - cpu0[role]) / n * 1e6 for role, pid in peer["pids"].items()}
    return {"msgs_s": r["msgs_s"], "cpu_us": sum(cpu.values()), **{f"{role}_us": v for role, v in cpu.items()},
            "reconnects": r["connections_opened"] - r["connections"]}


def latency(peer, kind, name, args):
    queue_url = create_queue(peer["url"], name, kind)
    r = driver("sqs-latency", peer["port"], queue_url, kind, samples=args.samples, interval_ms=20)
    return {"p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"], "send_ms": r["send_p50_ms"], "lost": r["lost"]}


def redis_floor(server, samples):
    """RMQ.PUSH -> a blocked RMQ.POP on the same redis-server, at the latency runs' rate (the
    driver's latency mode; it FLUSHALLs, so it runs between the gateway's runs): what Redis
    and this machine's scheduling cost at that moment, beneath the gateway's figures."""
    argv = ["taskset", "-c", str(LOAD_CORE), str(DRIVER), "latency", "--url", f"redis://127.0.0.1:{server.port}/", "--peer",
            "rmq", "--rate", "50", "--secs", str(samples / 50), "--warmup", "0.5", "--consumers", "1", "--block-ms", "1000"]
    r = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True, timeout=300).stdout)
    return {"p50_ms": r["p50_us"] / 1000, "p99_ms": r["p99_us"] / 1000}


def signed_receive(gw, queue_url, wait):
    """One ReceiveMessage request signed by botocore (once: the idle polls all send it)."""
    body = json.dumps({"QueueUrl": queue_url, "WaitTimeSeconds": wait})
    req = AWSRequest(method="POST", url=gw.url + "/", data=body,
                     headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ReceiveMessage"})
    SigV4Auth(Credentials(KEY, SECRET), "sqs", "us-east-1").add_auth(req)
    head = "".join(f"{k}: {v}\r\n" for k, v in req.headers.items())
    return (f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{gw.port}\r\n{head}Content-Length: {len(body)}\r\n\r\n{body}").encode()


def idle_long_polls(gw, redis_pid, n, wait=20):
    """n long polls (WaitTimeSeconds `wait`) held open at once, raw sockets: the gateway's
    memory and CPU while they wait, Redis's memory, and how many were held — answered 200
    (empty) no sooner than their wait time, not refused or answered early."""
    queue_url = client(gw.url).create_queue(QueueName="idle")["QueueUrl"]
    req = signed_receive(gw, queue_url, wait)
    # No boto3 client's kept-alive connection left open: the gateway holds 10,000 at most.
    gc.collect()
    rss0, redis_rss0 = proc_rss_kib(gw.proc.pid), proc_rss_kib(redis_pid)
    sel = selectors.DefaultSelector()
    sent = {}
    t_open = time.monotonic()
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
        s.sendall(req)
        s.setblocking(False)
        sent[s] = time.monotonic()
        sel.register(s, selectors.EVENT_READ)
    opened_s = time.monotonic() - t_open
    # Settled: every poll read and waiting (the last ones were sent just now).
    time.sleep(3)
    early = sum(1 for _ in sel.select(timeout=0))
    cpu0 = proc_cpu(gw.proc.pid)
    time.sleep(3)
    cpu_idle = (proc_cpu(gw.proc.pid) - cpu0) / 3
    rss, redis_rss = proc_rss_kib(gw.proc.pid), proc_rss_kib(redis_pid)
    held = answered_early = refused = 0
    pending = dict(sent)
    deadline = time.monotonic() + wait + 30
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            try:
                data = s.recv(256)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            took = time.monotonic() - pending.pop(s)
            sel.unregister(s)
            s.close()
            if not data.startswith(b"HTTP/1.1 200"):
                refused += 1
            elif took < wait - 1:
                answered_early += 1
            else:
                held += 1
    for s in pending:
        sel.unregister(s)
        s.close()
    sel.close()
    return {"polls": n, "held": held, "early": answered_early, "refused": refused, "unanswered": len(pending),
            "readable_while_waiting": early, "open_s": opened_s,
            "rss_mib": (rss - rss0) / 1024, "kib_per_poll": (rss - rss0) / max(held, 1),
            "redis_rss_mib": (redis_rss - redis_rss0) / 1024, "cpu_pct": cpu_idle * 100}


def median(xs):
    xs = [x for x in xs if x is not None]
    return harness.median(xs) if xs else None


def verdict(ok):
    return "**PASS**" if ok else "**MISS**"


def plot(med, floor, idle, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    colors = {"rmq-gateway": "tab:blue", "ElasticMQ": "tab:orange", "moto": "tab:gray"}
    width = 0.27

    def x_of(peer, i, kind):
        """The bar's x: the peers that have this queue kind centred on its tick."""
        present = [p for p in PEERS if (p, kind) in med]
        return i + (present.index(peer) - (len(present) - 1) / 2) * width
    # msgs/s per kind, log scale (moto is ~100x below).
    a = axes[0]
    for peer in PEERS:
        xs, ys = [], []
        for i, kind in enumerate(KINDS):
            v = med.get((peer, kind), {}).get("msgs_s")
            if v:
                xs.append(x_of(peer, i, kind))
                ys.append(v)
                a.text(xs[-1], v, f"{v:,.0f}", ha="center", va="bottom", fontsize=7)
        a.bar(xs, ys, width, label=peer, color=colors[peer])
    a.set_yscale("log")
    a.set_ylim(top=max(m["msgs_s"] for m in med.values()) * 20)
    a.set_xticks(range(len(KINDS)), KINDS)
    a.set_ylabel("messages consumed / s (log)")
    a.set_title("throughput, batch 10, each server on 1 core")
    a.legend(fontsize=8, loc="upper center", ncol=3)
    # Server CPU per message, stacked gateway + Redis for RMQ.
    b = axes[1]
    for peer in PEERS:
        for i, kind in enumerate(KINDS):
            m = med.get((peer, kind))
            if not m:
                continue
            x = x_of(peer, i, kind)
            if peer == "rmq-gateway":
                b.bar(x, m["gateway_us"], width, color="tab:blue", label="rmq-gateway" if i == 0 else None)
                b.bar(x, m["redis_us"], width, bottom=m["gateway_us"], color="tab:cyan", label="its Redis" if i == 0 else None)
            else:
                b.bar(x, m["cpu_us"], width, color=colors[peer], label=peer if i == 0 else None)
            b.text(x, m["cpu_us"], f"{m['cpu_us']:.0f}", ha="center", va="bottom", fontsize=7)
    # From 1 µs: on a log axis the gateway's share at the bottom of RMQ's stack stays visible.
    b.set_yscale("log")
    b.set_ylim(1, 3e5)
    b.set_xticks(range(len(KINDS)), KINDS)
    b.set_ylabel("server CPU µs per message (log)")
    b.set_title("server CPU per message")
    b.legend(fontsize=8, loc="upper center", ncol=2)
    # Latency p50 / p99 per peer and kind.
    c = axes[2]
    rows = [(f"{'RMQ' if p == 'rmq-gateway' else p}\n{k}", med[(p, k)]) for p in PEERS for k in KINDS if (p, k) in med]
    x = range(len(rows))
    c.bar([i - 0.2 for i in x], [r[1]["p50_ms"] for r in rows], 0.4, label="p50", color="tab:blue")
    c.bar([i + 0.2 for i in x], [r[1]["p99_ms"] for r in rows], 0.4, label="p99", color="tab:orange")
    c.axhline(5, color="tab:red", ls="--", lw=1, label="target: p99 ≤ 5 ms")
    c.axhline(floor["p99_ms"], color="tab:green", ls=":", lw=1.5, label="Redis alone (no gateway): p99")
    c.set_xticks(list(x), [r[0] for r in rows], fontsize=7)
    c.set_yscale("log")
    c.set_ylabel("ms (log)")
    c.set_ylim(top=max(r[1]["p99_ms"] for r in rows) * 8)
    c.set_title("send → receive, a long poll waiting (50 msgs/s)")
    c.legend(fontsize=8, loc="upper center", ncol=2)
    fig.suptitle(f"rmq-gateway vs ElasticMQ vs moto — {idle['held']:,} idle long polls held, "
                 f"{idle['kib_per_poll']:.1f} KiB each", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10, help="each throughput run (moto's: a third of it)")
    ap.add_argument("--connections", type=int, default=8, help="load connections (driver threads)")
    ap.add_argument("--samples", type=int, default=500, help="send -> receive samples per latency run")
    ap.add_argument("--warmup", type=float, default=20, help="seconds of load per peer and queue kind before the "
                    "rounds (the JVM's JIT compiles ElasticMQ meanwhile; moto's: 3 s)")
    ap.add_argument("--idle-polls", type=int, default=10_000)
    ap.add_argument("--gateway-threads", type=int, default=1, help="rmq-gateway --threads (it has one core)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round of 2 s, 2 s of warm-up, 50 samples, 500 idle polls; "
                    "writes to /tmp unless --out is given")
    ap.add_argument("--out", help="the report (its plot and the run's figures, .json, beside it); default "
                    "bench/results/bench_gateway.md")
    ap.add_argument("--from-json", help="no run: the report and plot again from a run's saved .json")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            report(json.load(f), args.out or os.path.splitext(args.from_json)[0] + ".md")
        return
    if args.quick:
        args.rounds, args.seconds, args.samples, args.idle_polls, args.warmup = 1, 2.0, 50, 500, 2.0
    out = args.out or ("/tmp/bench_gateway_quick.md" if args.quick else harness.RESULTS / "bench_gateway.md")
    if not DRIVER.exists():
        sys.exit(f"{DRIVER} is missing: make bench-driver")
    fd_limit = raise_fd_limit()
    if fd_limit < args.idle_polls + 100:
        sys.exit(f"open files limited to {fd_limit}: {args.idle_polls} idle polls need more (ulimit -Hn)")
    os.sched_setaffinity(0, {LOAD_CORE})
    ElasticMq.classpath()

    server = Server(tag="rmq-bench-gw", pin=SERVER_CORE).start()
    gw = Gateway(server, credentials=f"{KEY} {SECRET}\n", extra=["--threads", args.gateway_threads]).start()
    pin(gw.proc.pid, SERVER_CORE)
    emq = ElasticMq()
    moto_port = free_port()
    moto = subprocess.Popen(["taskset", "-c", str(SERVER_CORE), "moto_server", "-H", "127.0.0.1", "-p", str(moto_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        emq.start()
        pin(emq.proc.pid, SERVER_CORE)
        moto_url = f"http://127.0.0.1:{moto_port}"
        wait_sqs(moto_url, 30, moto)
        peers = {
            "rmq-gateway": {"url": gw.url, "port": gw.port, "pids": {"gateway": gw.proc.pid, "redis": server.proc.pid},
                            "seconds": args.seconds, "kinds": KINDS},
            "ElasticMQ": {"url": emq.url, "port": emq.port, "pids": {"jvm": emq.proc.pid}, "seconds": args.seconds,
                          "kinds": KINDS[:2]},
            "moto": {"url": moto_url, "port": moto_port, "pids": {"moto": moto.pid}, "seconds": max(2.0, args.seconds / 3),
                     "kinds": KINDS[:2]},
        }
        # The JVM's JIT and every peer's first connections warm up outside the figures.
        for name, peer in peers.items():
            for kind in peer["kinds"]:
                throughput({**peer, "seconds": args.warmup if name != "moto" else min(3.0, args.warmup)}, kind,
                           f"warm{kind}", args)
        results, floor = {}, []
        for rnd in range(args.rounds):
            for name, peer in peers.items():
                for kind in peer["kinds"]:
                    t = throughput(peer, kind, f"tp{rnd}{kind}", args)
                    t.update(latency(peer, kind, f"lat{rnd}{kind}", args))
                    results.setdefault((name, kind), []).append(t)
                    print(name, kind, rnd, {k: round(v, 2) if isinstance(v, float) else v for k, v in t.items()}, flush=True)
                if name == "rmq-gateway":
                    floor.append(redis_floor(server, args.samples))
                    print("Redis alone", rnd, floor[-1], flush=True)
        idle = idle_long_polls(gw, server.proc.pid, args.idle_polls)
        print("idle long polls", idle, flush=True)
        with urllib.request.urlopen(gw.url + "/metrics") as h:
            unauth = [line for line in h.read().decode().splitlines() if line.startswith("rmq_gateway_unauthenticated_total")]
    finally:
        gw.stop()
        emq.stop()
        moto.terminate()
        moto.wait(10)
        server.stop()

    run = {"args": vars(args), "at": f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}", "load": os.getloadavg()[0],
           "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0],
           "rounds": [{"peer": p, "kind": k, "results": rs} for (p, k), rs in results.items()],
           "floor": floor, "idle": idle, "unauth": unauth}
    with open(os.path.splitext(str(out))[0] + ".json", "w") as f:
        json.dump(run, f, indent=1)
    report(run, out)


def report(run, out):
    """The report and the plot of a run (what main saved beside them as JSON)."""
    args = argparse.Namespace(**run["args"])
    med = {(r["peer"], r["kind"]): {k: median(x.get(k) for x in r["results"]) for k in r["results"][0]} for r in run["rounds"]}
    floor = {k: median(f[k] for f in run["floor"]) for k in ("p50_ms", "p99_ms")}
    idle, unauth = run["idle"], run["unauth"]
    cmd = (f"python3 bench/bench_gateway.py --rounds {args.rounds} --seconds {args.seconds:g} --warmup {args.warmup:g}"
           f" --connections {args.connections}"
           f" --samples {args.samples} --idle-polls {args.idle_polls} --gateway-threads {args.gateway_threads}")
    lines = [
        "# rmq-gateway vs ElasticMQ vs moto_server",
        "",
        f"`{cmd}` (`make bench-gateway`), {run['at']} UTC, "
        f"{harness.cpu_model('unknown CPU')}, {os.cpu_count()} cores shared with other work (load average "
        f"{run['load']:.1f} at the end). Medians of {args.rounds} rounds; every round's figures: "
        f"[{os.path.basename(os.path.splitext(str(out))[0])}.json]({os.path.basename(os.path.splitext(str(out))[0])}.json).",
        "",
        "Every server runs on core 0 (taskset: rmq-gateway with `--threads "
        f"{args.gateway_threads}` and its redis-server together; ElasticMQ's JVM; moto's process), the load generator "
        "on core 1: bench/driver's `sqs-load` / `sqs-latency` modes, AWS JSON 1.0 requests it signs with SigV4 itself "
        "on kept-alive connections (the gateway checks every signature; ElasticMQ and moto check none). ElasticMQ is "
        "`org.elasticmq:elasticmq-server_2.13` (bench/elasticmq/pom.xml) on the JDK "
        f"({run['java']}).",
        "",
        f"Throughput: {args.connections} connections, each looping SendMessageBatch (10 messages of 100 bytes), "
        "ReceiveMessage (10, WaitTimeSeconds 1) and DeleteMessageBatch, "
        f"{args.seconds:g} s per run (moto's: {max(2.0, args.seconds / 3):g} s); msgs/s counts messages consumed "
        "(deleted). Server CPU per message: utime + stime from /proc of each server process over the run, divided by "
        "the messages consumed. FIFO: every message its own MessageGroupId; priority: RMQ's priority queue "
        "(CreateQueue tag `rmq:kind=priority`, message attribute `rmq.priority` 0–9) — ElasticMQ and moto have none.",
        "",
        "| peer | queue | msgs/s | server CPU µs/msg | of which gateway | of which Redis | send→receive p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for peer in PEERS:
        for kind in KINDS:
            m = med.get((peer, kind))
            if m is None:
                lines.append(f"| {peer} | {kind} | n/a | n/a | | | n/a | n/a |")
                continue
            g = f"{m['gateway_us']:.1f}" if "gateway_us" in m else ""
            r = f"{m['redis_us']:.1f}" if "redis_us" in m else ""
            lines.append(f"| {peer} | {kind} | {m['msgs_s']:,.0f} | {m['cpu_us']:.1f} | {g} | {r} | "
                         f"{m['p50_ms']:.2f} | {m['p99_ms']:.2f} |")
    lines += ["", f"Latency: one SendMessage every 20 ms ({args.samples} messages; low load) while one ReceiveMessage "
              "(WaitTimeSeconds 20) waits; from before the send until the receive's reply is read, both in the driver. "
              f"Messages lost to the latency figures: {sum(m['lost'] for m in med.values()):g}. Beneath them, at the same "
              "rate on the same redis-server between the gateway's runs, RMQ.PUSH -> a blocked RMQ.POP with the driver's "
              f"Redis client (no HTTP, no gateway): p50 {floor['p50_ms']:.2f} ms, p99 {floor['p99_ms']:.2f} ms — what "
              "Redis and this shared machine's scheduling add at that moment.", ""]

    lines += ["## Targets", "", "| target | measured | |", "|---|---|---|"]
    for kind in ("standard", "fifo"):
        g, e = med[("rmq-gateway", kind)], med[("ElasticMQ", kind)]
        ratio = g["msgs_s"] / e["msgs_s"]
        lines.append(f"| {kind}: msgs/s ≥ 3× ElasticMQ's | {ratio:.2f}× ({g['msgs_s']:,.0f} vs {e['msgs_s']:,.0f}) | "
                     f"{verdict(ratio >= 3)} |")
    for kind in ("standard", "fifo"):
        g, e = med[("rmq-gateway", kind)], med[("ElasticMQ", kind)]
        ratio = g["cpu_us"] / e["cpu_us"]
        lines.append(f"| {kind}: RMQ's server CPU per message (gateway + Redis) ≤ 0.3× ElasticMQ's | {ratio:.2f}× "
                     f"({g['cpu_us']:.1f} vs {e['cpu_us']:.1f} µs) | {verdict(ratio <= 0.3)} |")
    for kind in KINDS:
        g = med[("rmq-gateway", kind)]
        lines.append(f"| {kind}: the gateway's CPU per message ≤ Redis's | {g['gateway_us'] / g['redis_us']:.2f}× "
                     f"({g['gateway_us']:.1f} vs {g['redis_us']:.1f} µs) | {verdict(g['gateway_us'] <= g['redis_us'])} |")
    for kind in KINDS:
        g = med[("rmq-gateway", kind)]
        lines.append(f"| {kind}: p99 ≤ 5 ms at low load | {g['p99_ms']:.2f} ms | {verdict(g['p99_ms'] <= 5)} |")
    lines.append(f"| {args.idle_polls:,} idle long polls held | {idle['held']:,} held, {idle['kib_per_poll']:.1f} KiB each | "
                 f"{verdict(idle['held'] >= args.idle_polls)} |")
    lines += ["", f"Idle long polls: {idle['polls']:,} raw sockets each sent one signed ReceiveMessage (WaitTimeSeconds 20) "
              f"to the gateway (opened in {idle['open_s']:.1f} s); {idle['held']:,} were held and answered 200 (empty) "
              f"when their wait ran out, {idle['early']} answered early, {idle['refused']} refused, "
              f"{idle['unanswered']} unanswered. While they waited the gateway's memory had grown by "
              f"{idle['rss_mib']:.1f} MiB ({idle['kib_per_poll']:.1f} KiB per poll), Redis's by "
              f"{idle['redis_rss_mib']:.1f} MiB, and the gateway used {idle['cpu_pct']:.1f}% of a core.",
              "", "Requests the gateway refused before authentication over the whole run (all signed by the driver or "
              "botocore, so none expected): " + ("; ".join(unauth) if unauth else "none") + "."]
    png = os.path.splitext(str(out))[0] + ".png"
    plot(med, floor, idle, png)
    lines += ["", f"![msgs/s, server CPU per message and send -> receive latency]({os.path.basename(png)})"]
    harness.write_report(out, "\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {out} and {png}")


if __name__ == "__main__":
    main()
