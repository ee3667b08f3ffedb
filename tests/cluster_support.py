"""A Redis Cluster of local servers with the RMQ module, for the tests and bench_cluster.py.

`Cluster(masters=3, replicas=1).start()` starts 6 servers (see server_support.Server) on
free ports of 127.0.0.1 (each with its cluster bus port, port + 10000, free too), each with
its own dir and `--cluster-enabled yes --cluster-config-file nodes-<port>.conf
--cluster-node-timeout 2000`, creates the cluster with
`redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`, and waits until every
node reports cluster_state:ok with all slots covered and every replica is in sync.
`stop()` stops exactly those processes, by pid.
"""

import subprocess
import time

import pytest
import redis
from redis.cluster import RedisCluster

from server_bin import cli_binary
from server_support import Server, ServerError, free_port

NODE_TIMEOUT_MS = 2000
CREATE_TIMEOUT = 60


def _text(x):
    return x.decode() if isinstance(x, bytes) else x


def parse_nodes(raw):
    """CLUSTER NODES text -> list of dicts (id, port, flags, master, link, slots)."""
    out = []
    for line in _text(raw).splitlines():
        parts = line.split()
        if len(parts) < 8:
            continue
        addr = parts[1].split("@")[0]
        port = int(addr.rsplit(":", 1)[1]) if ":" in addr and addr.rsplit(":", 1)[1] else None
        slots = []
        for s in parts[8:]:
            if s.startswith("["):
                continue  # a slot being migrated/imported
            if "-" in s:
                a, b = s.split("-")
                slots.append((int(a), int(b)))
            else:
                slots.append((int(s), int(s)))
        out.append(dict(id=parts[0], port=port, flags=set(parts[2].split(",")),
                        master=parts[3], link=parts[7], slots=slots))
    return out


def parse_info(raw):
    out = {}
    for line in _text(raw).splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


HASH_SLOTS = 16384


