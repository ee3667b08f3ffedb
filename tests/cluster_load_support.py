"""Traffic on a Cluster (cluster_support.Cluster) from the bench driver's `cluster` mode
(bench/driver/src/cluster.rs), every message checked, and the two events it is run through:
a quarter of the slots resharded, and a primary killed (kill -9 by its pid) for its replica
to take over. Shared by tests/test_cluster_scaleout.py (a short slice) and
bench/bench_cluster.py (the measurements): the driver is built by `make bench-driver`.

The check (see cluster.rs): nothing a PUSH reply acknowledged may be lost, and nothing may
be delivered twice unless its delivery count shows a lease ran out (or its PUSH was sent
again after a lost reply, which the driver lists as uncertain).
"""

import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import redis
from redis.crc import key_slot

from cluster_support import HASH_SLOTS, Cluster, parse_info
from server_bin import cli_binary
from server_support import REPO

DRIVER = REPO / "target" / "bench-driver" / "release" / "rmq-bench-driver"


def log(*a):
    print(*a, flush=True)


# -- the driver ------------------------------------------------------------------------

def driver_argv(seed, pids, opts):
    argv = [str(DRIVER), "cluster", "--seed", seed.addr,
            "--pids", ",".join(f"{s.port}={s.pid}" for s in pids),
            "--clk-tck", str(os.sysconf("SC_CLK_TCK"))]
    for k, v in opts.items():
        argv += [f"--{k}", str(v)]
    return argv


def stop_driver_later(stop_file, after):
    """Ends the driver's traffic `after` seconds from now (the drain follows)."""
    time.sleep(after)
    Path(stop_file).touch()


def start_driver(seed, pids, opts):
    return subprocess.Popen(driver_argv(seed, pids, opts), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def finish_driver(proc, timeout):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # our own child, by its pid
        out, err = proc.communicate()
        raise RuntimeError(f"driver did not finish in {timeout}s: {err.decode()[-2000:]}")
    if proc.returncode != 0:
        raise RuntimeError(f"driver failed ({proc.returncode}): {err.decode()[-2000:]}")
    return json.loads(out)


def run_driver(seed, pids, opts, timeout=600):
    opts = dict(opts, timeout=timeout)
    return finish_driver(start_driver(seed, pids, opts), timeout + 30)


def check(r):
    """The message check of one driver run, as a dict (see cluster.rs)."""
    keys = ("acknowledged", "uncertain", "delivered", "lost", "lost_sample",
            "redelivered_after_lease", "dup_uncounted", "dup_uncertain", "unknown_delivered",
            "foreign", "pushed", "acked")
    return {k: r[k] for k in keys}


def leftover(nodes):
    """Keys left on the primaries after the drain (an empty queue leaves none): up to 10."""
    keys = []
    for n in nodes:
        if n.alive():
            keys += [k.decode(errors="replace") for k in n.conn().keys("*")[:10]]
    return keys[:10]


def load_opts(args, **kw):
    o = dict(producers=args.producers, consumers=args.consumers, batch=100, slots=1024,
             count=100, quantum=args.quantum, backlog=args.backlog, **{"block-ms": args.block_ms})
    o.update(kw)
    return o



def wait_serving(node, timeout=60):
    """Wait until a (restarted) cluster node reports cluster_state:ok; at once for a
    standalone server."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if parse_info(node.conn().execute_command("CLUSTER", "INFO"))["cluster_state"] == "ok":
                return
        except redis.ResponseError as e:
            if "cluster support disabled" in str(e):
                return
        time.sleep(0.1)
    raise RuntimeError(f"{node.addr} not serving within {timeout}s")



# -- resharding ------------------------------------------------------------------------

def node_id(server):
    return server.conn().execute_command("CLUSTER", "MYID").decode()


def slot_count(cluster, server):
    return sum(b - a + 1 for a, b in next(x for x in cluster.view() if x["port"] == server.port)["slots"])


def reshard_run(args):
    """Traffic on --reshard-primaries primaries; after --event-at s, a quarter of the slots
    move from the first primary to the second with redis-cli --cluster reshard."""
    c = Cluster(args.reshard_primaries, 0, conf=["--cluster-node-timeout", 10000], tag="rmq-cluster-load").start()
    try:
        ps = c.primary_servers()
        src, dst = ps[0], ps[1]
        before = slot_count(c, dst)
        stop_file = os.path.join(src.dir, "stop-traffic")
        opts = load_opts(args, secs=600, timeout=900, warmup=0, **{
            "lease-ms": args.lease_ms, "drain-secs": args.lease_ms / 1000 + 10, "stop-file": stop_file})
        proc = start_driver(ps[0], ps, opts)
        time.sleep(args.event_at)
        t0 = time.time()
        p = subprocess.run([cli_binary(), "--cluster", "reshard", src.addr,
                            "--cluster-from", node_id(src), "--cluster-to", node_id(dst),
                            "--cluster-slots", str(HASH_SLOTS // 4), "--cluster-yes",
                            "--cluster-pipeline", "100"],
                           capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
        t1 = time.time()
        stop_driver_later(stop_file, args.event_after)
        if p.returncode != 0:
            raise RuntimeError(f"reshard failed: {(p.stdout + p.stderr).decode()[-2000:]}")
        r = finish_driver(proc, 900)
        after = slot_count(c, dst)
        out = dict(primaries=args.reshard_primaries, start_ms=t0 * 1000, end_ms=t1 * 1000,
                   secs=t1 - t0, slots_moved=HASH_SLOTS // 4, dst_slots_before=before, dst_slots_after=after,
                   timeline=r["timeline"], redirects=r["redirects"], errors=r["errors"],
                   check=check(r), left=leftover(c.primary_servers()), quantum=r["quantum"])
        out.update(dips(r["timeline"], t0 * 1000, t1 * 1000))
        log(f"  reshard: {HASH_SLOTS // 4} slots in {t1 - t0:.1f}s; before {out['before']:.0f} "
            f"msgs/s, during {out['during']:.0f}, lowest 1 s {out['lowest']:.0f}; "
            f"redirections {r['redirects']}; lost {r['lost']}, uncounted duplicates "
            f"{r['dup_uncounted']}, redelivered after lease {r['redelivered_after_lease']}")
        return out
    finally:
        c.stop()


def rates(timeline):
    """[(ms, acked msgs/s over the previous sample)] from the driver's timeline."""
    out = []
    for (t0, _p0, a0, *_), (t1, _p1, a1, *_) in zip(timeline, timeline[1:]):
        if t1 > t0:
            out.append((t1, (a1 - a0) * 1000 / (t1 - t0)))
    return out


def dips(timeline, start_ms, end_ms):
    """Throughput before an event, during it, and the lowest 1 s average from its start
    to 5 s after its end."""
    rs = rates(timeline)
    before = [v for t, v in rs if start_ms - 3000 <= t < start_ms]
    during = [v for t, v in rs if start_ms <= t <= end_ms]
    after = [(t, v) for t, v in rs if start_ms <= t <= end_ms + 5000]
    lowest = min((statistics.mean(v for _, v in after[i:i + 10])
                  for i in range(max(1, len(after) - 9))), default=float("nan")) if after else float("nan")
    return dict(before=statistics.mean(before) if before else float("nan"),
                during=statistics.mean(during) if during else float("nan"), lowest=lowest)


# -- failover --------------------------------------------------------------------------

def probe_key(ranges):
    """A key in one of the slots `ranges` (inclusive (a, b) pairs) hold."""
    for i in range(1_000_000):
        k = f"probe:{i}"
        if any(a <= key_slot(k.encode()) <= b for a, b in ranges):
            return k
    raise RuntimeError("no probe key")


def serves(server, key):
    """Does `server` answer for `key` as its owner (no MOVED, no CLUSTERDOWN)?"""
    try:
        c = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=0.5,
                        socket_connect_timeout=0.5)
        try:
            c.exists(key)
            return True
        finally:
            c.close()
    except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError):
        return False


