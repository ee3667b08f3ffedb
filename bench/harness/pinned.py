"""The benchmarks' server under load and the machine around it.

One redis-server with the module (`Server`, the harness's, pinned to SERVER_CORE; `SERVER` is
the one under load, which the driver runner and the load meter read: a benchmark with
several servers points it at one at a time) and the load driver (bench/driver, pinned to
LOAD_CORE) started per measuring run; a run during which other processes or the hypervisor
took more than DISTURBED of either core is re-run, within a budget (`Retries`); the load
meter says what else used the cores, the speed probe how fast the server's core is; and the
facts about the machine, the module and the commit that every report's header gives.
"""

import datetime
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import redis

from server_bin import server_binary
from server_support import Server as _Server
from server_support import ServerError

from .figures import DISTURBED
from .report import cpu_model

REPO = Path(__file__).resolve().parent.parent.parent
MODULE = Path(os.environ.get("RMQ_MODULE", REPO / "target" / "release" / "librmq.so")).resolve()
DRIVER = Path(os.environ.get("RMQ_BENCH_DRIVER", REPO / "target" / "bench-driver" / "release" / "rmq-bench-driver")).resolve()
SERVER_CORE = 0
LOAD_CORE = 1
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------
# The server.

class Server(_Server):
    """The server under load: the harness's Server pinned to SERVER_CORE, stopped without losing
    its directory (it may start again; cleanup() removes it, unless a failure asked to
    `keep` its log), its clients with redis-py's own protocol choice and a long timeout."""

    def __init__(self):
        super().__init__(tag="rmq-bench", pin=SERVER_CORE, client_timeout=120)

    def take_module(self, src=None):
        """Loads a private copy of the module (`src`, default MODULE), so a rebuild during
        the run (the work tree may be shared) cannot change what is measured. Returns its
        sha256 (first 12)."""
        self.module = os.path.join(self.dir, "librmq.so")
        shutil.copy2(src or MODULE, self.module)
        with open(self.module, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:12]

    def start(self):
        try:
            return super().start()
        except ServerError as e:
            raise SystemExit(f"bench: could not start redis-server: {e}")

    def client(self):
        return super().client(protocol=None)

    def stop(self, remove_dir=False):
        super().stop(remove_dir=remove_dir)

    def cleanup(self):
        self.stop(remove_dir=True)


SERVER = Server()


def driver_once(mode, timeout, **opts):
    args = ["taskset", "-c", str(LOAD_CORE), str(DRIVER), mode, "--url", SERVER.url,
            "--timeout", str(int(timeout))]
    for k, v in opts.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"driver {mode} {opts}: no answer within {timeout + 30} s\n" + server_diagnosis())
    if r.returncode != 0:
        raise RuntimeError(f"driver {mode} {opts} failed ({r.returncode}): {r.stderr.strip()}\n"
                           + server_diagnosis())
    return json.loads(r.stdout.strip().splitlines()[-1])


class Retries:
    """Bounded re-runs of disturbed driver runs: a run during which other processes or the
    hypervisor took more than DISTURBED of the server's or the load's core is run again,
    at most MAX_TRIES times in all, while the retry time budget lasts (the run as a whole
    must stay within --budget). The least disturbed attempt is kept."""
    DISTURBED = DISTURBED
    MAX_TRIES = 3

    def __init__(self):
        self.budget_s = 0.0
        self.deadline = float("inf")
        self.runs = self.retried = self.kept_disturbed = 0
        self.spent = 0.0
        self.kept = []   # disturbance of every kept run

    def allowed(self, est):
        return self.spent + est <= self.budget_s and time.time() + est < self.deadline


RETRIES = Retries()


def disturbance(q):
    return max(q["others0"], q["others1"], q["steal0"], q["steal1"])


