"""Medians and spreads of repeated rounds: the benchmarks report the median and how far the
rounds fell apart, never the best round. Missing figures (None) are left out."""

import statistics


def median(xs):
    """The median of `xs`, None when there are none."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    """(max - min) / median: how far the rounds fell apart; 0 when it cannot be told."""
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return 0.0
    m = statistics.median(xs)
    return (max(xs) - min(xs)) / m if m else 0.0
