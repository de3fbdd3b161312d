"""The width-alone study's tuning rule (plan.md "Tuning"), applied to a width's tuning runs: each setting's
sensitivity curve (final val loss against peak rate over the tuning seeds), the grid points the rule still needs
(tuning/extensions.json), and, once every setting of the width is decided, its chosen rates (chosen_rates.json).

    python -m bench.studies.width_alone.rates --width 64 --runs bench/studies/width_alone/tuning/runs          # print
    python -m bench.studies.width_alone.rates --width 64 --runs bench/studies/width_alone/tuning/runs --write  # and write

The rule, per setting at a width (fixed in plan.md before any run):
  1. the mean final val loss over the tuning seeds at each rate of the setting's grid; a run that diverged (train.py
     stopped it on a non-finite loss, or its final val loss is not finite) counts as +inf, so its rate's mean is +inf;
  2. the rate with the lowest mean wins; a larger rate within TIE (0.005 nats) of the lowest mean wins instead;
  3. a winner at an end of the grid extends the grid one factor of two past that end (the next run of the tuning
     sweep runs it on the same seeds) and the rule is applied again; after MAX_EXTENSIONS past one end the winner
     stands, flagged at the edge of the range searched; every rate +inf extends downwards (then: untrainable);
  4. once 24comm's rate at the width is chosen, every other setting's grid holds it (added if missing), so its
     cost at 24comm's rate (the second reading) exists on the tuning seeds; its choice counts only then.
A run that has not run, or stopped without a verdict (killed, crashed: no result.json and no non-finite error),
leaves the width undecided: run the tuning sweep again first.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import math
import os
import statistics
import sys

from bench import sweep as sweeps
from bench.studies.width_alone import design

TIE = 0.005          # nats: the scale study's tie margin, the larger rate wins
MAX_EXTENSIONS = 3   # grid points past one end of the base grid before the winner stands at the edge
BAND = 0.1           # nats: the sensitivity curve's stable band, rates whose mean is within this of the best
DIVERGED = ("is not finite", "non-finite loss")  # train.py's errors when it stops a run on a non-finite loss


def rule(means, base):
    """The rule's steps 1-3 on {rate: mean} (+inf for a diverged rate) with the width's base grid: ('chosen', lr),
    ('edge', lr) at an end after MAX_EXTENSIONS, ('extend', next lr) or ('untrainable', None)."""
    rates = sorted(means)
    below = sum(lr < min(base) for lr in rates)
    above = sum(lr > max(base) for lr in rates)
    best = min(means.values())
    if not math.isfinite(best):
        return ("extend", rates[0] / 2) if below < MAX_EXTENSIONS else ("untrainable", None)
    pick = max(lr for lr, m in means.items() if m <= best + TIE)
    if pick == rates[-1]:
        return ("extend", pick * 2) if above < MAX_EXTENSIONS else ("edge", pick)
    if pick == rates[0]:
        return ("extend", pick / 2) if below < MAX_EXTENSIONS else ("edge", pick)
    return "chosen", pick


def decide(width, finals, settings):
    """The rule over a width's settings. finals: {setting: {rate: [final val loss per tuning seed]}}, every seed
    present. Returns ({setting: (verdict, lr)}, {setting: [rates to add to its grid]})."""
    verdicts, needed = {}, {}
    for s in settings:
        means = {lr: (statistics.fmean(v) if all(math.isfinite(x) for x in v) else math.inf) for lr, v in finals[s].items()}
        verdicts[s] = rule(means, design.GRID[width])
        if verdicts[s][0] == "extend":
            needed.setdefault(s, []).append(verdicts[s][1])
    ref = verdicts.get("ref24")
    if ref and ref[0] in ("chosen", "edge"):
        for s in settings:  # step 4: 24comm's rate in every grid
            if s != "ref24" and ref[1] not in finals[s]:
                needed.setdefault(s, []).append(ref[1])
                verdicts[s] = ("pending", None)
    return verdicts, needed


def run_result(run_dir):
    """A tuning run's final val loss: a number, +inf if it diverged, None if it has no verdict yet."""
    result = os.path.join(run_dir, "result.json")
    if os.path.exists(result):
        with open(result) as f:
            final = json.load(f)["final"]["val_loss"]
        return final if math.isfinite(final) else math.inf
    log = os.path.join(run_dir, "train.log")
    if os.path.exists(log):
        with open(log, errors="replace") as f:
            errors = [line for line in f if line.startswith("error:")]
        if errors and any(d in errors[-1] for d in DIVERGED):
            return math.inf
    return None


