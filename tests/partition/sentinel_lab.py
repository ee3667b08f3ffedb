"""A primary with two replicas under three Sentinels, in network namespaces (netlab), and the
partition scenarios run against it with producers and consumers in two client namespaces.

Nodes n1 n2 n3 each run a redis-server with the module (port 6379) and a Sentinel (26379);
n1 starts as primary. Clients c1 and c2 each run one producer and one consumer (actor.py).
`run_scenario` starts the actors on a fresh queue, applies the scenario's fault `cycles`
times (each followed by a heal and a wait until the Sentinels agree on one primary that has
both replicas in sync), drains the queue, and returns the checker's counts.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable, Optional

from checker import check, read_events
from netlab import Lab, Node, wait_until

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PORT, SENTINEL_PORT = 6379, 26379

#: What each setting runs: the client's durable mode and the servers' extra configuration.
MODES = {
    "async": {"durable": 0, "conf": []},
    "durable 1": {"durable": 1, "conf": []},
    "durable 2": {"durable": 2, "conf": []},
    "durable 1 + AOF always": {"durable": 1, "aof": True,
                               "conf": ["--appendonly", "yes", "--appendfsync", "always"]},
    "min-replicas-to-write 1": {"durable": 0,
                                "conf": ["--min-replicas-to-write", "1",
                                         "--min-replicas-max-lag", "2"]},
}


class SentinelLab:
    def __init__(self, lab: Lab, server: str, module: str, mode: str) -> None:
        self.lab, self.server, self.module, self.mode = lab, server, module, mode
        self.spec = MODES[mode]
        self.data = [lab.add(n) for n in ("n1", "n2", "n3")]
        self.clients = [lab.add(n) for n in ("c1", "c2")]

    def start(self) -> None:
        first = self.data[0]
        for node in self.data:
            d = Path(self.lab.dir) / node.name
            d.mkdir()
            argv = [self.server, "--port", str(PORT), "--bind", node.ip, "--protected-mode",
                    "no", "--dir", str(d), "--save", "", "--repl-diskless-sync-delay", "0",
                    "--loadmodule", self.module, *self.spec["conf"]]
            if node is not first:
                argv += ["--replicaof", first.ip, str(PORT)]
            node.spawn(argv, str(d / "redis.log"))
        for node in self.data:
            wait_until(lambda n=node: "PONG" in self.cli(n, "PING"), 20, f"{node} up")
        wait_until(self.replicas_synced, 30, "replicas in sync")
        for node in self.data:
            d = Path(self.lab.dir) / node.name
            conf = d / "sentinel.conf"
            conf.write_text(
                f"port {SENTINEL_PORT}\nbind {node.ip}\nprotected-mode no\ndir {d}\n"
                f"sentinel monitor rmq {first.ip} {PORT} 2\n"
                "sentinel down-after-milliseconds rmq 1000\n"
                "sentinel failover-timeout rmq 4000\n"
                "sentinel parallel-syncs rmq 2\n")
            node.spawn([self.server, str(conf), "--sentinel"], str(d / "sentinel.log"))
        wait_until(self.converged, 60, "sentinels agreeing on the primary")

    # -- state, read from inside each node's namespace -----------------------------
    def cli(self, node: Node, *args: str, port: int = PORT) -> str:
        return node.run("redis-cli", "-h", node.ip, "-p", str(port), *args, check=False).stdout

    def info(self, node: Node) -> dict:
        out = self.cli(node, "INFO", "replication")
        return dict(line.split(":", 1) for line in out.splitlines() if ":" in line)

    def sentinel_primary(self, node: Node) -> Optional[str]:
        out = self.cli(node, "SENTINEL", "get-master-addr-by-name", "rmq", port=SENTINEL_PORT)
        lines = out.split()
        return lines[0] if lines else None

    def primary(self) -> Node:
        """The node the Sentinels agree is the primary (waits for agreement)."""
        ip = wait_until(self.converged, 60, "sentinels agreeing on the primary")
        return next(n for n in self.data if n.ip == ip)

    def replicas_synced(self, primary: Optional[Node] = None) -> bool:
        primary = primary or self.data[0]
        info = self.info(primary)
        online = sum(1 for k, v in info.items() if k.startswith("slave") and "online" in v)
        return info.get("role") == "master" and online == len(self.data) - 1 and all(
            self.info(n).get("master_link_status") == "up" and self.info(n).get("master_host")
            == primary.ip for n in self.data if n is not primary)

    def converged(self) -> Optional[str]:
        """The primary's address when all Sentinels name it and both replicas follow it."""
        named = {self.sentinel_primary(n) for n in self.data}
        if len(named) != 1 or None in named:
            return None
        ip = named.pop()
        primary = next((n for n in self.data if n.ip == ip), None)
        return ip if primary is not None and self.replicas_synced(primary) else None

    # -- actors ----------------------------------------------------------------------
    def where(self) -> list:
        """The actors' arguments that say how they find the primary."""
        return ["--sentinels", ",".join(f"{n.ip}:{SENTINEL_PORT}" for n in self.data)]

    def start_actors(self, queue: str, run_dir: Path, rate: float) -> list:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "clients" / "python"), str(HERE),
                                             env.get("PYTHONPATH", "")])
        procs = []
        for c in self.clients:
            for role in ("producer", "consumer"):
                name = f"{c.name}{role[0]}"
                argv = [sys.executable, str(HERE / "actor.py"), "--role", role, "--name", name,
                        *self.where(), "--queue", queue, "--rate", str(rate),
                        "--durable", str(self.spec["durable"]),
                        "--out", str(run_dir / f"{name}.jsonl"),
                        "--stop", str(run_dir / "stop"), "--drain", str(run_dir / "drain")]
                if self.spec.get("aof"):
                    argv.append("--aof")
                procs.append((role, c.spawn(argv, str(run_dir / f"{name}.log"), env=env)))
        return procs


