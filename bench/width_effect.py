"""
Does the cost of a dropped sync grow or shrink with width? Two summaries of the same configs at
two widths (bench/summarize.py's CSVs), each config paired with the reference config of its own
width and seed, then the two widths' paired costs compared seed by seed:

    python -m bench.width_effect bench/studies/sync_count/experiment_summary.csv bench/studies/width128/experiment_summary.csv

Per config, over the seeds both summaries hold: cost at each width (config - reference, same
seed; mean and 95% Student t interval) and the change with width, (wide cost - narrow cost) per
seed, with its interval and Holm's correction over the configs. Same seed = same data order in
both widths (the initial weights differ: another shape), so the change is paired on the data.
A change whose interval includes 0 is unresolved, not "the same at both widths".
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import csv
import json
import os
import sys

from bench.stats import ALPHA, CONFIDENCE, holm, paired_stats


def final_losses(path):
    """{config stem: {seed: final val loss}} of the finished lossless runs in a summary CSV."""
    if not os.path.isfile(path):
        sys.exit(f"error: {path} does not exist (write it with bench/summarize.py ... --out DIR)")
    out = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["kind"] == "run" and r["status"] == "done" and r["loss_model"] == "none" and not r["setting"]:
                stem = os.path.splitext(os.path.basename(r["config"]))[0]
                out.setdefault(stem, {})[int(r["seed"])] = float(r["final_val_loss"])
    return out


def interval(stats):
    if stats["ci_low"] is None:
        return f"{stats['mean']:+.4f} (n={stats['n']}, no interval)"
    return f"{stats['mean']:+.4f} [{stats['ci_low']:+.4f}, {stats['ci_high']:+.4f}]"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("narrow", help="summary CSV of the narrower model")
    parser.add_argument("wide", help="summary CSV of the wider model")
    parser.add_argument("--reference", default="train_shakespeare_char_24comm", help="the config each is paired with")
    parser.add_argument("--json", default="", help="also write each config's costs and change here (bench/render.py)")
    args = parser.parse_args()
    narrow, wide = final_losses(args.narrow), final_losses(args.wide)
    for name, table in (("narrow", narrow), ("wide", wide)):
        if args.reference not in table:
            sys.exit(f"error: --reference={args.reference!r} is not among the {name} summary's configs: "
                     f"{', '.join(sorted(table))}")
    rows = []
    for config in sorted(set(narrow) & set(wide) - {args.reference}):
        seeds = sorted(set(narrow[config]) & set(wide[config]) & set(narrow[args.reference]) & set(wide[args.reference]))
        cost_narrow = [narrow[config][s] - narrow[args.reference][s] for s in seeds]
        cost_wide = [wide[config][s] - wide[args.reference][s] for s in seeds]
        change = paired_stats([w - n for w, n in zip(cost_wide, cost_narrow)])
        rows.append((config, seeds, paired_stats(cost_narrow), paired_stats(cost_wide), change))
    if not rows:
        sys.exit("error: the two summaries share no config besides the reference")
    tested = [i for i, row in enumerate(rows) if row[4]["p"] is not None]
    adjusted = dict(zip(tested, holm([rows[i][4]["p"] for i in tested])))
    print(f"cost = config - {args.reference}, same seed, final val loss (nats); {CONFIDENCE:.0%} t intervals; "
          f"change = wide cost - narrow cost, Holm over {len(tested)}")
    print("| config | seeds | cost, narrow | cost, wide | change with width | Holm p | verdict |")
    print("| --- | ---: | --- | --- | --- | ---: | --- |")
    for i, (config, seeds, narrow_cost, wide_cost, change) in enumerate(rows):
        p = adjusted.get(i)
        verdict = ("unresolved" if p is None or p >= ALPHA else
                   "grows with width" if change["mean"] > 0 else "shrinks with width")
        print(f"| {config} | {len(seeds)} | {interval(narrow_cost)} | {interval(wide_cost)} | {interval(change)} | "
              f"{'-' if p is None else f'{p:.2g}'} | {verdict} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({config.removeprefix("train_"): dict(seeds=seeds, narrow=n, wide=w, change=dict(c, p_holm=adjusted.get(i)))
                       for i, (config, seeds, n, w, c) in enumerate(rows)}, f, indent=1)


if __name__ == "__main__":
    main()
