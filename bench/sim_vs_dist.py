"""
How closely real multi-process TP (`tp_mode='dist'`) reproduces the one-process simulation
(`tp_mode='sim'`): the same short run both ways for each block pattern and link, and the
largest |sim - dist| difference in train and val loss over all logged steps.

    python -m bench.sim_vs_dist                                   # CPU, gloo, fp32, TP=2
    python -m bench.sim_vs_dist --set device=cuda dtype=bfloat16  # NCCL; needs 2 GPUs

tests/test_dist.py asserts the agreement (< 1e-5 in fp32); this prints how close it is.
Both runs draw the same packet masks, so the packet counts must match exactly: a row whose
counts differ is marked, and the script exits non-zero.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import os
import sys
import tempfile

from bench.harness import LINKS, PATTERNS, link_args, records, run_train, torchrun

LABELS = {"lossless": "lossless", "bernoulli": "bernoulli 5%", "gilbert_elliott": "GE heavy"}  # rows of LINKS


def train(args, out_dir, dist):
    train_args = [args.config, f"--out_dir={out_dir}", "--compile=False", f"--tp_size={args.tp_size}",
                  f"--max_iters={args.max_iters}", "--log_interval=1", "--eval_interval=5",
                  f"--tp_mode={'dist' if dist else 'sim'}", *args.extra]
    result = torchrun(args.tp_size, *train_args, timeout=None) if dist else run_train(*train_args, timeout=None)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(train_args[-4:])} failed: {result.stderr.strip().splitlines()[-1:]}")
    return records(out_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--config", default="config/train_shakespeare_char_24comm.py",
                        help="the model and data; block_types and the link are set per row")
    parser.add_argument("--tp_size", type=int, default=2)
    parser.add_argument("--max_iters", type=int, default=10)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="more train.py overrides")
    args = parser.parse_args()
    print(f"{'pattern':8s} {'link':13s} {'steps':>5s} {'max |train diff|':>17s} {'max |val diff|':>15s}  packets")
    worst, mismatched = 0.0, False
    with tempfile.TemporaryDirectory() as tmp:
        for pattern, block_types in PATTERNS.items():
            for name, link_config in LINKS.items():
                link = LABELS[name]
                args.extra = [f"--block_types={block_types}", *link_args(link_config), *(f"--{kv}" for kv in args.set)]
                row = os.path.join(tmp, f"{pattern}-{link.replace(' ', '-')}")
                sim = train(args, row + "-sim", dist=False)
                dst = train(args, row + "-dist", dist=True)
                diff = {key: max((abs(a[key] - b[key]) for a, b in zip(sim, dst) if key in a), default=0.0)
                        for key in ("train_loss", "val_loss")}
                same_packets = all(a.get("packets_lost") == b.get("packets_lost") for a, b in zip(sim, dst))
                mismatched |= not same_packets or len(sim) != len(dst)
                worst = max(worst, *diff.values())
                steps = sum("val_loss" not in r for r in sim)
                print(f"{pattern:8s} {link:13s} {steps:5d} {diff['train_loss']:17.2e} {diff['val_loss']:15.2e}  "
                      f"{'same' if same_packets else 'DIFFERENT'}", flush=True)
    print(f"worst |sim - dist| loss difference: {worst:.2e}")
    if mismatched:
        sys.exit("error: sim and dist drew different packet masks or logged different steps")


if __name__ == "__main__":
    main()
