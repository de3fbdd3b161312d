"""The width-alone study's families (plan.md "Analysis"): costs paired by seed where the two settings trained at
different peak rates (each at its own chosen rate: bench.contrasts refuses such pairs, as it should for every other
study), the change of a cost between two readings (two widths, two horizons) seed by seed, and a cost's trend over
widths, with Holm over every contrast of the command. Every run it reads must pass the plan's provenance rule.

    python -m bench.studies.width_alone.family bench/studies/width_alone/runs --seeds 600-613 --commit <plan commit> \
        --cost c64_drop1 w64_drop1 w64_ref24 ... \
        --change d_drop1 w64_drop1 w64_ref24 w128_drop1 w128_ref24 ... \
        --trend t_drop1 'w{W}_drop1' 'w{W}_ref24' 64 128 256 512 ... --json bench/studies/width_alone/family.json

--cost NAME A B: A's final val loss minus B's, same seed (the two may differ in peak rate and min_lr as well as in
  the setting; nothing else; --same_rate: not in the rate either). A name 'X|Y' is X where any run has it, else Y.
--change NAME A1 B1 A2 B2: (A2 - B2) - (A1 - B1), seed by seed: how the cost moves from the first reading to the
  second (64 -> 128: the change per doubling; 600 -> 2,400 iterations).
--trend NAME A B W1 W2 [W3 ...]: A and B with {W} replaced by each width; per seed, the least-squares slope of the
  cost on log2(width); with three widths or more also the per-seed quadratic term, and where its mean is resolved
  from 0 (p < 0.05, not corrected: it only withholds a claim) the verdict is "not a line" and no trend is read.
Every quantity is a per-seed number, so each is a one-sample t test over the seeds (bench.stats.paired_stats), 95%
t interval, Holm over the command's contrasts. Unresolved is "unresolved at this power", never "no effect".

Provenance (plan.md "Provenance"), refused in one line otherwise: every run has run_info.json with its numerics
class and a commit given by --commit; a run from a checkout was clean (git_dirty false); a run whose commit a caller
gave (a device call) has provenance.json from device_ladder.py saying its tree was verified against that commit; a
run whose clock restarted (resumed) records as many earlier_parts, each of its own commit and class. All runs of a
seed in one contrast are of one numerics class; where a contrast's seeds span classes, each class's interval is
printed and written beside the pooled one (`by_class`).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import math
import os
import sys

import numpy as np

from bench.contrasts import find
from bench.stats import ALPHA, CONFIDENCE, holm, paired_stats
from bench.summary import SummaryError, aggregate, check_one_class, class_label, fmt, parse_seeds, read_runs

RATE_KEYS = ("learning_rate", "min_lr")  # what a best-against-best pair may differ in, beside the setting


def restarts(run_dir):
    """How many times the run's clock restarted (a resume): time_s falling between its evals."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        times = [r["time_s"] for r in map(json.loads, filter(str.strip, f)) if "val_loss" in r and r.get("time_s") is not None]
    return sum(b < a for a, b in zip(times, times[1:]))


def provenance(row, commits):
    """The plan's provenance rule for one run: a list of what it breaks (empty: it passes)."""
    d, problems = row["_dir"], []
    path = os.path.join(d, "run_info.json")
    if not os.path.exists(path):
        return ["no run_info.json"]
    with open(path) as f:
        info = json.load(f)
    if not info.get("numerics"):
        problems.append("no numerics class in run_info.json")
    commit = info.get("git_commit") or ""
    if commits and not (commit and any(commit.startswith(c) for c in commits)):
        problems.append(f"commit {commit[:12] or 'none'} is not the plan's ({', '.join(c[:12] for c in commits)})")
    if info.get("git_commit_from") == "caller":
        checked = os.path.join(d, "provenance.json")
        record = json.load(open(checked)) if os.path.exists(checked) else {}
        if not (record.get("tree_verified") is True and record.get("commit") == commit):
            problems.append("its commit was given by a caller, and no provenance.json says its tree was verified against it")
    elif info.get("git_dirty") is not False:
        problems.append(f"its checkout was not recorded clean (git_dirty {info.get('git_dirty')!r})")
    parts, resumed = info.get("earlier_parts", []), restarts(d)
    if len(parts) < resumed:
        problems.append(f"resumed {resumed} time(s) but records {len(parts)} earlier part(s)")
    for part in parts:
        if part.get("git_commit") != commit or part.get("numerics") != info.get("numerics"):
            problems.append(f"an earlier part ran at {str(part.get('git_commit'))[:12]} in {part.get('numerics')}")
    return problems


