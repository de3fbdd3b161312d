"""The scale study's power calculation (plan.md): the chance that the planned test of a cost's slope on
log2(width) resolves a given slope, by seeds per width.

The planned analysis (plan.md): at each width w, a setting's cost is the mean over seeds of its paired
difference from 24comm (same seed, same width), with standard error sd / sqrt(n); the slope of the
costs on log2(w) is the inverse-variance weighted least-squares slope (statsmodels WLS with the
standard errors as known: cov_type="fixed scale"), tested with a z test, Holm over the family. With
the same sd and n at every width, its standard error is sd / sqrt(n * S), S = sum (x - mean x)^2 over
the widths' log2 values; the power is that of a two-sided z test at level 0.05 / family (Holm's first
step, the strictest; the later steps are easier).

    python -m bench.studies.scale.power --sd 0.02 --slope -0.013 --widths 64 128 256 --family 5
"""
import argparse
import math

from scipy.stats import norm


def slope_se(sd, n, widths):
    xs = [math.log2(w) for w in widths]
    mean = sum(xs) / len(xs)
    return sd / math.sqrt(n * sum((x - mean) ** 2 for x in xs))


def power(slope, sd, n, widths, family, alpha=0.05):
    z = abs(slope) / slope_se(sd, n, widths)
    critical = norm.ppf(1 - alpha / family / 2)
    return norm.sf(critical - z) + norm.cdf(-critical - z)


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--sd", type=float, required=True, help="sd over seeds of a paired cost at one width (nats)")
    parser.add_argument("--slope", type=float, required=True, help="the true slope to resolve, nats per doubling")
    parser.add_argument("--widths", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--family", type=int, default=5, help="hypotheses in the Holm family")
    parser.add_argument("--seeds", type=int, nargs="+", default=[6, 8, 10, 12, 16, 20])
    args = parser.parse_args()
    print(f"slope {args.slope:+g} per doubling, sd {args.sd:g}, widths {args.widths}, Holm over {args.family}")
    print("| seeds per width | slope's standard error | power (Holm's first step) |")
    print("| ---: | ---: | ---: |")
    for n in args.seeds:
        print(f"| {n} | {slope_se(args.sd, n, args.widths):.4f} | {power(args.slope, args.sd, n, args.widths, args.family):.2f} |")


if __name__ == "__main__":
    main()
