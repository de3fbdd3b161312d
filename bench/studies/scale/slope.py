"""The scale study's primary analysis (plan.md): how each setting's cost moves with width.

At each width, a setting's cost is its paired difference from 24comm of the same seed and width
(bench.summarize's paired columns: mean, and sd / sqrt(n) as its standard error). Across widths, the
cost is regressed on log2(width) by least squares with every width weighted equally (plan.md, amendment 6:
weights estimated from the same seeds as the degrees of freedom make the test reject too often), each
width's mean with its own standard error (the widths are independent samples); the slope
(nats per doubling of the width) is a weighted sum of the widths' means, so it gets a t test and a 95%
interval on Welch-Satterthwaite degrees of freedom from each width's seeds (plan.md, amendment 4: the
standard errors are estimated, and a z test taking them as known rejects too often), and Holm runs over
the planned family. Each
setting's line is also read at GPT-2's width (`--at`, 768): the cost it predicts there with a 95%
interval, an extrapolation wherever the widths fitted stop below it (reported, not tested). With three or
more widths, whether the costs lie on one line is tested too (lack of fit); where they do not, the slope
is an average of unlike changes and no trend is claimed from it.

    python -m bench.studies.scale.slope --width 64=bench/studies/scale/w64/experiment_summary.csv \\
        --width 128=bench/studies/scale/w128/experiment_summary.csv \\
        --settings 24comm/drop1 24comm/drop2 24comm/drop5 24comm/ladder 24comm/half --json bench/studies/scale/family_slope.json

(plan.md amendment 6: that fit, over the CPU widths 64 and 128, is the planned one; a fit with more widths
writes to a file of its own.) The cost is signed (the setting's val loss minus 24comm's): a cost that
"falls" with width means the setting gains on 24comm as the width grows, whether it starts above or below 0.

A setting is named as the summary names it without `train_shakespeare_char_` and without the width tag
the scale sweeps put on it (`24comm/w64_drop1` is `24comm/drop1` at every width).
"""
import argparse
import csv
import json
import math
import re
import sys

from bench.stats import holm


def costs(path, width=None):
    """{setting name without train_, the dataset and a width tag: (mean, standard error, n)} of a summary's paired
    rows; with `width`, only that width's (tagged w<width>_) and untagged ones. ValueError for a name twice."""
    out = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["kind"] != "aggregate" or not row.get("paired_diff_mean") or not row.get("paired_diff_std"):
                continue
            tag = re.match(r"w(\d+)_", row["setting"])  # the sweeps tag a setting with its width: w64_drop1
            if width is not None and tag and int(tag.group(1)) != width:
                continue
            stem = row["config"].rsplit("/", 1)[-1].removesuffix(".py").removeprefix("train_shakespeare_char_")
            setting = row["setting"][tag.end():] if tag else row["setting"]
            name = stem + (f"/{setting}" if setting else "")
            if name in out:
                raise ValueError(f"{path}: {name} twice (two widths' runs in one summary: pass each width's own)")
            n = int(row["paired_n"])
            out[name] = (float(row["paired_diff_mean"]), float(row["paired_diff_std"]) / math.sqrt(n), n)
    return out


def slope(points, at=768):
    """points: [(width, mean cost, standard error, seeds)] -> dict(slope, se, df, ci_low, ci_high, p, intercept), and
    the line read at width `at`: at_cost with its interval at_ci_low, at_ci_high (at_df). Every width weighs the
    same in the fit; the slope and the reading are linear combinations of the widths' means, whose variances are
    estimated from each width's seeds, so each is tested on a t distribution with Welch-Satterthwaite degrees
    of freedom (two widths: Welch's t test) rather than the normal, which at 12 seeds a width rejects too often."""
    import numpy as np
    from scipy import stats
    x = np.log2([p[0] for p in points]) - math.log2(points[0][0])  # doublings above the first width
    y, se, n = (np.array([p[k] for p in points], dtype=float) for k in (1, 2, 3))
    design = np.column_stack([np.ones_like(x), x])
    combine = np.linalg.solve(design.T @ design, design.T)  # (2, widths): the fit's coefficients as sums of the means

    def estimate(c):  # a linear combination c . y: value, standard error, Welch-Satterthwaite df
        parts = c ** 2 * se ** 2
        return float(c @ y), float(np.sqrt(parts.sum())), float(parts.sum() ** 2 / np.sum(parts ** 2 / (n - 1)))

    (b, b_se, df), intercept = estimate(combine[1]), float(combine[0] @ y)
    at_cost, at_se, at_df = estimate(np.array([1.0, math.log2(at) - math.log2(points[0][0])]) @ combine)
    t, at_t = stats.t.ppf(0.975, df), stats.t.ppf(0.975, at_df)
    return dict(slope=b, se=b_se, df=df, ci_low=b - t * b_se, ci_high=b + t * b_se, p=float(2 * stats.t.sf(abs(b) / b_se, df)),
                intercept=intercept, at_width=at, at_cost=at_cost, at_df=at_df,
                at_ci_low=at_cost - at_t * at_se, at_ci_high=at_cost + at_t * at_se)


