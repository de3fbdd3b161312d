"""
The within-seed trend of final val loss on the sync count: for each seed, the least-squares slope of
final val loss on the sync count (or its log2) over the TP configs of a study summary, then a t test
over the seeds' slopes (scipy.stats through bench/stats.py). A negative slope per sync means the loss
rises as syncs are dropped. The seeds' runs pair by construction (same seed: same initial weights and
batches), so each slope is a within-seed comparison.

    python -m bench.trend bench/studies/sync_count/experiment_summary.csv
    python -m bench.trend bench/studies/cliff/experiment_summary.csv --seeds 9-16 --min_syncs 1
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import csv
import json
import math
import sys
from collections import defaultdict

import numpy as np

from bench.stats import paired_stats
from bench.summary import SummaryError, parse_seeds


def slopes(rows, log2=False, min_syncs=1, max_syncs=None):
    """seed -> the least-squares slope of final val loss on syncs (or log2 syncs) over its TP runs
    (tp_size > 1, lossless, done) with min_syncs <= syncs <= max_syncs; seeds with < 3 such runs left out."""
    points = defaultdict(list)
    for r in rows:
        if r.get("kind") != "run" or r.get("status") != "done" or int(r["tp_size"]) < 2:
            continue
        if r.get("loss_model", "none") not in ("none", "") or r.get("setting"):
            continue
        syncs = int(r["sync_points"])
        if syncs < min_syncs or (max_syncs is not None and syncs > max_syncs):
            continue
        points[int(r["seed"])].append((math.log2(syncs) if log2 else syncs, float(r["final_val_loss"])))
    return {seed: float(np.polyfit(*zip(*p), 1)[0]) for seed, p in sorted(points.items()) if len(p) >= 3}


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("summary", help="a study's experiment_summary.csv (python -m bench.summarize)")
    parser.add_argument("--seeds", default="", help="only these seeds, e.g. 9-16")
    parser.add_argument("--min_syncs", type=int, default=1)
    parser.add_argument("--max_syncs", type=int, default=None)
    parser.add_argument("--json", default="", help="also write the table's numbers here (bench/render.py reads them)")
    args = parser.parse_args()
    try:
        with open(args.summary) as f:
            rows = list(csv.DictReader(f))
        keep = parse_seeds(args.seeds) if args.seeds else None
    except (OSError, SummaryError) as e:
        sys.exit(f"error: {e}")
    if keep is not None:
        rows = [r for r in rows if r.get("seed", "").isdigit() and int(r["seed"]) in keep]
    print(f"# within-seed trend of final val loss on the sync count, {args.summary}, syncs in "
          f"[{args.min_syncs}, {args.max_syncs or 'max'}]; per-seed least-squares slopes, t test over seeds")
    print("| regressor | seeds | mean slope [95% CI] | p (two-sided) | per-seed slopes |")
    print("| --- | ---: | --- | ---: | --- |")
    found = dict(summary=args.summary, seeds=args.seeds, min_syncs=args.min_syncs, max_syncs=args.max_syncs)
    for log2, name, key in ((False, "per sync", "per_sync"), (True, "per doubling of the syncs", "per_doubling")):
        per_seed = slopes(rows, log2, args.min_syncs, args.max_syncs)
        if len(per_seed) < 2:
            sys.exit(f"error: {args.summary}: fewer than 2 seeds with 3 or more TP runs in the range")
        s = paired_stats(list(per_seed.values()))
        found[key] = dict(s, per_seed={str(seed): v for seed, v in per_seed.items()})
        print(f"| {name} | {s['n']} | {s['mean']:+.5f} [{s['ci_low']:+.5f}, {s['ci_high']:+.5f}] | {s['p']:.2g} | "
              + ", ".join(f"{seed}: {v:+.5f}" for seed, v in per_seed.items()) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
