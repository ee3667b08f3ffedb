"""A Redis Cluster of 3 primaries with a replica each, in network namespaces (netlab), and
the partition scenarios of sentinel_lab run against it.

Nodes n1..n6 each run a redis-server with the module (port 6379, cluster bus 16379) in a
namespace of their own; `redis-cli --cluster create` makes n1..n3 primaries and gives each
a replica. Clients c1 and c2 each run one producer and one consumer (actor.py) through
redis-py's RedisCluster, on a topic of SLOTS queues spread over the three primaries. Each
fault cycle picks the next primary in turn (by its first slot) as the one the fault is
about: "the rest" of sentinel_lab's scenarios is its replica and the other primaries (the
majority). After a heal the run waits until every node sees the cluster ok, all agree on
who owns which slots, and every primary has one replica in sync.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from redis.crc import key_slot

from netlab import Lab, Node, wait_until
from sentinel_lab import PORT, SentinelLab

NODE_TIMEOUT_MS = 2000
#: Queues of the topic the actors use (16 random hash slots miss one of three primaries
#: with a chance of 3 * (2/3)^16, 0.05%: start_actors checks)
SLOTS = 16

#: What each setting runs: the client's durable mode (the servers' configuration is one).
MODES = {"async": {"durable": 0}, "durable 1": {"durable": 1}}

CONF = [
    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
    # failure detected in 2 s: a failover within seconds
    "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
    # a replica cut off from its primary for more than 10 node timeouts (plus the ping
    # period) does not take over by itself, its data may be old: the default, set on purpose
    "--cluster-replica-validity-factor", "10",
    # a node cut off from the majority answers nothing, reads included: it may be stale
    "--cluster-allow-reads-when-down", "no",
    # the other shards go on serving while one fails over (their data is not in question)
    "--cluster-require-full-coverage", "no",
]


def parse_nodes(text: str) -> list[dict]:
    """CLUSTER NODES -> [{id, ip, flags, master, slots}] (slots: ranges (first, last))."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 8:
            out.append({"id": f[0], "ip": f[1].split(":")[0], "flags": set(f[2].split(",")),
                        "master": f[3], "slots": [_range(r) for r in f[8:] if not r.startswith("[")]})
    return out


def _range(text: str) -> tuple:
    first, _, last = text.partition("-")
    return int(first), int(last or first)


class ClusterLab(SentinelLab):
    def __init__(self, lab: Lab, server: str, module: str, mode: str) -> None:
        self.lab, self.server, self.module, self.mode = lab, server, module, mode
        self.spec = MODES[mode]
        self.data = [lab.add(f"n{i}") for i in range(1, 7)]
        self.clients = [lab.add(n) for n in ("c1", "c2")]
        self.turn = 0

    def start(self) -> None:
        for node in self.data:
            d = Path(self.lab.dir) / node.name
            d.mkdir()
            node.spawn([self.server, "--port", str(PORT), "--bind", node.ip, "--protected-mode",
                        "no", "--dir", str(d), "--save", "", "--appendonly", "no",
                        "--repl-diskless-sync-delay", "0", *CONF, "--loadmodule", self.module],
                       str(d / "redis.log"))
        for node in self.data:
            wait_until(lambda n=node: "PONG" in self.cli(n, "PING"), 20, f"{node} up")
        made = self.clients[0].run("redis-cli", "--cluster", "create",
                                   *[f"{n.ip}:{PORT}" for n in self.data],
                                   "--cluster-replicas", "1", "--cluster-yes", check=False)
        if "[OK] All 16384 slots covered" not in made.stdout:
            raise RuntimeError(f"cluster create failed: {made.stdout}{made.stderr}")
        wait_until(self.converged, 60, "the cluster ok, a replica in sync per primary")

    # -- state, read from inside each node's namespace -----------------------------
    def view(self, node: Node) -> list[dict]:
        return parse_nodes(self.cli(node, "CLUSTER", "NODES"))

    def converged(self) -> Optional[dict]:
        """{primary ip: replica ip} when every node sees the cluster ok and no failure, all
        agree on the slots' owners, and each primary has one replica in sync; else None."""
        views = []
        for n in self.data:
            info = self.cli(n, "CLUSTER", "INFO")
            if "cluster_state:ok" not in info or "cluster_slots_ok:16384" not in info:
                return None
            view = self.view(n)
            if len(view) != len(self.data) or any(e["flags"] & {"fail", "fail?", "handshake"}
                                                  for e in view):
                return None
            views.append(view)
        owners = [sorted((e["ip"], tuple(e["slots"])) for e in v if e["slots"]) for v in views]
        if any(o != owners[0] for o in owners) or len(owners[0]) != 3:
            return None
        pairs = {}
        by_id = {e["id"]: e["ip"] for e in views[0]}
        for e in views[0]:
            if "slave" in e["flags"]:
                rep = next(n for n in self.data if n.ip == e["ip"])
                info = self.info(rep)
                if info.get("master_link_status") != "up" or \
                        info.get("master_host") != by_id.get(e["master"]):
                    return None
                pairs[by_id[e["master"]]] = e["ip"]
        return pairs if len(pairs) == 3 else None

    def primary(self) -> Node:
        """The primary this cycle's fault is about: each in turn, by its first slot."""
        wait_until(self.converged, 90, "the cluster ok with a replica per primary")
        firsts = sorted((min(e["slots"])[0], e["ip"]) for e in self.view(self.data[0])
                        if e["slots"])
        ip = firsts[self.turn % len(firsts)][1]
        self.turn += 1
        return next(n for n in self.data if n.ip == ip)

    def start_actors(self, queue: str, run_dir: Path, rate: float) -> list:
        ranges = [e["slots"] for e in self.view(self.data[0]) if e["slots"]]
        served = {i for i, rs in enumerate(ranges) for q in range(SLOTS)
                  if any(a <= key_slot(f"{queue}_{q}".encode()) <= b for a, b in rs)}
        if len(served) != len(ranges):
            raise RuntimeError(f"the topic {queue!r} does not reach every primary")
        return super().start_actors(queue, run_dir, rate)

    def where(self) -> list:
        return ["--cluster", ",".join(f"{n.ip}:{PORT}" for n in self.data),
                "--slots", str(SLOTS)]
