"""The SP loss study's control (plan.md): lossless sequence parallelism must log, bit for bit, every train
and val loss the lossless all-reduce run of the same config and seed logs. Writes control.json.

    python -m bench.studies.sp_loss.control bench/studies/sp_loss/runs --seed 400
"""
import argparse
import json
import os
import sys


def losses(run_dir):
    """[(iter, key, value)] of every train and val loss in a run's metrics.jsonl, in order."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [(r["iter"], key, r[key]) for r in records for key in ("train_loss", "val_loss") if key in r]


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("runs", help="the study's runs/ folder")
    parser.add_argument("--seed", type=int, default=400)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "control.json"))
    args = parser.parse_args()
    out = {}
    for config in ("24comm", "12comm"):
        pair = [os.path.join(args.runs, f"shakespeare_char_{config}-{setting}-s{args.seed}") for setting in ("lossless", "lossless_sp")]
        missing = [p for p in pair if not os.path.exists(os.path.join(p, "metrics.jsonl"))]
        if missing:
            sys.exit(f"error: {missing[0]}: no metrics.jsonl; run both sweeps' seed {args.seed} first")
        plain, sp = (losses(p) for p in pair)
        diffs = [abs(a[2] - b[2]) for a, b in zip(plain, sp)]
        out[config] = dict(records=len(plain), identical=plain == sp, max_abs_diff=max(diffs, default=0.0))
        print(f"{config}: {len(plain)} losses, identical: {plain == sp}, largest difference {out[config]['max_abs_diff']:.3g}")
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