# -- scenarios: each applies one fault to the lab and returns when it should be healed ---
def isolated_primary(s: SentinelLab, p: Node) -> None:
    """The primary cut from its replicas and the Sentinels' majority; every client still
    reaches it (and its own Sentinel still names it), so clients keep writing to it."""
    s.lab.cut([p], [n for n in s.data if n is not p])
    time.sleep(8)


def clients_cut(s: SentinelLab, p: Node) -> None:
    """The primary cut from the clients only: no failover, clients retry until healed."""
    s.lab.cut([p], s.clients)
    time.sleep(5)


def flapping(s: SentinelLab, p: Node) -> None:
    """The link between the primary and the rest of the data nodes flaps for 8 s."""
    end = time.time() + 8
    while time.time() < end:
        s.lab.cut([p], [n for n in s.data if n is not p])
        time.sleep(0.7)
        s.lab.heal()
        time.sleep(0.7)


def split_clients(s: SentinelLab, p: Node) -> None:
    """A replica is promoted while the old primary still serves some clients: c1 reaches
    only the old primary, c2 only the majority side."""
    others = [n for n in s.data if n is not p]
    s.lab.cut([p], others + [s.clients[1]])
    s.lab.cut([s.clients[0]], others)
    time.sleep(8)


def lossy(s: SentinelLab, p: Node) -> str:
    """20% packet loss and 50 ms latency on every link, under load, for 10 s."""
    nodes = s.data + s.clients
    applied = s.lab.degrade(nodes, 20, 50)
    time.sleep(10)
    s.lab.undegrade(nodes)
    return f"in \"20% loss + 50 ms latency\", on every node and client: {applied}"


#: A scenario may return a note on what it could apply (shown with its results).
SCENARIOS: dict[str, Callable[[SentinelLab, Node], Optional[str]]] = {
    "isolated primary": isolated_primary,
    "primary cut from clients": clients_cut,
    "flapping link": flapping,
    "promoted while old primary serves clients": split_clients,
    "20% loss + 50 ms latency": lossy,
}


def run_scenario(s: SentinelLab, scenario: str, cycles: int, run_dir: Path,
                 rate: float = 50.0, settle: float = 2.0) -> dict:
    """`cycles` faults of `scenario` under load; the checker's counts plus the fault windows
    (wall-clock seconds)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    queue = "jobs-" + "".join(ch for ch in scenario if ch.isalnum())
    actors = s.start_actors(queue, run_dir, rate)
    windows, notes = [], set()
    try:
        time.sleep(settle)
        for _ in range(cycles):
            primary = s.primary()
            start = time.time()
            note = SCENARIOS[scenario](s, primary)
            if note:
                notes.add(note)
            s.lab.heal()
            windows.append((start, time.time()))
            wait_until(s.converged, 90, "one primary with both replicas after the heal")
            time.sleep(settle)
        (run_dir / "stop").touch()
        for role, proc in actors:
            if role == "producer":
                proc.wait(30)
        (run_dir / "drain").touch()
        for role, proc in actors:
            if role == "consumer":
                proc.wait(90)
    finally:
        for _, proc in actors:
            s.lab.stop(proc)
    result = check(read_events(run_dir.glob("*.jsonl")), heals=[w[1] for w in windows])
    result.update(scenario=scenario, mode=s.mode, cycles=cycles, windows=windows,
                  notes=sorted(notes))
    return result