def driver(mode, timeout, quality=True, setup=None, **opts):
    """Runs the driver; with `quality`, re-runs it (bounded) when the machine was disturbed.
    `setup`, if given, is called before every attempt (outside the measuring), for runs
    that consume what they measure."""
    if not quality:
        if setup:
            setup()
        j = driver_once(mode, timeout, **opts)
        j["_dist"] = 0.0
        return j
    RETRIES.runs += 1
    best = None
    for attempt in range(Retries.MAX_TRIES):
        if setup:
            setup()
        meter = LoadMeter()
        j = driver_once(mode, timeout, **opts)
        q = meter.read()
        dist = disturbance(q)
        if attempt > 0:
            RETRIES.spent += q["wall"]
        if best is None or dist < best[0]:
            best = (dist, j)
        if dist <= Retries.DISTURBED:
            break
        if attempt + 1 < Retries.MAX_TRIES and RETRIES.allowed(q["wall"]):
            RETRIES.retried += 1
            log(f"    (re-running {mode} {opts.get('peer', '')}: other work took {dist * 100:.0f}% of a core "
                f"[others {q['others0']:.2f}/{q['others1']:.2f}, steal {q['steal0']:.2f}/{q['steal1']:.2f}])")
            continue
        break
    if best[0] > Retries.DISTURBED:
        RETRIES.kept_disturbed += 1
    RETRIES.kept.append(best[0])
    best[1]["_dist"] = best[0]
    return best[1]


def server_diagnosis():
    """What the server looks like after a driver failed: is it answering, what is it doing."""
    lines = [f"server pid {SERVER.proc.pid if SERVER.proc else '?'}, "
             f"{'exited ' + str(SERVER.proc.poll()) if SERVER.proc and SERVER.proc.poll() is not None else 'running'}; "
             f"log and module copy kept in {SERVER.dir}"]
    SERVER.keep = True
    try:
        c = redis.Redis(host="127.0.0.1", port=SERVER.port, socket_timeout=3)
        t = time.time()
        c.ping()
        lines.append(f"PING answered in {(time.time() - t) * 1000:.1f} ms")
        for sec in ("rmq", "stats", "clients", "cpu"):
            lines.append(f"INFO {sec}: " + json.dumps(c.info(sec), default=str))
        lines.append("SLOWLOG: " + json.dumps(c.slowlog_get(5), default=str))
        lines.append("CLIENT LIST: " + str(c.execute_command("CLIENT", "LIST")))
    except redis.exceptions.RedisError as e:
        lines.append(f"server does not answer: {e!r}")
    lines.append("server log tail:\n" + "\n".join(SERVER.log_text().splitlines()[-20:]))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# Other load on the machine: all CPU busy time minus what this run (this script, its reaped
# children — the drivers — and the server) used.

def read_proc_stat():
    """Per core ("cpu" = all): (user + nice + system seconds, steal seconds). Interrupt and
    softirq time is left out: much of it is this run's own loopback traffic, which no
    process is charged for."""
    with open("/proc/stat") as f:
        cores = {}
        for line in f:
            if not line.startswith("cpu"):
                break
            name, *v = line.split()
            v = [int(x) for x in v[:8]] + [0] * (8 - len(v[:8]))
            cores[name] = ((v[0] + v[1] + v[2]) / CLK_TCK, v[7] / CLK_TCK)
        return cores


def script_seconds():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class LoadMeter:
    """What else used the cores: other processes (busy time per core in /proc/stat minus
    ours: the server runs only on the server core, this script and its drivers only on the
    load core) and the hypervisor (steal: time this VM's vCPU was not running). Read it while
    the server runs (once reaped, its time would count again as the script's children's)."""

    def __init__(self):
        self.t0 = time.time()
        self.s0 = read_proc_stat()
        self.srv0 = SERVER.cpu_seconds()
        self.me0 = script_seconds()

    def others(self):
        """Cores kept busy by other processes or taken by the hypervisor, on average."""
        r = self.read()
        return r["others0"] + r["others1"] + r["others_rest"] + r["steal"]

    def read(self):
        dt = max(time.time() - self.t0, 1e-6)
        s1 = read_proc_stat()
        srv = SERVER.cpu_seconds() - self.srv0
        me = script_seconds() - self.me0

        def d(core, i):
            return s1.get(core, (0, 0))[i] - self.s0.get(core, (0, 0))[i]

        c0, c1 = f"cpu{SERVER_CORE}", f"cpu{LOAD_CORE}"
        rest = d("cpu", 0) - d(c0, 0) - d(c1, 0)
        slack = 2.0 / CLK_TCK   # both readings are counted in clock ticks
        return {
            "others0": max(d(c0, 0) - srv - slack, 0.0) / dt,
            "others1": max(d(c1, 0) - me - slack, 0.0) / dt,
            "others_rest": max(rest, 0.0) / dt,
            "steal0": max(d(c0, 1) - slack, 0.0) / dt,
            "steal1": max(d(c1, 1) - slack, 0.0) / dt,
            "steal": d("cpu", 1) / dt,
            "wall": dt,
        }


