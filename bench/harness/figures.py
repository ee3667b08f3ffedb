"""A figure measured over rounds (`Fig`), and how figures are printed (fmt, ratio)."""

from .stats import median, spread

DISTURBED = 0.10   # share of a core taken by others above which a run counts as disturbed
NOISY = 0.25       # (max - min) / median above this marks a figure as noisy


class Fig:
    """One figure measured over rounds: peer -> list of values, each with the disturbance of
    the run it came from. Medians and ratios use only undisturbed rounds when at least
    MIN_CLEAN of them exist (else all rounds, and the figure is marked)."""
    MIN_CLEAN = 3

    def __init__(self):
        self.v = {}
        self.d = {}

    def add(self, peer, x, dist=0.0):
        self.v.setdefault(peer, []).append(x)
        self.d.setdefault(peer, []).append(dist)

    def clean(self, peer):
        xs = self.v.get(peer, [])
        ok = [x for x, d in zip(xs, self.d.get(peer, [])) if d <= DISTURBED]
        return (ok, True) if len(ok) >= self.MIN_CLEAN else (xs, False)

    def med(self, peer):
        return median(self.clean(peer)[0])

    def all_clean(self, peer):
        return self.clean(peer)[1] or not self.v.get(peer)

    def ratio(self, a, b):
        """Median over rounds of a/b measured in the same round (robust to the machine
        speeding up or slowing down between rounds); ratio of medians if unpaired."""
        xa, xb = self.v.get(a, []), self.v.get(b, [])
        if xa and len(xa) == len(xb):
            da, db = self.d.get(a, []), self.d.get(b, [])
            pairs = [(x, y) for x, y, p, q in zip(xa, xb, da, db)
                     if x is not None and y and max(p, q) <= DISTURBED]
            if len(pairs) < self.MIN_CLEAN:
                pairs = [(x, y) for x, y in zip(xa, xb) if x is not None and y]
            rs = [x / y for x, y in pairs]
            return median(rs) if rs else None
        return ratio(self.med(a), self.med(b))

    def noisy(self, peer):
        return spread(self.clean(peer)[0]) > NOISY


def fmt(x, unit=""):
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    ax = abs(x)
    if unit == "B":
        return f"{x:,.1f}"
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 0.1 or ax == 0:
        return f"{x:.2f}"
    return f"{x:.3f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}×"


