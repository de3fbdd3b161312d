"""
Native vs megatron-core backend: the same config, seed and data, side by side in one run.

    python -m bench.compare_backends                                    # char scale, TP=2 on gloo
    python -m bench.compare_backends --config config/train_gpt2_12comm.py --nproc 8 --max_iters 200
    python -m bench.compare_backends --seed002 --repeats 5   # seed 002's MoE + Muon model at a CPU size

Each repeat launches train.py (tp_mode='dist' under torchrun) once per backend, the
backends alternating; it/s and tokens/s are medians over repeats of each run's median
step time (the first steps and the steps with an eval excluded). Val loss, perplexity
and next-token accuracy are the final eval's (identical across repeats: runs are seeded).
The step-time ratio megatron / native is paired per repeat (the two runs back to back): its
geometric mean with a 95% t interval over the repeats' log ratios. Further --key=value
arguments go to train.py.

--seed002 runs seed 002's model (config/train_moe_seed002_12comm.py: 8 experts, top-2, 6 layers,
8 heads, Muon + AdamW) at a CPU size: n_embd 128 (the seed's 384 is 9x the FLOPs), block 128,
batch 8, on char-level Shakespeare.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import math
import os
import statistics
import sys
import tempfile

from bench.harness import records, torchrun
from bench.stats import paired_stats

BACKENDS = ("native", "megatron")
SEED002 = ["--dataset=shakespeare_char", "--n_embd=128", "--block_size=128", "--batch_size=8", "--eval_iters=10"]


def launch(args, backend, out_dir):
    result = torchrun(args.nproc, args.config, "--tp_mode=dist", f"--tp_backend={backend}",
                      f"--max_iters={args.max_iters}", f"--out_dir={out_dir}", "--log_interval=1",
                      f"--eval_interval={args.max_iters}", "--compile=False", *args.set,
                      env={"OMP_NUM_THREADS": str(args.threads)}, timeout=None)
    if result.returncode != 0:
        sys.exit(f"error: the {backend} run failed: {result.stderr.strip().splitlines()[-1:]}")
    logged = records(out_dir)
    with open(os.path.join(out_dir, "config.json")) as f:
        config = json.load(f)
    tokens = config["gradient_accumulation_steps"] * config["batch_size"] * config["block_size"]  # per iteration
    steps = [r for r in logged if "val_loss" not in r][5:]  # skip the first steps (warm-up)
    return statistics.median(r["ms_per_iter"] for r in steps), logged[-1], tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--config", default="config/train_shakespeare_char_24comm.py")
    parser.add_argument("--nproc", type=int, default=2, help="processes (a multiple of the config's tp_size)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per process")
    parser.add_argument("--max_iters", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed002", action="store_true", help="seed 002's MoE + Muon model at a CPU size")
    args, args.set = parser.parse_known_args()  # the rest: --key=value overrides for train.py
    if args.seed002:
        args.config, args.set = "config/train_moe_seed002_12comm.py", SEED002 + args.set
    ms = {b: [] for b in BACKENDS}
    final, tokens = {}, 0
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for backend in BACKENDS:
                step_ms, last, tokens = launch(args, backend, os.path.join(tmp, f"{backend}-{repeat}"))
                ms[backend].append(step_ms)
                final[backend] = last
    import torch
    print(f"# native vs megatron-core, {args.config}, tp_mode=dist, {args.nproc} processes x {args.threads} thread(s), "
          f"{args.max_iters} iterations, {args.repeats} repeats, torch {torch.__version__}, "
          f"megatron-core {_version('megatron-core')}")
    print("| backend | ms/iter (median) | it/s | tokens/s | final val loss | perplexity | next-token accuracy |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for backend in BACKENDS:
        step = statistics.median(ms[backend]) / 1000
        r = final[backend]
        print(f"| {backend} | {step * 1000:.1f} | {1 / step:.2f} | {tokens / step:,.0f} | {r['val_loss']:.4f} | "
              f"{r['val_perplexity']:.3f} | {r['val_accuracy']:.4f} |")
    logs = paired_stats([math.log(m / n) for m, n in zip(ms["megatron"], ms["native"])])
    interval = "" if logs["ci_low"] is None else f" [{math.exp(logs['ci_low']):.3f}, {math.exp(logs['ci_high']):.3f}]"
    print(f"\nmegatron step time / native step time: {math.exp(logs['mean']):.3f}{interval} (geometric mean of "
          f"the {logs['n']} paired per-repeat ratios, 95% t interval)")


def _version(package):
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    main()