class Cluster:
    """conf: more server options, appended last (so they override the defaults). Fewer than
    3 primaries (which `redis-cli --cluster create` refuses) are joined by hand."""

    def __init__(self, masters=3, replicas=1, module_args=(), tag="rmq-cluster", conf=()):
        self.n_masters = masters
        self.n_replicas = replicas
        self.module_args = list(module_args)
        self.tag = tag
        self.extra = [str(c) for c in conf]
        self.nodes = []          # Server objects, in creation order
        self.create_output = ""

    # -- lifecycle -------------------------------------------------------------------
    def _conf(self, port):
        return ["--cluster-enabled", "yes",
                "--cluster-config-file", f"nodes-{port}.conf",
                "--cluster-node-timeout", NODE_TIMEOUT_MS,
                "--repl-diskless-sync-delay", 0,
                "--appendonly", "no", "--save", "", *self.extra]

    def start(self):
        try:
            self._start_nodes()
            self._create()
            self.wait_ok(timeout=30)
            self.wait_replicas_synced(timeout=30)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_nodes(self):
        taken = set()
        total = self.n_masters * (1 + self.n_replicas)
        while len(self.nodes) < total:
            port = free_port(cluster_bus=True, avoid=taken)
            taken.update((port, port + 10000))
            node = Server(conf=self._conf(port), module_args=self.module_args, port=port,
                          cluster_bus=True, tag=self.tag)
            try:
                node.start()
            except ServerError:
                in_use = "Address already in use" in node.log_text()
                node.stop()
                if in_use:
                    continue
                raise
            self.nodes.append(node)

    def _create(self):
        if self.n_masters < 3:
            return self._join_by_hand()
        argv = [cli_binary(), "--cluster", "create", *[n.addr for n in self.nodes],
                "--cluster-replicas", str(self.n_replicas), "--cluster-yes"]
        try:
            p = subprocess.run(argv, capture_output=True, timeout=CREATE_TIMEOUT,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"`redis-cli --cluster create` did not finish in "
                                 f"{CREATE_TIMEOUT}s: {e.stdout!r}")
        self.create_output = (p.stdout + p.stderr).decode("utf-8", "replace")
        if p.returncode != 0 or "[OK] All 16384 slots covered" not in self.create_output:
            raise AssertionError(f"cluster create failed ({p.returncode}):\n{self.create_output}")

    def _join_by_hand(self):
        """As `redis-cli --cluster create` would: config epochs, slot ranges, MEET, then
        REPLICATE."""
        prim = self.nodes[:self.n_masters]
        for i, node in enumerate(prim):
            a = HASH_SLOTS * i // len(prim)
            b = HASH_SLOTS * (i + 1) // len(prim) - 1
            node.conn().execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
            node.conn().execute_command("CLUSTER", "ADDSLOTSRANGE", a, b)
        for node in self.nodes[1:]:
            self.nodes[0].conn().execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        deadline = time.monotonic() + 30
        while any(int(parse_info(n.conn().execute_command("CLUSTER", "INFO"))["cluster_known_nodes"])
                  < len(self.nodes) for n in self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("nodes did not meet within 30 s")
            time.sleep(0.05)
        for j, node in enumerate(self.nodes[self.n_masters:]):
            primary = prim[j % len(prim)]
            node.conn().execute_command("CLUSTER", "REPLICATE", self.node_id(primary))

    def stop(self):
        for n in self.nodes:
            try:
                n.stop()
            except Exception:
                pass

    # -- views -----------------------------------------------------------------------
    def alive(self):
        return [n for n in self.nodes if n.alive()]

    def conn(self, node):
        return node.conn()

    def node_by_port(self, port):
        for n in self.nodes:
            if n.port == port:
                return n
        raise KeyError(port)

    def view(self, node=None):
        """CLUSTER NODES as seen by `node` (default: the first live node)."""
        node = node or self.alive()[0]
        return parse_nodes(self.conn(node).execute_command("CLUSTER", "NODES"))

    def cluster_info(self, node):
        return parse_info(self.conn(node).execute_command("CLUSTER", "INFO"))

    def primaries(self, node=None):
        """Live primaries owning slots -> list of (Server, node id, slot ranges)."""
        out = []
        for e in self.view(node):
            if "master" in e["flags"] and "fail" not in e["flags"] and e["slots"]:
                out.append((self.node_by_port(e["port"]), e["id"], e["slots"]))
        return sorted(out, key=lambda t: t[0].port)

    def primary_servers(self):
        return [s for s, _id, _ranges in self.primaries()]

    def node_id(self, node):
        return _text(self.conn(node).execute_command("CLUSTER", "MYID"))

    def keyslot(self, key):
        return int(self.conn(self.alive()[0]).execute_command("CLUSTER", "KEYSLOT", key))

    def owner_of_slot(self, slot, node=None):
        for server, _id, ranges in self.primaries(node):
            if any(a <= slot <= b for a, b in ranges):
                return server
        raise AssertionError(f"no primary owns slot {slot}")

    def owner(self, key):
        return self.owner_of_slot(self.keyslot(key))

    def replicas_of(self, primary):
        pid = self.node_id(primary)
        return [self.node_by_port(e["port"]) for e in self.view()
                if e["master"] == pid and "slave" in e["flags"] and "fail" not in e["flags"]]

    def client(self, **kw):
        """A redis-py RedisCluster client (RESP2, bytes replies)."""
        seed = self.alive()[0]
        opts = dict(host="127.0.0.1", port=seed.port, decode_responses=False, protocol=2,
                    socket_timeout=10, socket_connect_timeout=5)
        opts.update(kw)
        return RedisCluster(**opts)

    # -- waits -----------------------------------------------------------------------
    def healthy(self, nodes=None):
        nodes = nodes or self.alive()
        views = []
        for n in nodes:
            info = self.cluster_info(n)
            if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
                return False
            if int(info.get("cluster_known_nodes", 0)) != len(self.nodes):
                return False
            v = self.view(n)
            views.append(sorted((e["id"], tuple(e["slots"])) for e in v
                                if "master" in e["flags"] and e["slots"]))
        return all(v == views[0] for v in views)

    def wait_ok(self, timeout=30, nodes=None):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                if self.healthy(nodes):
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as e:
                last = e
            time.sleep(0.1)
        states = {}
        for n in nodes or self.alive():
            try:
                states[n.port] = self.cluster_info(n).get("cluster_state")
            except Exception as e:  # pragma: no cover
                states[n.port] = repr(e)
        pytest.fail(f"cluster not ok within {timeout}s: {states} (last error: {last})",
                    pytrace=False)

    def converged(self):
        """Every live node shows the same current epoch and the same config epoch and slots
        for every node."""
        seen = set()
        for n in self.alive():
            c = self.conn(n)
            epoch = parse_info(c.execute_command("CLUSTER", "INFO")).get("cluster_current_epoch")
            nodes = tuple(sorted((line.split()[0], line.split()[6], tuple(line.split()[8:]))
                                 for line in _text(c.execute_command("CLUSTER", "NODES")).splitlines()
                                 if len(line.split()) >= 8))
            seen.add((epoch, nodes))
        return len(seen) == 1

    def wait_converged(self, timeout=30):
        """Wait until the nodes agree on epochs and slots (`converged`). Before moving a
        slot again: a node that bumps its config epoch without knowing a newer one claims
        the slot with an old epoch, loses it to the newer claim and deletes its keys."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.converged():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                pass
            time.sleep(0.05)
        pytest.fail(f"cluster config did not converge within {timeout}s", pytrace=False)

    def wait_replicas_synced(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok = True
            for n in self.alive():
                info = n.conn().info("replication")
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    ok = False
            if ok:
                return
            time.sleep(0.1)
        pytest.fail(f"replicas not in sync within {timeout}s", pytrace=False)


def migrate_slot(cluster, slot, src, dst, batch=100, timeout_ms=5000):
    """Moves a hash slot from primary `src` to primary `dst` the way redis-cli does:
    SETSLOT IMPORTING on dst, MIGRATING on src, MIGRATE ... KEYS of every key in the slot
    (in batches of `batch` keys, so a queue's four keys move in one atomic MIGRATE), then
    SETSLOT NODE dst on dst, src and every other primary. Returns the keys moved."""
    src_id, dst_id = cluster.node_id(src), cluster.node_id(dst)
    s, d = src.conn(), dst.conn()
    d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    moved = []
    for _ in range(10_000):
        keys = s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch)
        if not keys:
            break
        s.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, timeout_ms, "KEYS", *keys)
        moved += keys
    d.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    s.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    for p, _id, _ranges in cluster.primaries():
        if p not in (src, dst):
            p.conn().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    return moved