def collect(width, runs_dir, state=None):
    """{setting: {rate: [final per seed]}} of the width's tuning sweep as planned now, the run folders looked up
    under runs_dir by run id (the committed layout, runs/<id>) or as bench.sweep writes them (<name>/<id>);
    and the ids with no verdict yet."""
    sweep = design.tuning_sweep(width, design.CPU[width], design.TUNING_SEEDS, design.read_state("tuning/extensions.json", state))
    finals, missing = {}, []
    for run in sweeps.plan(sweep, runs_dir):
        keys = sweep["settings"][run["setting"]]
        setting = run["setting"].split("_")[1]
        here = [d for d in (os.path.join(runs_dir, run["id"]), run["dir"]) if os.path.isdir(d)]
        final = run_result(here[0]) if here else None
        if final is None:
            missing.append(run["id"])
            continue
        finals.setdefault(setting, {}).setdefault(keys["learning_rate"], []).append(final)
    return finals, missing


def curve(finals):
    """The sensitivity curve: {rate: mean, sd, min, max over the seeds, diverged seeds}; and its stable band."""
    points = {}
    for lr, v in sorted(finals.items()):
        ok = [x for x in v if math.isfinite(x)]
        points[lr] = dict(n=len(v), diverged=len(v) - len(ok), mean=statistics.fmean(v) if len(ok) == len(v) else math.inf,
                          sd=statistics.stdev(ok) if len(ok) > 1 else None, min=min(ok, default=None), max=max(ok, default=None))
    best = min(p["mean"] for p in points.values())
    band = [lr for lr, p in points.items() if p["diverged"] == 0 and p["mean"] <= best + BAND] if math.isfinite(best) else []
    return dict(points=points, band=band, band_steps=math.log2(max(band) / min(band)) if band else None,
                highest_stable=max(band) if band else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--width", type=int, required=True, choices=sorted(design.CPU))
    parser.add_argument("--runs", required=True, help="the tuning's run folders (bench/studies/width_alone/tuning/runs)")
    parser.add_argument("--write", action="store_true", help="write tuning/extensions.json, and chosen_rates.json and "
                        "tuning/sensitivity_w<W>.json once the width is decided (into WIDTH_ALONE_STATE)")
    args = parser.parse_args()
    state = design.STATE
    try:
        finals, missing = collect(args.width, args.runs)
    except ValueError as e:
        sys.exit(f"error: {e}")
    if missing:
        sys.exit(f"error: n_embd {args.width}: {len(missing)} tuning runs have no verdict yet (not run, or stopped "
                 f"without one), e.g. {missing[0]}: run the tuning sweep first")
    settings = design.CPU[args.width]
    verdicts, needed = decide(args.width, finals, settings)
    curves = {s: curve(finals[s]) for s in settings}
    print(f"# n_embd {args.width}: final val loss over tuning seeds {design.TUNING_SEEDS} by peak rate: mean (sd) [min, max]")
    for s in settings:
        points = "; ".join(f"{lr:g}: " + (f"{p['mean']:.4f} ({p['sd']:.4f}) [{p['min']:.4f}, {p['max']:.4f}]"
                                          if math.isfinite(p["mean"]) else f"diverged ({p['diverged']} of {p['n']})")
                           for lr, p in curves[s]["points"].items())
        verdict, lr = verdicts[s]
        print(f"{s}: {points} -> {verdict}{f' {lr:g}' if lr else ''}; stable band (within {BAND} nats of its best): "
              f"{', '.join(f'{x:g}' for x in curves[s]['band']) or 'none'}")
    # decided: nothing left to run; an untrainable setting is chosen as null, which the study's sweeps refuse
    # to plan until an amendment to plan.md says what becomes of it
    decided = not needed and all(v in ("chosen", "edge", "untrainable") for v, _ in verdicts.values())
    if not args.write:
        return
    ext_path = os.path.join(state, "tuning", "extensions.json")
    extensions = design.read_state("tuning/extensions.json", state)
    for s, lrs in needed.items():
        at = extensions.setdefault(str(args.width), {}).setdefault(s, [])
        at += [lr for lr in lrs if lr not in at]
    with open(ext_path, "w") as f:
        json.dump(extensions, f, indent=1, sort_keys=True)
    print(f"wrote {ext_path}" + (f": to run next, {needed}" if needed else ": nothing more to run"))
    if decided:
        rates = design.read_state("chosen_rates.json", state)
        rates[str(args.width)] = {s: lr for s, (_, lr) in verdicts.items()}
        with open(os.path.join(state, "chosen_rates.json"), "w") as f:
            json.dump(rates, f, indent=1)
        with open(os.path.join(state, "tuning", f"sensitivity_w{args.width}.json"), "w") as f:
            json.dump(dict(width=args.width, seeds=design.TUNING_SEEDS, tie=TIE, band=BAND, verdicts=verdicts,
                           curves={s: {**c, "points": {f"{lr:g}": p for lr, p in c["points"].items()}}
                                   for s, c in curves.items()}), f, indent=1, default=str)
        print(f"n_embd {args.width} decided: {rates[str(args.width)]} -> chosen_rates.json (commit it before any study run)")


if __name__ == "__main__":
    main()
