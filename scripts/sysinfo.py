"""Facts about the machine that both benchmark scripts report."""


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
