"""Where reports go and what they say about the machine.

Every benchmark writes its report (Markdown, and any plots or JSON beside it) to RESULTS,
bench/results/, which the README cites; investigation logs go to docs/perf/ instead.
"""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent.parent / "bench" / "results"


def cpu_model(default):
    """The first "model name" in /proc/cpuinfo, or `default`."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return default


def write_report(path, text):
    """Writes `text` to `path` (its folder made if need be), ending in one newline; returns
    the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n")
    return path