def pick(aggregates, names):
    """The setting `names` names, or the first of 'A|B|...' that any run has (the second reading's run at 24comm's
    rate where it exists, else the study's own run, which --same_rate then requires to be at that rate)."""
    options = names.split("|")
    for option in options[:-1]:
        try:
            return find(aggregates, option)
        except SummaryError:
            continue
    return find(aggregates, options[-1])


def comparable(name, a, b, same_rate=False):
    """A pair's settings may differ in the setting's own keys and the peak rate (not with same_rate), nothing else."""
    x, y = (json.loads(s["_comparable"]) for s in (a, b))
    for key in () if same_rate else RATE_KEYS:
        x.pop(key, None), y.pop(key, None)
    if x != y:
        differ = ", ".join(k for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k))
        raise SummaryError(f"{name}: {a['_name']} and {b['_name']} differ in {differ}: their seeds do not pair")


def one_class(name, runs):
    for run in runs[1:]:
        check_one_class(name, runs[0], run)


def seeds_of(*settings):
    return sorted(set.intersection(*(set(s["_by_seed"]) for s in settings)))


def cost(aggregates, name, first, second, same_rate=False):
    a, b = pick(aggregates, first), pick(aggregates, second)
    comparable(name, a, b, same_rate)
    seeds = seeds_of(a, b)
    for s in seeds:
        one_class(name, [a["_by_seed"][s], b["_by_seed"][s]])
    values = {s: a["_by_seed"][s]["final_val_loss"] - b["_by_seed"][s]["final_val_loss"] for s in seeds}
    return dict(kind="cost", name=name, a=a["_name"], b=b["_name"], per_seed=values), [a, b]


def change(aggregates, name, a1, b1, a2, b2, same_rate=False):
    settings = [pick(aggregates, n) for n in (a1, b1, a2, b2)]
    comparable(name, *settings[:2], same_rate), comparable(name, *settings[2:], same_rate)
    seeds = seeds_of(*settings)
    for s in seeds:
        one_class(name, [x["_by_seed"][s] for x in settings])
    loss = lambda i, s: settings[i]["_by_seed"][s]["final_val_loss"]  # noqa: E731
    values = {s: (loss(2, s) - loss(3, s)) - (loss(0, s) - loss(1, s)) for s in seeds}
    return dict(kind="change", name=name, a=f"{settings[2]['_name']} - {settings[3]['_name']}",
                b=f"{settings[0]['_name']} - {settings[1]['_name']}", per_seed=values), settings


def trend(aggregates, name, first, second, widths, same_rate=False):
    pairs = [(pick(aggregates, first.replace("{W}", str(w))), pick(aggregates, second.replace("{W}", str(w)))) for w in widths]
    for a, b in pairs:
        comparable(name, a, b, same_rate)
    seeds = seeds_of(*(x for pair in pairs for x in pair))
    x = np.log2(np.array(widths, dtype=float))
    slopes, curvatures, costs = {}, {}, {}
    for s in seeds:
        one_class(name, [r["_by_seed"][s] for pair in pairs for r in pair])
        y = np.array([a["_by_seed"][s]["final_val_loss"] - b["_by_seed"][s]["final_val_loss"] for a, b in pairs])
        costs[s] = [float(v) for v in y]
        slopes[s] = float(np.polyfit(x, y, 1)[0])
        if len(widths) >= 3:
            curvatures[s] = float(np.polyfit(x, y, 2)[0])
    out = dict(kind="trend", name=name, a=first, b=second, widths=list(widths), per_seed=slopes, costs=costs)
    if curvatures:
        out["curvature"] = paired_stats(list(curvatures.values()))
    return out, [x for pair in pairs for x in pair]


def verdict(c):
    if c["kind"] == "trend" and c.get("curvature", {}).get("p") is not None and c["curvature"]["p"] < ALPHA:
        return "not a line: the cost does not move by the same amount with each doubling; no trend is read"
    if c["p_holm"] is None or c["p_holm"] >= ALPHA:
        return "unresolved at this power"
    if c["kind"] == "trend":
        return "resolved: the cost " + ("rises" if c["mean"] > 0 else "falls") + " with width"
    if c["kind"] == "change":
        return "resolved: the cost " + ("rises" if c["mean"] > 0 else "falls") + " from the first reading to the second"
    return "resolved: A " + ("higher" if c["mean"] > 0 else "lower")


def seed_class(run):
    """A run's numerics class (bench.summary.class_label of its run_info.json); one_class made it its seed's."""
    path = os.path.join(run["_dir"], "run_info.json")
    return class_label(json.load(open(path)) if os.path.exists(path) else {})


