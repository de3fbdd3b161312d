"""
How much of a final val loss is eval sampling: train.py evaluates on eval_iters fixed batches,
so a run's val loss is a mean over those batches, with a standard error of its own.

    python -m bench.eval_noise runs/char_sync_study_8seeds/shakespeare_char-s1 \
        runs/char_sync_study_8seeds/shakespeare_char_24comm-s1 runs/char_sync_study_8seeds/shakespeare_char_2comm-s1

For each run directory (its ckpt.pt, the model at its last eval), the per-batch val losses on
train.py's own eval batches (the same windows: batch k of the val split comes from the seed
(seed, EVAL_VAL, k), as train.py draws it: data.common.Batches), their mean (which must equal the run's
logged val loss: checked), and the standard error of that mean over the batches. For every run
after the first, the paired per-batch difference from the first run (same seed, so the same
batches): its mean and standard error, the eval-sampling part of the two runs' difference.
What remains of a paired difference across seeds is training: the runs learned different
functions. Batches in one eval are not independent of the model, so this is the error of the
estimate over the val distribution, which is what a reader compares configs on.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import math
import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import checkpoint as ckpt
from data.common import Batches

@torch.no_grad()
def per_batch_losses(run_dir, data_dir=""):
    """(per-batch val losses on the run's eval batches, the run's logged final val loss, its config)."""
    path = os.path.join(run_dir, "ckpt.pt")
    try:
        checkpoint = ckpt.load(path, "cpu")
    except ckpt.CheckpointError as e:
        sys.exit(f"error: {e}")
    config = checkpoint["config"]
    model = ckpt.model_as_run(checkpoint, "cpu").eval()  # the `sim` layout: every rank's shards
    data_dir = data_dir or config.get("data_dir") or os.path.join(ROOT, "data", config["dataset"])
    batch = Batches(data_dir, config["batch_size"], config["block_size"], config["seed"], 0, "cpu")  # train.py's
    losses = [model(*batch("val", None, k))[1].item()
              for k in range(config["eval_iters"])]
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        evals = [r for r in map(json.loads, f) if "val_loss" in r and r["iter"] == checkpoint["iter_num"]]
    return losses, evals[-1]["val_loss"] if evals else None, config


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", help="run directories with ckpt.pt and metrics.jsonl; the first is the reference")
    parser.add_argument("--data_dir", default="", help="default: the run's data_dir or data/<dataset>")
    args = parser.parse_args()
    first = None
    print("| run | seed | batches | val loss (mean) | logged | per-batch std | standard error | "
          "paired diff vs first | its standard error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for run_dir in args.run_dirs:
        losses, logged, config = per_batch_losses(run_dir, args.data_dir)
        mean, n = statistics.fmean(losses), len(losses)
        if logged is not None and abs(mean - logged) > 1e-4:
            sys.exit(f"error: {run_dir}: recomputed val loss {mean:.6f} differs from the logged {logged:.6f}: "
                     f"these are not train.py's eval batches")
        std = statistics.stdev(losses) if n > 1 else math.nan
        paired = ""
        if first is not None and first[1]["seed"] == config["seed"] and len(first[0]) == n:
            diffs = [a - b for a, b in zip(losses, first[0])]
            paired = f"{statistics.fmean(diffs):+.4f} | {statistics.stdev(diffs) / math.sqrt(n):.4f}"
        elif first is not None:
            paired = "other seed or batches | "
        else:
            paired = " | "
        print(f"| {os.path.basename(os.path.normpath(run_dir))} | {config['seed']} | {n} | {mean:.4f} | "
              f"{'-' if logged is None else f'{logged:.4f}'} | {std:.4f} | {std / math.sqrt(n):.4f} | {paired} |")
        first = first or (losses, config)


if __name__ == "__main__":
    main()
