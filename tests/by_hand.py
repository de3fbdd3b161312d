"""Statistics by hand for the recompute tests: what a family file says, computed again with plain arithmetic and the
t distribution alone (not bench.stats), so a slip in the study's tools cannot hide in both."""

import math

from scipy import stats


def paired(diffs):
    """(mean, 95% t interval low, high, two-sided p) of per-seed differences."""
    n, mean = len(diffs), sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half, 2 * stats.t.sf(abs(mean) / (sd / math.sqrt(n)), n - 1)


def holm(p_values):
    """Holm's adjusted p values, in the order given: the k-th smallest times (m - k), kept monotone, capped at 1."""
    adjusted, running = [None] * len(p_values), 0.0
    for rank, i in enumerate(sorted(range(len(p_values)), key=p_values.__getitem__)):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