def failover_run(args, fsync):
    c = Cluster(args.reshard_primaries, 1,
                     conf=["--cluster-node-timeout", args.node_timeout_ms,
                           "--appendonly", "yes", "--appendfsync", fsync], tag="rmq-cluster-load").start()
    try:
        ps = c.primaries()
        victim, _vid, ranges = ps[0]
        deadline = time.monotonic() + 30
        while not c.replicas_of(victim):  # every node learns the roles in a moment
            if time.monotonic() > deadline:
                raise RuntimeError("the primary has no replica")
            time.sleep(0.1)
        replica = c.replicas_of(victim)[0]
        key = probe_key(ranges)
        others = [s for s, _i, _r in ps[1:]]
        stop_file = os.path.join(replica.dir, "stop-traffic")
        opts = load_opts(args, secs=600, timeout=900, warmup=0, **{
            "lease-ms": args.lease_ms, "drain-secs": args.lease_ms / 1000 + 10, "stop-file": stop_file})
        proc = start_driver(others[0], [s for s, _i, _r in ps], opts)
        time.sleep(args.event_at)
        t0 = time.time()
        victim.kill9()
        while not serves(replica, key):
            if time.time() - t0 > 60:
                raise RuntimeError("the replica did not take over within 60 s")
            time.sleep(0.01)
        t1 = time.time()
        stop_driver_later(stop_file, args.event_after)
        r = finish_driver(proc, 900)
        out = dict(fsync=fsync, primaries=args.reshard_primaries,
                   node_timeout_ms=args.node_timeout_ms, kill_ms=t0 * 1000,
                   serve_ms=t1 * 1000, secs_to_serve=t1 - t0, timeline=r["timeline"],
                   redirects=r["redirects"], errors=r["errors"], check=check(r),
                   left=leftover([s for s, _i, _r in c.primaries()]))
        out.update(dips(r["timeline"], t0 * 1000, t1 * 1000))
        log(f"  failover ({fsync}): slots served again after {t1 - t0:.2f}s; lost {r['lost']} "
            f"of {r['acknowledged']} acknowledged, uncounted duplicates {r['dup_uncounted']}, "
            f"uncertain {r['uncertain']}, redelivered after lease {r['redelivered_after_lease']}")
        return out
    finally:
        c.stop()
