"""
Seeds a paired study needs: the smallest number of seeds at which a paired t test resolves a true
mean difference `effect` with probability `power`, when the seed-level differences are normal with
standard deviation `std`, at the level 0.05 / family (Bonferroni; it is also the bar Holm's
correction puts on the smallest p of a family of that size).

    python bench/power.py --effect 0.03 --std 0.015                  # one hypothesis
    python bench/power.py --effect 0.03 --std 0.015 --family 4 --power 0.9

This is for planning a follow-up, not for reading a result: an unresolved cost stays unresolved,
whatever power a design "would have had" (post-hoc power adds nothing to the interval). The power
of the two-sided test is P(|T| > t_crit), T noncentral t with n-1 degrees of freedom and
noncentrality effect * sqrt(n) / std; it is estimated by Monte Carlo from T's definition,
(Z + noncentrality) / sqrt(V / df) with Z standard normal and V chi-square, with a fixed seed, so
an answer is reproducible (scipy is not a dependency).
"""

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import CONFIDENCE, t_quantile  # noqa: E402

DRAWS = 400_000  # Monte Carlo error of a power near 0.8: about 0.0006


def power_at(n, effect, std, family=1, draws=DRAWS, seed=0):
    """P(a paired t test over n seeds resolves the difference) at level (1 - CONFIDENCE) / family."""
    df = n - 1
    critical = t_quantile(1.0 - (1.0 - CONFIDENCE) / family / 2.0, df)
    noncentrality = abs(effect) * math.sqrt(n) / std
    rng = np.random.default_rng(seed)  # the same draws at every n: power stays monotone in n
    t = (rng.standard_normal(draws) + noncentrality) / np.sqrt(rng.chisquare(df, draws) / df)
    return float(np.mean(np.abs(t) > critical))


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
    while high - low > 1:
        middle = (low + high) // 2
        if power_at(middle, effect, std, family) >= power:
            high = middle
        else:
            low = middle
    return high


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--effect", type=float, required=True, help="the true mean paired difference to resolve (nats)")
    parser.add_argument("--std", type=float, required=True, help="the seed-level paired differences' standard deviation")
    parser.add_argument("--family", type=int, default=1, help="hypotheses in the family (level 0.05 / family)")
    parser.add_argument("--power", type=float, default=0.8, help="probability of resolving it (default 0.8)")
    args = parser.parse_args()
    if args.std < 0 or not math.isfinite(args.std):
        sys.exit(f"error: --std must be a finite number >= 0, not {args.std}")
    if args.family < 1:
        sys.exit(f"error: --family must be at least 1, not {args.family}")
    if not 0.0 < args.power < 1.0:
        sys.exit(f"error: --power must be in (0, 1), not {args.power}")
    n = seeds_needed(args.effect, args.std, args.family, args.power)
    level = (1.0 - CONFIDENCE) / args.family
    if n is None:
        print(f"effect {args.effect:+g}, std {args.std:g}, level {level:.4g}: no number of seeds up to 10,000 "
              f"reaches power {args.power:g}" + (" (the effect is 0)" if args.effect == 0 else ""))
    else:
        print(f"effect {args.effect:+g}, std {args.std:g}, level {level:.4g} (family of {args.family}): "
              f"{n} seeds for power {args.power:g} (power at {n}: {power_at(n, args.effect, args.std, args.family):.3f})")


if __name__ == "__main__":
    main()
