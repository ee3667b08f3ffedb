"""Fixed latency on a namespace's outgoing packets without `sch_netem` (issue #35).

This kernel has no netem (`tc qdisc add … netem`: "Specified qdisc kind is unknown"), and
none of the qdiscs it has (tbf, htb, pfifo) hold a packet for a fixed time; eBPF's
`skb->tstamp` pacing needs fq, also absent. It does have nfnetlink_queue, so the delay is
applied at packet level, as netem would: an iptables rule in the node's namespace hands
every packet leaving its eth0 to an NFQUEUE, and this program, run inside that namespace,
gives each one its ACCEPT verdict `delay_ms` after it was queued, in order. Every protocol
(client, replication, Sentinel, cluster bus) is delayed alike and keeps its real addresses;
packet loss (iptables `statistic`) combines with it as on a real link, TCP retransmits
included.

As a program (`python3 delay.py MS`) it speaks the nfnetlink queue protocol on a raw
netlink socket (no library to install), prints "ready" once bound, and on SIGTERM lets the
packets it holds through and exits. As a module, `start(node, ms)` / `stop(node, proc)`
add and remove the rule and the process (by pid); netlab's degrade/undegrade use them.
"""

from __future__ import annotations

import collections
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:             # netlab imports this module
    from netlab import Node

QUEUE = 0           # queues are per network namespace, so every node can use queue 0
# mangle, not filter: netlab's cut/heal flush filter INPUT/OUTPUT, which must not drop it
TABLE, CHAIN = "mangle", "OUTPUT"
MATCH = ["-o", "eth0", "-j", "NFQUEUE", "--queue-num", str(QUEUE)]

# linux/netlink.h, linux/netfilter/nfnetlink.h, nfnetlink_queue.h
NETLINK_NETFILTER = 12
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NF_ACCEPT = 1
NLA_TYPE_MASK = 0x3FFF


def _attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _message(kind: int, attrs: bytes, flags: int = 0) -> bytes:
    # nfgenmsg: family AF_UNSPEC, version 0, the queue number (big endian)
    body = struct.pack("!BBH", 0, 0, QUEUE) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind,
                       NLM_F_REQUEST | flags, 0, 0) + body


def _configure(sock: socket.socket, attrs: bytes) -> None:
    """One config request, acknowledged (raises if the kernel refuses it)."""
    sock.send(_message(NFQNL_MSG_CONFIG, attrs, NLM_F_ACK))
    reply = sock.recv(65536)
    _, kind = struct.unpack_from("=IH", reply)
    if kind == NLMSG_ERROR:
        (err,) = struct.unpack_from("=i", reply, 16)
        if err:
            raise OSError(-err, f"nfqueue config refused: {os.strerror(-err)}")


def _packet_ids(data: bytes):
    """The packet ids of the queue's packet messages in one datagram."""
    off = 0
    while off + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, off)
        if length < 16:
            return
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            a = off + 20                       # past nlmsghdr and nfgenmsg
            while a + 4 <= off + length:
                alen, akind = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                if akind & NLA_TYPE_MASK == NFQA_PACKET_HDR:
                    yield struct.unpack_from("!I", data, a + 4)[0]
                    break
                a += (alen + 3) & ~3
        off += (length + 3) & ~3


class _Stopped(Exception):
    pass


def _stop(*_: Any) -> None:
    # raised, not flagged: a select() a handler returns to resumes waiting (PEP 475)
    raise _Stopped


def serve(delay_ms: float) -> None:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    # a burst must not overflow the socket (root may exceed rmem_max)
    sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)          # SO_RCVBUFFORCE
    sock.bind((0, 0))
    _configure(sock, _attr(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, 0)))
    # metadata only: the verdict needs the id, not the payload
    _configure(sock, _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)))
    _configure(sock, _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", 1 << 16)))
    signal.signal(signal.SIGTERM, _stop)
    print("ready", flush=True)
    delay = delay_ms / 1000
    held: collections.deque = collections.deque()        # (due, packet id), in queue order
    newest: Optional[int] = None

    def release(upto: int) -> None:
        # a batch verdict accepts every queued packet with an id up to `upto`: in order, and
        # also any whose notification a full socket buffer dropped
        sock.send(_message(NFQNL_MSG_VERDICT_BATCH,
                           _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, upto))))

    try:
        while True:
            timeout = max(0.0, held[0][0] - time.monotonic()) if held else None
            if select.select([sock], [], [], timeout)[0]:
                try:
                    data = sock.recv(1 << 20)
                except OSError:  # ENOBUFS: lost notifications; the next verdict covers them
                    data = b""
                now = time.monotonic()
                for pid in _packet_ids(data):
                    held.append((now + delay, pid))
                    newest = pid
            now, due = time.monotonic(), None
            while held and held[0][0] <= now:
                due = held.popleft()[1]
            if due is not None:
                release(due)
    except _Stopped:
        if newest is not None:
            release(newest)


# -- as a module: the rule and the process in a netlab node -------------------------------
def start(node: "Node", delay_ms: float) -> subprocess.Popen:
    """Starts the delayer in the node's namespace, then adds the rule (in that order: a
    queued packet with nobody bound would be dropped). Returns the process."""
    log = Path(node.lab.dir) / f"delay-{node.name}.log"
    seen = log.stat().st_size if log.exists() else 0     # the node's earlier delayers' lines
    proc = node.spawn([sys.executable, "-u", __file__, str(delay_ms)], str(log))
    deadline = time.monotonic() + 30
    while "ready" not in log.read_text()[seen:]:
        if proc.poll() is not None or time.monotonic() > deadline:
            node.lab.stop(proc)
            node.lab.procs.remove(proc)
            raise RuntimeError(f"delayer in {node} did not start: {log.read_text()[seen:]}")
        time.sleep(0.05)
    node.run("iptables", "-t", TABLE, "-A", CHAIN, *MATCH)
    return proc


def stop(node: "Node", proc: subprocess.Popen) -> None:
    """The rule first (a rule left without its delayer would drop every packet: a failure
    to delete it raises), then the process (which lets what it holds through)."""
    node.run("iptables", "-t", TABLE, "-D", CHAIN, *MATCH)
    node.lab.stop(proc)
    node.lab.procs.remove(proc)


if __name__ == "__main__":
    serve(float(sys.argv[1]))
