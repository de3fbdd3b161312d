"""
The statistics every study here reports, on scipy.stats and statsmodels (tested by their many
users) rather than written by hand:

    from bench.stats import paired_stats, holm, power_at, seeds_needed

paired_stats   mean of paired (same-seed) differences, its Student t interval with n-1 degrees
               of freedom, and the two-sided p of the paired t test (scipy.stats.t)
holm           Holm's step-down adjusted p-values (statsmodels' multipletests, method 'holm')
interval_at    the same mean's interval at another confidence (a simultaneous Bonferroni one)
power_at       the paired t test's power over n seeds, exact from the noncentral t
               (scipy.stats.nct), at level 0.05 / family
seeds_needed   the smallest n with power_at(n) >= the power asked for

Paired differences: runs of one seed start from the same weights and see the same batches in
every config, so the seed-to-seed spread cancels in their differences; the tests here treat the
seeds' differences as a normal sample.
"""

import math
import statistics

from scipy import stats as _st

CONFIDENCE = 0.95
ALPHA = 0.05  # the level a Holm-adjusted p must be below; 1 - CONFIDENCE is 0.050000000000000044 in floats


def t_quantile(q, df):
    """The q-quantile of Student's t with df degrees of freedom."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile {q} must be in (0, 1)")
    return float(_st.t.ppf(q, df))


def t_two_sided_p(t, df):
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    return float(2.0 * _st.t.sf(abs(t), df))


def paired_stats(diffs, confidence=CONFIDENCE):
    """Mean of paired differences, its Student-t confidence interval (n-1 degrees of freedom)
    and the two-sided p-value of the paired t test (mean difference 0). Needs n >= 2 for the
    interval and p; with zero spread the mean is exact: the interval is the point, p is 1 or 0."""
    n = len(diffs)
    out = dict(n=n, mean=statistics.fmean(diffs) if n else None, std=None, ci_low=None, ci_high=None, p=None)
    if n < 2:
        return out
    mean, std = out["mean"], statistics.stdev(diffs)
    if std == 0:  # scipy's t test is undefined here (0 / 0); the mean is exact
        out.update(std=0.0, ci_low=mean, ci_high=mean, p=1.0 if mean == 0 else 0.0)
        return out
    test = _st.ttest_1samp(diffs, 0.0)  # the paired t test is the one-sample test of the differences
    low, high = test.confidence_interval(confidence)
    out.update(std=std, ci_low=float(low), ci_high=float(high), p=float(test.pvalue))
    return out


def interval_at(stats, confidence):
    """The interval of paired_stats' mean at another confidence (same n, mean and std)."""
    half = t_quantile(0.5 + confidence / 2.0, stats["n"] - 1) * stats["std"] / math.sqrt(stats["n"])
    return stats["mean"] - half, stats["mean"] + half


def holm(pvalues):
    """Holm's step-down adjusted p-values, in the given order (capped at 1, monotone along the
    sorted order): the i-th smallest of m p-values times (m - i + 1)."""
    if not len(pvalues):
        return []
    from statsmodels.stats.multitest import multipletests  # imported here: it loads pandas
    return [float(p) for p in multipletests(list(pvalues), alpha=1.0 - CONFIDENCE, method="holm")[1]]


def power_at(n, effect, std, family=1):
    """P(a two-sided paired t test over n seeds resolves a true mean difference `effect` when the
    seeds' differences have standard deviation `std`), at level (1 - CONFIDENCE) / family:
    P(|T| > t_crit) with T noncentral t, n-1 degrees of freedom, noncentrality effect sqrt(n) / std."""
    df = n - 1
    critical = t_quantile(1.0 - (1.0 - CONFIDENCE) / family / 2.0, df)
    if std == 0:
        return 1.0 if effect else (1.0 - CONFIDENCE) / family
    noncentrality = abs(effect) * math.sqrt(n) / std
    upper, lower = _st.nct.sf(critical, df, noncentrality), _st.nct.cdf(-critical, df, noncentrality)
    # scipy's noncentral t returns nan in the far lower tail for some noncentralities (seen at 10.79 with 3
    # degrees of freedom, where its neighbours give 1e-18): that tail is then negligible, so count it as 0
    return float(upper + (lower if math.isfinite(lower) else 0.0))


def seeds_needed(effect, std, family=1, power=0.8, max_seeds=10_000):
    """The smallest n >= 2 with power_at(n) >= power; None if effect is 0 or more than max_seeds are needed."""
    if effect == 0:
        return None
    if std == 0:
        return 2  # no spread: two seeds show the difference exactly
    low, high = 1, 2  # power_at(low) < power <= power_at(high) once the doubling stops
    while power_at(high, effect, std, family) < power:
        if high == max_seeds:
            return None
        low, high = high, min(2 * high, max_seeds)
    while high - low > 1:  # the power grows with n: bisect
        middle = (low + high) // 2
        if power_at(middle, effect, std, family) >= power:
            high = middle
        else:
            low = middle
    return high
