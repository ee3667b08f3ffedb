#!/usr/bin/env python3
"""make partitions (issue #35): every partition scenario of tests/partition against a primary
with two replicas under three Sentinels, in network namespaces, in each durability setting
(async, durable 1, durable 2, durable 1 + AOF always, min-replicas-to-write 1), and against
a 3-primary Redis Cluster with a replica each (async, durable 1), under load from the real
Python client; the Jepsen-style checker counts, per scenario and setting, acknowledged
pushes lost, deliveries after a confirmed ACK, duplicates and the time to recover.

Writes bench/results/partitions.md and partitions.png (throughput and
acknowledged-but-lost over time, fault windows shaded). Needs root. Runs the server given
by --server (default: Redis 8.2 from scripts/install-server, which has WAITAOF). Exits 1
when a durable setting that waits on every replica lost an acknowledged push or delivered
after a confirmed ACK (the other durable settings' losses are counted and shown).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests" / "partition")]

import cluster_lab  # noqa: E402
import sentinel_lab  # noqa: E402
from netlab import Lab, available  # noqa: E402
from sentinel_lab import SCENARIOS, run_scenario  # noqa: E402

RESULTS = REPO / "bench" / "results"
DURABLE = {"durable 1": 1, "durable 2": 2, "durable 1 + AOF always": 1}
#: Replicas of each primary. Durable mode promises no acknowledged loss only when it waits on
#: every one of them: WAIT cannot say which replicas confirmed, and a Sentinel may promote
#: one that did not (it does not fence the old primary, whose other replica went on
#: confirming; that replica's full resync from the promoted one drops those pushes).
REPLICAS = {"sentinel": 2, "cluster": 1}


def promised(r: dict) -> bool:
    """Whether the run's setting is one durable mode promises no loss for."""
    return DURABLE.get(r["mode"], 0) >= REPLICAS[r["topology"]]
#: The topologies: their lab and settings.
TOPOLOGIES = {"sentinel": (sentinel_lab.SentinelLab, sentinel_lab.MODES),
              "cluster": (cluster_lab.ClusterLab, cluster_lab.MODES)}
#: Every setting of any topology, in order.
MODES = list(dict.fromkeys(m for _, modes in TOPOLOGIES.values() for m in modes))


def run_mode(topology: str, server: str, module: str, mode: str, scenarios: list,
             cycles: int, work: Path) -> list[dict]:
    out = []
    with Lab() as lab:
        s = TOPOLOGIES[topology][0](lab, server, module, mode)
        s.start()
        for i, scenario in enumerate(scenarios):
            t = time.time()
            r = run_scenario(s, scenario, cycles,
                             work / f"{topology}-{mode}-{i}".replace(" ", "_"))
            r["topology"] = topology
            print(f"  {mode:24} {scenario:44} acked {r['acknowledged']:6} lost {r['lost']:4} "
                  f"after-ack {r['after_ack']:3} (+{r['after_ack_repushed']} re-pushed) dup {r['duplicates']:4} "
                  f"recovery {fmt_recovery(r['recovery_s'])} ({time.time() - t:.0f} s)",
                  flush=True)
            out.append(r)
    return out


def fmt_recovery(values: list) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "none"
    text = f"{statistics.median(known):.1f} s / {max(known):.1f} s"
    return text + (f" ({len(values) - len(known)} never)" if len(known) < len(values) else "")


#: Scenario labels on the plot.
SHORT = {"isolated primary": "isolated", "primary cut from clients": "cut from clients",
         "flapping link": "flapping", "promoted while old primary serves clients": "split",
         "20% loss + 50 ms latency": "loss"}