def family(aggregates, specs, commits, same_rate=False):
    """Every contrast of the command with its statistics, Holm over them; SummaryError on a provenance breach.
    Where a contrast's seeds ran in several numerics classes, `by_class` gives each class's own interval beside
    the pooled one (plan.md "Pooling over seeds": described, never tested)."""
    out, used = [], {}
    for kind, args in specs:
        c, settings = {"cost": cost, "change": change, "trend": trend}[kind](aggregates, *args, same_rate=same_rate)
        for setting in settings:
            for seed in c["per_seed"]:
                used[setting["_by_seed"][seed]["_dir"]] = setting["_by_seed"][seed]
        c.update(seeds=sorted(c["per_seed"]), **paired_stats(list(c["per_seed"].values())))
        classes = {}
        for seed, value in sorted(c["per_seed"].items()):
            classes.setdefault(seed_class(settings[0]["_by_seed"][seed]), {})[seed] = value
        if len(classes) > 1:
            c["by_class"] = {label: dict(seeds=sorted(v), **paired_stats(list(v.values()))) for label, v in classes.items()}
        out.append(c)
    breaches = {d: p for d, row in sorted(used.items()) if (p := provenance(row, commits))}
    if breaches:
        d, p = next(iter(breaches.items()))
        raise SummaryError(f"{len(breaches)} run(s) break the plan's provenance rule, e.g. {d}: {'; '.join(p)}")
    tested = [c for c in out if c["p"] is not None]
    for c, adjusted in zip(tested, holm([c["p"] for c in tested])):
        c["p_holm"] = adjusted
    for c in out:
        c.setdefault("p_holm", None)
        c["verdict"] = verdict(c)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", help="folders of runs (the study's runs/)")
    parser.add_argument("--seeds", default="", help="only these seeds: 600-613 (default: all)")
    parser.add_argument("--commit", action="append", default=[], required=True,
                        help="a commit the study's runs may record (the plan's; repeat for an amendment's)")
    parser.add_argument("--cost", nargs=3, action="append", default=[], metavar=("NAME", "A", "B"))
    parser.add_argument("--change", nargs=5, action="append", default=[], metavar=("NAME", "A1", "B1", "A2", "B2"))
    parser.add_argument("--trend", nargs="+", action="append", default=[], metavar="NAME A B W",
                        help="NAME A B W1 W2 [W3 ...]: A and B with {W} for each width")
    parser.add_argument("--same_rate", action="store_true", help="every pair at one peak rate (the second reading)")
    parser.add_argument("--json", default="", help="write every number here")
    args = parser.parse_args()
    if any(len(c) < 7 for c in args.commit):
        sys.exit(f"error: --commit takes a commit hash of 7 characters or more, got {args.commit}")
    specs = [("cost", c) for c in args.cost] + [("change", c) for c in args.change]
    for t in args.trend:
        if len(t) < 5 or not all(w.isdigit() for w in t[3:]):
            sys.exit(f"error: --trend {' '.join(t)}: expected NAME A B and two widths or more")
        specs.append(("trend", (*t[:3], [int(w) for w in t[3:]])))
    names = [s[1][0] for s in specs]
    if not specs or len(set(names)) != len(names):
        sys.exit(f"error: give one contrast or more (--cost, --change, --trend), each its own name; got {names}")
    try:
        rows, _ = read_runs(args.run_dirs, parse_seeds(args.seeds) if args.seeds else None)
        found = family(aggregate(rows), specs, args.commit, args.same_rate)
    except SummaryError as e:
        sys.exit(f"error: {e}")
    print(f"# {len(found)} contrasts, one family (Holm); final val loss, per seed, {CONFIDENCE:.0%} t intervals; "
          f"runs: {', '.join(args.run_dirs)}{' seeds ' + args.seeds if args.seeds else ''}")
    print("| contrast | kind | A | B | n | mean [95% CI] | p | Holm p | verdict |\n| --- | --- | --- | --- | ---: | --- | ---: | ---: | --- |")
    for c in found:
        what = c["a"] if c["kind"] != "trend" else f"{c['a']} - {c['b']} on log2 width {c['widths']}"
        print(f"| {c['name']} | {c['kind']} | {what} | {c['b'] if c['kind'] != 'trend' else ''} | {c['n']} | "
              f"{fmt(c['mean'], '+.4f')} [{fmt(c['ci_low'], '+.4f')}, {fmt(c['ci_high'], '+.4f')}] | {fmt(c['p'], '.4g')} | "
              f"{fmt(c['p_holm'], '.4g')} | {c['verdict']} |")
    for c in (c for c in found if "by_class" in c):  # described beside the pooled row, never tested
        print(f"{c['name']} by numerics class: " + "; ".join(
            f"{label}: n {k['n']} {fmt(k['mean'], '+.4f')} [{fmt(k['ci_low'], '+.4f')}, {fmt(k['ci_high'], '+.4f')}]"
            for label, k in c["by_class"].items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(found, f, indent=1, default=lambda v: None if isinstance(v, float) and not math.isfinite(v) else str(v))


if __name__ == "__main__":
    main()
