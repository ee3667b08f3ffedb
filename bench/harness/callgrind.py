"""The callgrind meter: the instructions a server runs between two points.

Instructions repeat whatever else the machine does (it is shared), so where the question is
a few percent the benchmarks count them instead of timing. `Callgrind(server)` makes a
`Server` (not yet started, or restarted after) run under `valgrind --tool=callgrind`;
`zero()` and `dump()` bracket what is measured (`callgrind_control -z` and `-d`), and a
dump tells the whole server's instructions (`total`, its summary) and, through
callgrind_annotate, the inclusive instructions of any of the server's functions: `call()`
runs one command, what INFO commandstats times. The server runs with its random seeds fixed
(fixed_seed.c, preloaded): the same commands then build the same sorted sets and dicts.
"""

import functools
import re
import subprocess
import tempfile
import time
from pathlib import Path

VALGRIND = ["valgrind", "--tool=callgrind", "--dump-instr=no", "--dump-line=no"]
# valgrind starts a server (and stops it, writing the last dump) dozens of times slower.
SLOW = 120.0


@functools.cache
def fixed_seed():
    """The seed-fixing library (fixed_seed.c), built once per run."""
    out = Path(tempfile.mkdtemp(prefix="rmq-fixed-seed-")) / "fixed_seed.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(out), str(Path(__file__).with_name("fixed_seed.c")), "-ldl"],
                   check=True, capture_output=True, timeout=120)
    return str(out)


def total(dump):
    """The instructions of a dump file's summary, None while it is still being written."""
    for line in Path(dump).read_text(errors="replace").splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    return None


def inclusive(dump, fns):
    """Inclusive instructions of the server's functions `fns` (names) in `dump`, in order
    (0 for one that did not run)."""
    ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no", str(dump)],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    out = []
    for fn in fns:
        line = re.compile(rf"^\s*([\d,]+)\s.*\?\?\?:{re.escape(fn)} \[")
        out.append(next((int(m.group(1).replace(",", "")) for m in map(line.match, ann.splitlines()) if m), 0))
    return out


class Callgrind:
    """Counts what `server` runs; set up before the server starts (or restarts)."""

    def __init__(self, server):
        self.server = server
        self._plain = (server.wrapper, server.start_timeout, dict(server.env))
        self.dir = Path(server.dir)
        # %p: a forked child (BGSAVE) writes its own files, not over the server's.
        server.wrapper = [*VALGRIND, f"--callgrind-out-file={self.dir}/cg.%p.out"]
        server.start_timeout = max(server.start_timeout, SLOW)
        server.env["LD_PRELOAD"] = fixed_seed()

    def release(self):
        """The server runs without valgrind from its next (re)start on."""
        self.server.wrapper, self.server.start_timeout, self.server.env = self._plain

    def _ctl(self, *args):
        subprocess.run(["callgrind_control", *args, str(self.server.pid)], check=True,
                       capture_output=True, timeout=SLOW)

    def _dumps(self):
        return self.dir.glob(f"cg.{self.server.pid}.out.*")

    def zero(self):
        self._ctl("-z")

    def dump(self, name=None):
        """Has callgrind write what it counted since the last zero (as `name`, if given);
        the dump's path once it is complete."""
        before = set(self._dumps())
        self._ctl("-d", *([name] if name else []))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for f in sorted(set(self._dumps()) - before):
                if total(f) is not None:
                    return f
            time.sleep(0.1)
        raise RuntimeError(f"callgrind: no complete dump of {self.server} within 60 s")

    def count(self, fns=()):
        """Dumps and reads what was counted since the last zero: {"total": the whole
        server, fn: inclusive instructions of each of `fns`}; the dump is removed."""
        f = self.dump()
        try:
            return {"total": total(f), **dict(zip(fns, inclusive(f, fns) if fns else []))}
        finally:
            f.unlink()

    def around(self, fn, fns=()):
        """fn()'s result and what the server ran meanwhile (as count())."""
        self.zero()
        r = fn()
        return r, self.count(fns)