def top_processes(seconds=1.0, n=5):
    """The processes (not this run's) using the most CPU over a short sample."""
    mine = {os.getpid()}
    if SERVER.proc is not None:
        mine.add(SERVER.proc.pid)

    def snap():
        out = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    raw = f.read()
                comm = raw[raw.index("(") + 1:raw.rindex(")")]
                fields = raw.rsplit(")", 1)[1].split()
                out[int(d)] = (comm, (int(fields[11]) + int(fields[12])) / CLK_TCK)
            except (OSError, ValueError):
                pass
        return out

    a = snap()
    time.sleep(seconds)
    b = snap()
    use = []
    for pid, (comm, t) in b.items():
        if pid in mine or pid not in a:
            continue
        d = (t - a[pid][1]) / seconds
        if d > 0.02:
            use.append((d, pid, comm))
    use.sort(reverse=True)
    return use[:n]


PROBES = {}


def speed_probe(section):
    """Times a fixed CPU-bound loop on the server's core (idle between driver runs): a
    machine slowed by work this run cannot see (another VM, frequency) shows here."""
    code = "import time\nt=time.perf_counter()\ns=0\nfor i in range(1000000): s+=i\nprint(time.perf_counter()-t)"
    try:
        r = subprocess.run(["taskset", "-c", str(SERVER_CORE), sys.executable, "-c", code],
                           capture_output=True, text=True, timeout=60)
        PROBES.setdefault(section, []).append(float(r.stdout.strip()) * 1000)
    except (subprocess.TimeoutExpired, ValueError):
        pass


def machine_info(others_before, top_before):
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    ver = subprocess.run([server_binary(), "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu_model("unknown"),
        "memory": mem,
        "kernel": platform.release(),
        "redis": ver,
        "loadavg": open("/proc/loadavg").read().split()[:3],
        "others_before": others_before,
        "top_before": top_before,
    }


def machine_rows(m):
    """The report's machine table (machine_info's facts), up to the server's version."""
    return ["| machine | |", "|---|---|", f"| date | {m['date']} |", f"| nproc | {m['nproc']} |",
            f"| CPU | {m['cpu']} |", f"| memory | {m['memory']} |", f"| kernel | {m['kernel']} |",
            f"| server | {m['redis']} |"]


def module_desc(commit):
    note = os.environ.get("RMQ_MODULE_NOTE")
    if "RMQ_MODULE" in os.environ:
        return f"RMQ_MODULE={MODULE}" + (f" ({note})" if note else "")
    return f"target/release/librmq.so, work tree at commit {commit}"


def git_commit():
    try:
        r = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src", "Cargo.toml"],
                               capture_output=True, text=True).stdout.strip()
        return r.stdout.strip() + (" + uncommitted changes in src/" if dirty else "")
    except OSError:
        return "unknown"


def parse_common(ap, budget, retry_budget, results):
    """Adds the options every benchmark script has (watchdog, retry budget, output, --strict),
    parses, and keeps the arguments as given (a.raw_args) for the report's command line."""
    ap.add_argument("--budget", type=float, default=budget, help="watchdog for the whole run, seconds")
    ap.add_argument("--retry-budget", type=float, default=retry_budget,
                    help="seconds that re-runs of disturbed driver runs may take in all")
    ap.add_argument("--out", default=str(results))
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    a = ap.parse_args()
    a.raw_args = " ".join(sys.argv[1:])
    return a