def plot(results: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(dict.fromkeys(setting(r) for r in results))
    fig, axes = plt.subplots(len(settings), 1, figsize=(13, 2.8 * len(settings)), squeeze=False)
    for ax, name in zip(axes[:, 0], settings):
        rs = [r for r in results if setting(r) == name]
        t0 = min(min(r["ack_times"], default=time.time()) for r in rs)
        for r in rs:
            if not r["ack_times"]:
                continue
            # each scenario's own span: between scenarios the actors are set up and drained
            first, last = int(r["ack_times"][0] - t0), int(r["ack_times"][-1] - t0)
            acked = [0] * (last - first + 1)
            for t in r["ack_times"]:
                acked[int(t - t0) - first] += 1
            ax.plot(range(first, last + 1), acked, color="tab:blue", lw=1)
            ax.text(first, 104, SHORT[r["scenario"]], fontsize=7, va="bottom")
            lost: dict[int, int] = {}
            for t in r["lost_times"]:
                lost[int(t - t0)] = lost.get(int(t - t0), 0) + 1
            ax.bar(list(lost), list(lost.values()), color="red", width=1.0)
            for a, b in r["windows"]:
                ax.axvspan(a - t0, b - t0, color="orange", alpha=0.25, lw=0)
        total = sum(r["lost"] for r in rs)
        ax.set_title(f"{name}: acknowledged pushes / s (blue), acknowledged then lost by ack "
                     f"time (red, {total} in all); orange: faults", fontsize=9, pad=12)
        ax.set_ylim(0, 115)
        ax.set_ylabel("messages / s")
    axes[-1, 0].set_xlabel("seconds since the setting's first push (scenarios back to back)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def setting(r: dict) -> str:
    return f"{r['topology']}, {r['mode']}"


def write_md(results: list[dict], args, server_label: str, elapsed: float, path: Path) -> None:
    cycles = sum(r["cycles"] for r in results)
    # a run of some settings or scenarios only says so, and is not `make partitions`
    filters = "".join(f" --{name} " + " ".join(shlex.quote(v) for v in chosen)
                      for name, chosen, every in (("topologies", args.topologies, TOPOLOGIES),
                                                  ("modes", args.modes, MODES),
                                                  ("scenarios", args.scenarios, SCENARIOS))
                      if chosen != list(every))
    command = f"`python3 scripts/partitions.py --cycles {args.cycles}{filters}`"
    lines = [
        "# Partitions: acknowledged pushes lost, per durability setting",
        "",
        f"{command if filters else f'`make partitions` ({command})'}, "
        f"{server_label}, {cycles} fault cycles in {elapsed / 60:.1f} min, on this shared "
        "2-core machine. Each node in its own network namespace on one bridge; two client "
        "namespaces, each with a producer (50 pushes/s, every failed push retried with the "
        "same content) and a consumer (POP COUNT 20, lease 3 s, ACK; durable pops and ACKs in "
        "the durable settings), all through the Python client. Faults: iptables DROP rules in "
        "the nodes' namespaces; loss and latency by `tc netem` where the kernel has it, else "
        "as noted under the table. At the end the consumers "
        "drain the queues and read their keys.",
        "",
        "- **sentinel**: a primary and two replicas under three Sentinels (quorum 2, "
        "down-after 1 s), one queue, redis-py's Sentinel support; after each heal the run "
        "waits until the Sentinels agree on one primary with both replicas in sync.",
        "- **cluster**: a Redis Cluster of 3 primaries with a replica each "
        f"(cluster-node-timeout {cluster_lab.NODE_TIMEOUT_MS} ms, "
        "cluster-replica-validity-factor 10, cluster-allow-reads-when-down no, "
        "cluster-require-full-coverage no), redis-py's RedisCluster; the producers push "
        f"into a topic of {cluster_lab.SLOTS} queues spread over the three primaries, the "
        "consumers pop each queue in turn. Each cycle faults the next primary in turn (\"the "
        "rest\" below: its replica and the other primaries, the majority); after each heal "
        "the run waits until every node sees the cluster ok, all agree on the slots' owners "
        "and every primary has a replica in sync.",
        "",
        "Scenarios: **isolated primary**: cut from the rest while every client still reaches "
        "it; **primary cut from clients**: from the clients only; **flapping link**: the "
        "primary's link to the rest cut and restored every 0.7 s for 8 s; **promoted while "
        "old primary serves clients**: one client reaches only the old primary, the other "
        "only the rest, which promotes a replica; **20% loss + 50 ms latency**: on every node and client, under load.",
        "",
        "- **lost**: pushes acknowledged to the producer that no consumer got and that are "
        "not in the queue at the end;",
        "- **after ack**: deliveries of a message by a POP sent after an ACK of it was "
        "confirmed (a POP in flight during the ACK may return it); "
        "**re-pushed**: the same, for a message that a push may have queued again (a push "
        "attempt that ended after the acked copy's POP was sent: a push of content in "
        "flight adds a new copy, the contract; or a push of unknown outcome, connection lost or "
        "timed out, which can reach the server after the heal): a new copy, not an ACK "
        "undone;",
        "- **duplicates**: deliveries beyond a message's first (at least once allows them);",
        "- durable settings that wait on **every** replica of the primary (Sentinel: durable 2; "
        "cluster: durable 1) are the ones durable mode promises no loss for; durable 1 with two "
        "replicas under Sentinel does not: WAIT cannot say which replica confirmed, and Sentinel "
        "may promote the other one while the old primary, not fenced, goes on writing to the "
        "first; when that replica then resyncs in full from the promoted one, the pushes it "
        "confirmed are gone;",
        "- **recovery**: from the heal until every queue took an acknowledged push again, "
        "median / worst.",
        "",
        "| topology | setting | scenario | cycles | acknowledged | lost | after ack | "
        "re-pushed | duplicates | recovery |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(f"| {r['topology']} | {r['mode']} | {r['scenario']} | {r['cycles']} | {r['acknowledged']} | "
                     f"**{r['lost']}** | {r['after_ack']} | {r['after_ack_repushed']} | "
                     f"{r['duplicates']} | "
                     f"{fmt_recovery(r['recovery_s'])} |")
    notes = sorted({n for r in results for n in r["notes"]})
    if notes:
        lines += ["", "Applied here: " + "; ".join(notes) + "."]
    lines += ["", "Totals per setting:", "", "| topology, setting | cycles | acknowledged | "
              "lost | after ack | duplicates |", "|---|---:|---:|---:|---:|---:|"]
    for name in dict.fromkeys(setting(r) for r in results):
        rs = [r for r in results if setting(r) == name]
        lines.append(f"| {name} | {sum(r['cycles'] for r in rs)} | "
                     f"{sum(r['acknowledged'] for r in rs)} | **{sum(r['lost'] for r in rs)}** | "
                     f"{sum(r['after_ack'] for r in rs)} | {sum(r['duplicates'] for r in rs)} |")
    lines += ["", f"![throughput and acknowledged-but-lost over time]"
              f"({path.with_suffix('.png').name})", ""]
    path.write_text("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=2, help="faults per scenario and setting")
    ap.add_argument("--server", help="server binary (default: Redis 8.2, install-server)")
    ap.add_argument("--topologies", nargs="*", default=list(TOPOLOGIES), choices=list(TOPOLOGIES))
    ap.add_argument("--modes", nargs="*", default=MODES, choices=MODES,
                    help="settings to run (each topology runs those it has)")
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=list(SCENARIOS))
    ap.add_argument("--out", type=Path, default=RESULTS / "partitions.md")
    args = ap.parse_args()
    reason = available()
    if reason:
        print(f"partitions: {reason}", file=sys.stderr)
        return 2
    server = args.server or subprocess.run(
        ["bash", str(REPO / "scripts" / "install-server"), "redis-8.2"], check=True,
        capture_output=True, text=True).stdout.strip().splitlines()[-1]
    label = subprocess.run([server, "--version"], capture_output=True,
                           text=True).stdout.split(" v=")[1].split()[0]
    module = str(REPO / "target" / "release" / "librmq.so")
    start = time.time()
    results = []
    with tempfile.TemporaryDirectory(prefix="rmq-partitions-") as work:
        for topology in args.topologies:
            for mode in [m for m in TOPOLOGIES[topology][1] if m in args.modes]:
                print(f"{topology}, {mode}:", flush=True)
                results += run_mode(topology, server, module, mode, args.scenarios,
                                    args.cycles, Path(work))
    elapsed = time.time() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_md(results, args, f"server {Path(server).name} {label}", elapsed, args.out)
    plot(results, args.out.with_suffix(".png"))
    (args.out.with_suffix(".json")).write_text(json.dumps(
        [{k: v for k, v in r.items() if k not in ("ack_times", "lost_times")} for r in results],
        indent=1))
    bad = [r for r in results if promised(r) and (r["lost"] or r["after_ack"])]
    print(f"wrote {args.out} and {args.out.with_suffix('.png')} ({elapsed / 60:.1f} min)")
    for r in bad:
        print(f"FAIL {setting(r)} / {r['scenario']}: lost {r['lost']} {r['lost_sample']}, "
              f"after ack {r['after_ack']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
