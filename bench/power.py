"""
Seeds a paired study needs: the smallest number of seeds at which a paired t test resolves a true
mean difference `effect` with probability `power`, when the seed-level differences are normal with
standard deviation `std`, at the level 0.05 / family (Bonferroni; it is also the bar Holm's
correction puts on the smallest p of a family of that size).

    python -m bench.power --effect 0.03 --std 0.015                  # one hypothesis
    python -m bench.power --effect 0.03 --std 0.015 --family 4 --power 0.9

This is for planning a follow-up, not for reading a result: an unresolved cost stays unresolved,
whatever power a design "would have had" (post-hoc power adds nothing to the interval). The power
of the two-sided test is P(|T| > t_crit), T noncentral t with n-1 degrees of freedom and
noncentrality effect * sqrt(n) / std, computed exactly from scipy.stats.nct (bench/stats.py's
power_at and seeds_needed; this file is their command line).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import math
import sys

from bench.stats import CONFIDENCE, power_at, seeds_needed


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
