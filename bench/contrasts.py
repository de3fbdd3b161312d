"""
A study's family of planned contrasts, each paired within the seed, with Holm over the family: the
analysis the plans of bench/studies/ describe, as one command.

    python -m bench.contrasts bench/studies/placement/runs --seeds 19-27 \
        --contrast P1 alt18 tp_first18 --contrast P2 alt18 spd_first18 --contrast P3 spd12 mixed12 \
        --contrast P4 tp_first13 tp_last13 --contrast P5 tp_first13 tp6_par6_13

A contrast `NAME A B` is A's final val loss minus B's, seed by seed over the seeds both ran (same seed:
same initial weights and batches), with the mean, its 95% Student t interval and the two-sided
paired t test's p; Holm's adjustment runs over the contrasts given (the family). A setting is named
as bench.summarize names it (`train_shakespeare_char_24comm/alt18`), without `train_`, or by its
sweep tag alone (`alt18`) where only one setting has it. Resolved: Holm-adjusted p < 0.05; anything
else is reported as unresolved, never as "no difference". --tost M adds the equivalence rule of the
lost-packets plan: a contrast is "within +-M" when its 90% interval lies inside (-M, M) (two one-sided
t tests at 5%, unadjusted). --json writes every number.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import sys

from bench.stats import ALPHA, CONFIDENCE, holm, interval_at, paired_stats
from bench.summary import SummaryError, aggregate, by_class, check_one_class, fmt, parse_seeds, read_runs


def find(aggregates, name):
    """The one setting `name` names (module docstring); SummaryError otherwise, listing the names."""
    for key in (lambda n: n, lambda n: n.removeprefix("train_"), lambda n: n.split("/", 1)[1] if "/" in n else None):
        found = [a for a in aggregates if any(key(n) == name for n in a["_aliases"])]  # any of its names
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise SummaryError(f"setting {name!r} is ambiguous: {', '.join(a['_name'] for a in found)}")
    names = ", ".join(sorted(a["_name"] for a in aggregates)) or "none (no run has the result.json bench.sweep writes at its end)"
    raise SummaryError(f"no setting {name!r} among these runs; settings: {names}")


def family(aggregates, contrasts, tost=None):
    """[(name, a, b, stats)] for each contrast, stats with p_holm, verdict and (with tost) equivalence."""
    out = []
    for name, first, second in contrasts:
        a, b = find(aggregates, first), find(aggregates, second)
        if a["_comparable"] != b["_comparable"]:
            raise SummaryError(f"{name}: {a['_name']} and {b['_name']} differ in more than the pattern and link "
                               f"(data, model, schedule or iterations): their seeds do not pair")
        seeds = sorted(set(a["_by_seed"]) & set(b["_by_seed"]))
        for seed in seeds:
            check_one_class(name, a["_by_seed"][seed], b["_by_seed"][seed])
        diffs = {s: a["_by_seed"][s]["final_val_loss"] - b["_by_seed"][s]["final_val_loss"] for s in seeds}
        out.append(dict(name=name, a=a["_name"], b=b["_name"], seeds=seeds, **paired_stats(list(diffs.values()))))
        split = by_class(diffs, a["_by_seed"])  # seeds of several classes: each class's interval beside the pooled
        if split:
            out[-1]["by_class"] = split
    tested = [c for c in out if c["p"] is not None]
    for c, adjusted in zip(tested, holm([c["p"] for c in tested])):
        c["p_holm"] = adjusted
    for c in out:
        c.setdefault("p_holm", None)
        if c["p_holm"] is not None and c["p_holm"] < ALPHA:
            c["verdict"] = "resolved: " + ("A lower" if c["mean"] < 0 else "A higher")
        else:
            c["verdict"] = "unresolved"
        if tost is not None:
            c["tost_margin"] = tost
            if c["std"] is None:
                c["within_margin"] = None
            else:
                low, high = interval_at(c, 0.90) if c["std"] > 0 else (c["mean"], c["mean"])
                c.update(tost_low=low, tost_high=high, within_margin=-tost < low and high < tost)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("sweep_dirs", nargs="+", help="directories of runs (a study's runs/)")
    parser.add_argument("--contrast", nargs=3, action="append", metavar=("NAME", "A", "B"), required=True,
                        help="a planned contrast: A's final val loss minus B's, paired by seed (repeat for the family)")
    parser.add_argument("--seeds", default="", help="only the runs of these seeds: 19-27, 1,3,5 (default: all)")
    parser.add_argument("--tost", type=float, default=None, help="equivalence margin M in nats: within +-M at 90%%")
    parser.add_argument("--json", default="", help="write every number here")
    args = parser.parse_args()
    if args.tost is not None and args.tost <= 0:
        sys.exit(f"error: --tost={args.tost} must be a positive margin in nats")
    names = [c[0] for c in args.contrast]
    if len(set(names)) != len(names):
        sys.exit(f"error: --contrast names must differ; {names}")
    try:
        rows, _ = read_runs(args.sweep_dirs, parse_seeds(args.seeds) if args.seeds else None)
        found = family(aggregate(rows), args.contrast, args.tost)
    except SummaryError as e:
        sys.exit(f"error: {e}")
    print(f"# {len(found)} contrasts, one family (Holm); A - B in final val loss, paired by seed, "
          f"{CONFIDENCE:.0%} t intervals; runs: {', '.join(args.sweep_dirs)}{' seeds ' + args.seeds if args.seeds else ''}")
    tost_head = f" | 90% CI | within +-{args.tost:g}" if args.tost is not None else ""
    print(f"| contrast | A | B | n | A - B: mean [95% CI] | p | Holm p | verdict{tost_head} |")
    print("| --- | --- | --- | ---: | --- | ---: | ---: | ---" + (" | --- | ---" if args.tost is not None else "") + " |")
    for c in found:
        tost = ""
        if args.tost is not None:
            tost = (f" | [{fmt(c.get('tost_low'), '+.4f')}, {fmt(c.get('tost_high'), '+.4f')}] | "
                    f"{'-' if c['within_margin'] is None else ('yes' if c['within_margin'] else 'no')}")
        print(f"| {c['name']} | {c['a']} | {c['b']} | {c['n']} | {fmt(c['mean'], '+.4f')} [{fmt(c['ci_low'], '+.4f')}, "
              f"{fmt(c['ci_high'], '+.4f')}] | {fmt(c['p'], '.4g')} | {fmt(c['p_holm'], '.4g')} | {c['verdict']}{tost} |")
    split = [c for c in found if "by_class" in c]
    if split:
        print(f"\nThe seeds ran in {len(split[0]['by_class'])} numerics classes: each class's interval beside the "
              "pooled one above (a contrast pairs runs of one class; the classes split the seeds)")
        print("| contrast | class | seeds | A - B: mean [95% CI] |\n| --- | --- | --- | --- |")
        for c in split:
            for label, s in c["by_class"].items():
                print(f"| {c['name']} | {label} | {','.join(map(str, s['seeds']))} | {fmt(s['mean'], '+.4f')} "
                      f"[{fmt(s['ci_low'], '+.4f')}, {fmt(s['ci_high'], '+.4f')}] |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
