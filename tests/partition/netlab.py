"""Network namespaces for partition tests: every node is a namespace of its own, attached by
a veth pair to a bridge that lives in one more namespace; every address is inside those
namespaces (the host's network is not touched). Partitions are iptables DROP rules in the
nodes' namespaces, loss and latency `tc netem` on their links (without sch_netem: loss by
iptables, latency by delay.py's NFQUEUE delayer). Processes run in a namespace
through `ip netns exec` (which execs, so the pid we keep is the program's own) and are
stopped by that pid; close() deletes exactly the namespaces made here, also after a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any, Optional

import delay

SUBNET = "10.77.0"


def available() -> Optional[str]:
    """None when namespaces can be made here, else why not (a skip reason)."""
    if os.geteuid() != 0:
        return "partition tests need root (network namespaces, iptables, tc)"
    for tool in ("ip", "iptables", "tc"):
        if shutil.which(tool) is None:
            return f"partition tests need `{tool}` (scripts/install-deps installs it)"
    probe = f"rmqprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {out.stderr.strip()}")
    return out


class Node:
    """One namespace with one address."""

    def __init__(self, lab: "Lab", name: str, index: int) -> None:
        self.lab, self.name, self.ns = lab, name, f"{lab.prefix}{name}"
        self.ip = f"{SUBNET}.{index}"
        self.index = index

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return sh("ip", "netns", "exec", self.ns, *argv, check=check)

    def spawn(self, argv: list, log: str, env: Optional[dict] = None) -> subprocess.Popen:
        with open(log, "ab") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", self.ns, *argv], stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)
        self.lab.procs.append(proc)
        return proc

    def __repr__(self) -> str:
        return f"{self.name}({self.ip})"


class Lab:
    """The bridge namespace and the nodes; a context manager that cleans up after itself."""

    def __init__(self) -> None:
        # short: an interface name is at most 15 bytes, and the names must not collide with
        # another run's (the pid)
        self.prefix = f"rp{os.getpid() % 100000}"
        self.bridge = f"{self.prefix}br"
        self.nodes: dict[str, Node] = {}
        self.procs: list[subprocess.Popen] = []
        self.namespaces: list[str] = []
        self.dir = tempfile.mkdtemp(prefix="rmq-partition-")
        self.has_netem: Optional[bool] = None      # probed on first use
        self.delayers: dict[str, subprocess.Popen] = {}    # node name -> delay.py process
        self._sigterm: Any = None

    def __enter__(self) -> "Lab":
        # A SIGTERM (a CI timeout, a kill by pid) unwinds through __exit__ too, so the
        # namespaces and processes go; only the main thread may set a handler.
        if threading.current_thread() is threading.main_thread():
            self._sigterm = signal.signal(signal.SIGTERM, _terminate)
        self._netns(self.bridge)
        sh("ip", "-n", self.bridge, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.bridge, "link", "set", "br0", "up")
        return self

    def __exit__(self, *exc) -> None:
        self.close()
        if self._sigterm is not None:
            signal.signal(signal.SIGTERM, self._sigterm)

    def _netns(self, name: str) -> None:
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")

    def add(self, name: str) -> Node:
        node = Node(self, name, len(self.nodes) + 1)
        self._netns(node.ns)
        port = f"v{node.index}"
        sh("ip", "-n", self.bridge, "link", "add", port, "type", "veth", "peer", "name", "eth0",
           "netns", node.ns)
        sh("ip", "-n", self.bridge, "link", "set", port, "master", "br0", "up")
        sh("ip", "-n", node.ns, "addr", "add", f"{node.ip}/24", "dev", "eth0")
        sh("ip", "-n", node.ns, "link", "set", "eth0", "up")
        self.nodes[name] = node
        return node

    # -- faults ----------------------------------------------------------------------
    def cut(self, side_a: list, side_b: list) -> None:
        """No packet between any node of side_a and any of side_b (both directions, dropped
        on both ends, so a half-open link cannot pass either)."""
        for a in side_a:
            for b in side_b:
                for x, y in ((a, b), (b, a)):
                    x.run("iptables", "-A", "INPUT", "-s", y.ip, "-j", "DROP")
                    x.run("iptables", "-A", "OUTPUT", "-d", y.ip, "-j", "DROP")

    def heal(self) -> None:
        """Every partition gone (the rules in these namespaces are all ours)."""
        for n in self.nodes.values():
            n.run("iptables", "-F", "INPUT")
            n.run("iptables", "-F", "OUTPUT")

    def degrade(self, nodes: list, loss_pct: int, delay_ms: int) -> str:
        """Packet loss and latency on the nodes' links with `tc netem`; on a kernel without
        sch_netem, the loss by iptables' statistic match on every packet a node receives
        (cleared by heal()) and the latency by delay.py on every packet it sends. Returns
        what was applied."""
        if self.has_netem is None:
            n = nodes[0]
            added = n.run("tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "1ms",
                          check=False)
            self.has_netem = added.returncode == 0
            n.run("tc", "qdisc", "del", "dev", "eth0", "root", check=False)
        if self.has_netem:
            for n in nodes:
                n.run("tc", "qdisc", "add", "dev", "eth0", "root", "netem", "loss",
                      f"{loss_pct}%", "delay", f"{delay_ms}ms")
            return f"netem loss {loss_pct}% delay {delay_ms} ms"
        for n in nodes:
            if loss_pct:
                n.run("iptables", "-A", "INPUT", "-m", "statistic", "--mode", "random",
                      "--probability", str(loss_pct / 100), "-j", "DROP")
            if delay_ms:
                self.delayers[n.name] = delay.start(n, delay_ms)
        return (f"{loss_pct}% loss (iptables statistic, on received packets) and {delay_ms} ms "
                "latency (delay.py: every sent packet held that long in an NFQUEUE), both "
                "packet level, as this kernel has no sch_netem")

    def undegrade(self, nodes: list) -> None:
        for n in nodes:
            n.run("tc", "qdisc", "del", "dev", "eth0", "root", check=False)
            if n.name in self.delayers:
                delay.stop(n, self.delayers.pop(n.name))
        self.heal()

    # -- cleanup ---------------------------------------------------------------------
    def stop(self, proc: subprocess.Popen, timeout: float = 10.0) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)

    def close(self) -> None:
        for p in reversed(self.procs):
            try:
                self.stop(p)
            except (OSError, subprocess.SubprocessError):
                pass
        self.procs.clear()
        for ns in reversed(self.namespaces):
            sh("ip", "netns", "del", ns, check=False)
        self.namespaces.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


def _terminate(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def wait_until(pred, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:          # the node may be unreachable or still starting
            last = e
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