def lack_of_fit(points):
    """points as slope's -> dict(lack_of_fit, lack_of_fit_df, lack_of_fit_p) for three or more widths, None-valued
    for two (a line fits any two). The statistic is the weighted residual sum of squares of the line fitted with
    weights 1 / se^2: chi-square on widths - 2 degrees of freedom if the costs lie on a line and the standard errors
    were known. They are estimated from each width's seeds, so the statistic over its degrees of freedom is read
    on an F distribution with the fewest seeds' n - 1 as the denominator's degrees of freedom, which asks more
    of the evidence than the chi-square does."""
    import numpy as np
    from scipy import stats
    if len(points) < 3:
        return dict(lack_of_fit=None, lack_of_fit_df=None, lack_of_fit_p=None)
    x = np.log2([p[0] for p in points])
    y, se, n = (np.array([p[k] for p in points], dtype=float) for k in (1, 2, 3))
    design, w = np.column_stack([np.ones_like(x), x]), 1 / se ** 2
    coef = np.linalg.solve(design.T @ (w[:, None] * design), design.T @ (w * y))
    q, df = float(np.sum(w * (y - design @ coef) ** 2)), len(points) - 2
    return dict(lack_of_fit=q, lack_of_fit_df=df, lack_of_fit_p=float(stats.f.sf(q / df, df, int(n.min()) - 1)))


def verdict(record):
    """The reading of one fitted setting: a trend only where the slope survives Holm and the widths' costs lie
    on a line (or there are only two widths, which any line fits)."""
    if record["lack_of_fit_p"] is not None and record["lack_of_fit_p"] < 0.05:
        return "not a line: the cost does not change by the same amount with each doubling"
    if record["p_holm"] >= 0.05:
        return "unresolved"
    return "resolved: the cost " + ("rises" if record["slope"] > 0 else "falls") + " with width"


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--width", action="append", required=True, metavar="W=CSV",
                        help="a width and its summary (bench.summarize with 24comm as the reference)")
    parser.add_argument("--settings", nargs="+", required=True, help="the family: settings as 1comm, 24comm/ladder")
    parser.add_argument("--json", default="", help="also write every number here")
    parser.add_argument("--at", type=int, default=768, help="read each line at this width too (default: GPT-2's 768)")
    args = parser.parse_args()
    if args.at < 1:
        sys.exit(f"error: --at={args.at}: a width is a positive integer (GPT-2's is 768)")
    try:
        widths = sorted((int(w), path) for w, _, path in (item.partition("=") for item in args.width))
        tables = {w: costs(path, w) for w, path in widths}
    except (ValueError, OSError, KeyError) as e:
        sys.exit(f"error: --width: {e} (write W=path/to/experiment_summary.csv)")
    found = []
    for name in args.settings:
        points = [(w, *tables[w][name]) for w, _ in widths if name in tables[w]]
        if 0 < len(points) < len(widths):  # a width that ran only its first settings (plan.md "Runs"): said, not silent
            print(f"# {name}: no paired cost at n_embd {', '.join(str(w) for w, _ in widths if name not in tables[w])}; "
                  f"fitted over {', '.join(str(p[0]) for p in points)} only", file=sys.stderr)
        if len(points) < 2:
            sys.exit(f"error: {name}: a paired cost at {len(points)} width(s); a slope needs two or more")
        found.append(dict(name=name, widths=[p[0] for p in points], costs=[p[1] for p in points],
                          ses=[p[2] for p in points], n=[p[3] for p in points], **slope(points, args.at), **lack_of_fit(points)))
    for record, adjusted in zip(found, holm([r["p"] for r in found])):
        record["p_holm"] = adjusted
        record["verdict"] = verdict(record)
    print(f"# cost (vs 24comm, same seed and width) on log2(width): least squares, widths weighted equally, t test with Welch-Satterthwaite "
          f"degrees of freedom, Holm over {len(found)}; lack of fit: the costs' weighted distance from a line, F test")
    print(f"| setting | widths | cost per width | slope per doubling [95% CI] | p | Holm p | lack of fit p | verdict | the line at {args.at} |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | --- | --- |")
    for r in found:
        per_width = ", ".join(f"{w}: {m:+.4f}" for w, m in zip(r["widths"], r["costs"]))
        print(f"| {r['name']} | {len(r['widths'])} | {per_width} | {r['slope']:+.4f} [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] "
              f"| {r['p']:.2g} | {r['p_holm']:.2g} | {'-' if r['lack_of_fit_p'] is None else format(r['lack_of_fit_p'], '.2g')} | {r['verdict']} "
              f"| {r['at_cost']:+.4f} [{r['at_ci_low']:+.4f}, {r['at_ci_high']:+.4f}] |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
