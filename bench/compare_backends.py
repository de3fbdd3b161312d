"""
Native vs megatron-core backend: the same config, seed and data, side by side in one run.

    python -m bench.compare_backends                                    # char scale, TP=2 on gloo
    python -m bench.compare_backends --config config/train_gpt2_12comm.py --nproc 8 --max_iters 200

Each repeat launches train.py (tp_mode='dist' under torchrun) once per backend, the
backends alternating; it/s and tokens/s are medians over repeats of each run's median
step time (the first steps and the steps with an eval excluded). Val loss, perplexity
and next-token accuracy are the final eval's (identical across repeats: runs are seeded).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

from bench.harness import records, torchrun

BACKENDS = ("native", "megatron")


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
    parser.add_argument("--set", nargs="*", default=[], metavar="--KEY=VALUE", help="more train.py overrides")
    args = parser.parse_args()
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
    ratio = statistics.median(m / n for m, n in zip(ms["megatron"], ms["native"]))
    print(f"\nmegatron step time / native step time: {ratio:.3f} (median over repeats of the paired ratio)")


def _version(package):
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    main()
