"""
This project against the project it forks: karpathy/nanoGPT's own train.py, run on the same
data with the same hyperparameters, next to this project's dense and 24comm char configs.

    python -m bench.vs_nanogpt                    # timing: 3 interleaved rounds of 60 iterations
    python -m bench.vs_nanogpt --full             # and full max_iters runs for the final val losses
    python -m bench.vs_nanogpt --nanogpt_dir DIR  # nanoGPT's checkout (default below)

nanoGPT is not part of this repository and is not copied into it: the script runs its
train.py, model.py and configurator.py from a checkout the user provides, at the pinned
commit below. Get it once with

    git clone https://github.com/karpathy/nanoGPT ~/.cache/tp-sync/nanoGPT
    git -C ~/.cache/tp-sync/nanoGPT checkout 3adf61e154c3fe3fca428ad6bc3818b27a3b8291

nanoGPT runs in a temporary working directory that holds links to those three files and
`data/shakespeare_char` -> this project's prepared data (python data/shakespeare_char/prepare.py),
because nanoGPT reads configurator.py and data/<dataset>/ relative to its cwd.

Every program gets the hyperparameters of config/train_shakespeare_char.py (resolved over
train.py's defaults), log_interval=1, the same device, dtype and compile setting (default
cpu, float32, no compile; `--device cuda` defaults to bfloat16 and compile, both programs' GPU
defaults), and the same OMP/MKL thread count. The rounds interleave nanoGPT, dense and 24comm, so drift on a
shared machine hits them alike; ms/iter is the median of each run's own logged per-iteration
times (nanoGPT's `iter N: ... time Yms` lines, this project's metrics.jsonl `ms_per_iter`)
over iterations [--warmup, --iters), which excludes iteration 0 and its eval. What differs:

- nanoGPT's iteration time includes fetching the next batch (prefetched inside the step) and,
  at an eval iteration, the eval and checkpoint save; this project's includes fetching its
  batch and excludes evals. No timed iteration has an eval here.
- nanoGPT draws training batches from the global torch RNG (seeded 1337); this project from
  per-step seeds, and evaluates on the same fixed eval_iters batches every time, where nanoGPT
  draws fresh random eval batches. So the final val losses are two estimates of two models
  trained on different samples: they agree only to within seed (and eval sampling) noise.
- nanoGPT has no seed option; for a second seed the script gives it a small config file that
  offsets its one torch.manual_seed call (the run is otherwise unmodified).
- nanoGPT trains max_iters + 1 steps and evaluates before the last one; its val loss at
  `step max_iters` is, as here, the model after max_iters updates.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import configurator
from bench.stats import CONFIDENCE, paired_stats

NANOGPT_URL = "https://github.com/karpathy/nanoGPT"
NANOGPT_COMMIT = "3adf61e154c3fe3fca428ad6bc3818b27a3b8291"  # 2025-11-12; code unchanged since 93a43d9 (2024-12-09)
NANOGPT_FILES = ("train.py", "model.py", "configurator.py")
DEFAULT_DIR = os.path.join("~", ".cache", "tp-sync", "nanoGPT")
RUN_FLAGS = []  # --device, --dtype, --compile: the same for every program (set in main)
DENSE = "config/train_shakespeare_char.py"
TP24 = "config/train_shakespeare_char_24comm.py"
# the keys handed to nanoGPT's train.py, taken from the project's resolved dense config
NANOGPT_KEYS = ("dataset", "n_layer", "n_head", "n_embd", "block_size", "dropout", "bias", "batch_size",
                "gradient_accumulation_steps", "learning_rate", "max_iters", "weight_decay", "beta1", "beta2",
                "grad_clip", "decay_lr", "warmup_iters", "lr_decay_iters", "min_lr", "eval_iters", "eval_interval")
ITER_LINE = re.compile(r"^iter (\d+): loss [-\d.naninf]+, time ([\d.]+)ms", re.M)
VAL_LINE = re.compile(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)", re.M)


def get_command(directory):
    return f"git clone {NANOGPT_URL} {directory} && git -C {directory} checkout {NANOGPT_COMMIT}"


def check_nanogpt(directory):
    """The checkout's absolute path; one-line exit when it is missing, a warning when not at the pin."""
    path = os.path.abspath(os.path.expanduser(directory))
    missing = [f for f in NANOGPT_FILES if not os.path.isfile(os.path.join(path, f))]
    if missing:
        sys.exit(f"vs_nanogpt: no nanoGPT checkout at {path} (missing {', '.join(missing)}); get it with: "
                 f"{get_command(directory)}")
    if os.path.isdir(os.path.join(path, ".git")):
        head = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        if head != NANOGPT_COMMIT:
            print(f"warning: nanoGPT at {path} is at {head or 'an unknown commit'}, not the pinned {NANOGPT_COMMIT}; "
                  f"numbers may not match bench/RESULTS.md", file=sys.stderr)
        dirty = subprocess.run(["git", "-C", path, "diff", "--quiet", "HEAD", "--", *NANOGPT_FILES])
        if dirty.returncode != 0:
            print(f"warning: nanoGPT's {'/'.join(NANOGPT_FILES)} at {path} have local changes", file=sys.stderr)
    else:
        print(f"warning: {path} is not a git checkout; cannot check it is nanoGPT {NANOGPT_COMMIT[:10]}",
              file=sys.stderr)
    return path


def run_flags(device, dtype=None, compile=None):
    """The flags every program gets: on cuda both programs' GPU defaults (bfloat16, compiled)
    unless given, on cpu float32 eager."""
    on_gpu = device.startswith("cuda")
    dtype = dtype or ("bfloat16" if on_gpu else "float32")
    compile_on = (compile or ("on" if on_gpu else "off")) == "on"
    return [f"--device={device}", f"--dtype={dtype}", f"--compile={compile_on}"]


def dense_config():
    config, _ = configurator.configure(configurator.train_defaults(), [os.path.join(ROOT, DENSE)])
    return config


def fmt(value):
    return repr(value)  # nanoGPT's configurator literal_evals and checks the type: 0.01, 600, True


def run_nanogpt(nano_dir, work, hp, seed, env):
    """nanoGPT's train.py with the hyperparameters `hp`; returns its stdout."""
    run_dir = tempfile.mkdtemp(dir=work, prefix="nanogpt-")
    for f in NANOGPT_FILES:
        os.symlink(os.path.join(nano_dir, f), os.path.join(run_dir, f))
    os.makedirs(os.path.join(run_dir, "data"))
    os.symlink(os.path.join(ROOT, "data", hp["dataset"]), os.path.join(run_dir, "data", hp["dataset"]))
    args = [sys.executable, "train.py"]
    if seed != 1337:  # nanoGPT seeds torch.manual_seed(1337 + seed_offset) after reading its config
        with open(os.path.join(run_dir, "seed_offset.py"), "w") as f:
            f.write("import torch as _torch\n_manual_seed = _torch.manual_seed\n"
                    f"_torch.manual_seed = lambda s, _m=_manual_seed: _m(s + {seed - 1337})\n")
        args.append("seed_offset.py")
    args += [f"--{k}={fmt(hp[k]) if not isinstance(hp[k], str) else hp[k]}" for k in NANOGPT_KEYS]
    args += RUN_FLAGS + ["--log_interval=1",
             "--always_save_checkpoint=False", "--wandb_log=False", f"--out_dir={os.path.join(run_dir, 'out')}"]
    result = subprocess.run(args, cwd=run_dir, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"vs_nanogpt: nanoGPT's train.py failed:\n{result.stdout[-2000:]}{result.stderr[-3000:]}")
    return result.stdout


def run_project(config_file, work, hp, seed, env):
    """This project's train.py with config_file and the overrides of `hp`; returns its metrics records."""
    out_dir = tempfile.mkdtemp(dir=work, prefix="project-")
    args = [sys.executable, os.path.join(ROOT, "train.py"), os.path.join(ROOT, config_file),
            f"--max_iters={hp['max_iters']}", f"--lr_decay_iters={hp['lr_decay_iters']}",
            f"--eval_iters={hp['eval_iters']}", f"--eval_interval={hp['eval_interval']}", f"--seed={seed}",
            *RUN_FLAGS, "--log_interval=1", "--wandb_log=False",
            f"--out_dir={out_dir}"]
    result = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"vs_nanogpt: train.py {config_file} failed:\n{result.stdout[-2000:]}{result.stderr[-3000:]}")
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def nanogpt_times(stdout, lo, hi):
    return [float(ms) for it, ms in ITER_LINE.findall(stdout) if lo <= int(it) < hi]


def project_times(records, lo, hi):
    return [r["ms_per_iter"] for r in records if "ms_per_iter" in r and lo <= r["iter"] < hi]


def nanogpt_final_val(stdout, max_iters):
    vals = {int(it): float(v) for it, _, v in VAL_LINE.findall(stdout)}
    return vals[max_iters]


def project_final_val(records, max_iters):
    return [r["val_loss"] for r in records if "val_loss" in r and r["iter"] == max_iters][-1]


PROGRAMS = ("nanoGPT", "dense", "24comm")


def run_one(name, nano_dir, work, hp, seed, env):
    if name == "nanoGPT":
        return run_nanogpt(nano_dir, work, hp, seed, env)
    return run_project(DENSE if name == "dense" else TP24, work, hp, seed, env)


def timing(args, nano_dir, work, base, env):
    hp = dict(base, max_iters=args.iters, eval_iters=2, eval_interval=10 ** 9)  # evals (iteration 0) not timed
    tokens = base["batch_size"] * base["block_size"] * base["gradient_accumulation_steps"]
    per_round = {p: [] for p in PROGRAMS}
    for r in range(args.rounds):
        for p in PROGRAMS:
            t = time.time()
            out = run_one(p, nano_dir, work, hp, args.seed, env)
            times = (nanogpt_times if p == "nanoGPT" else project_times)(out, args.warmup, args.iters)
            if len(times) != args.iters - args.warmup:
                sys.exit(f"vs_nanogpt: {p} logged {len(times)} timed iterations, expected {args.iters - args.warmup}")
            per_round[p].append(statistics.median(times))
            print(f"round {r + 1}/{args.rounds} {p:8s} median {per_round[p][-1]:7.1f} ms/iter "
                  f"(iterations {args.warmup}..{args.iters - 1}; run took {time.time() - t:.0f}s)", flush=True)
        print(f"\nafter {r + 1} of {args.rounds} rounds:")  # a run stopped early still leaves a table
        timing_table(per_round, tokens)


def timing_table(per_round, tokens):
    print(f"| program | ms/iter (median of round medians) | per-round medians | tokens/s | "
          f"tokens/s vs nanoGPT (median of per-round ratios) |")
    print("| --- | ---: | --- | ---: | ---: |")
    for p in PROGRAMS:
        ms = statistics.median(per_round[p])
        ratio = statistics.median(n / m for n, m in zip(per_round["nanoGPT"], per_round[p]))
        rounds = ", ".join(f"{m:.1f}" for m in per_round[p])
        print(f"| {p} | {ms:.1f} | {rounds} | {tokens / ms * 1000:,.0f} | {ratio:.3f} |")
    ratios = [n / m for n, m in zip(per_round["nanoGPT"], per_round["dense"])]
    stats = paired_stats([r - 1.0 for r in ratios])  # per-round ratio minus parity
    if stats["ci_low"] is None:
        verdict = "unresolved (one round: no interval)"
    else:  # a verdict only where the interval leaves parity out; on a noisy machine it rarely does
        low, high = 1 + stats["ci_low"], 1 + stats["ci_high"]
        verdict = (f"{'holds' if low > 1 else 'missed' if high < 1 else 'unresolved'} "
                   f"(per-round dense/nanoGPT tokens/s: mean {1 + stats['mean']:.3f}, "
                   f"{CONFIDENCE:.0%} CI [{low:.3f}, {high:.3f}] over {len(ratios)} rounds)")
    print(f"\ngoal (dense tokens/s >= nanoGPT's): {verdict}", flush=True)


def full(args, nano_dir, work, base, env):
    hp = dict(base, eval_iters=args.full_eval_iters, eval_interval=base["max_iters"])  # evals at 0 and the end
    vals = {p: [] for p in args.programs}
    for seed in args.seeds:
        for p in args.programs:
            t = time.time()
            out = run_one(p, nano_dir, work, hp, seed, env)
            val = (nanogpt_final_val if p == "nanoGPT" else project_final_val)(out, hp["max_iters"])
            vals[p].append(val)
            print(f"seed {seed} {p:8s} val loss at iteration {hp['max_iters']}: {val:.4f} "
                  f"({time.time() - t:.0f}s)", flush=True)
    print(f"\n| program | final val loss per seed ({', '.join(map(str, args.seeds))}) | mean | spread (max-min) |")
    print("| --- | --- | ---: | ---: |")
    for p in args.programs:
        print(f"| {p} | {', '.join(f'{v:.4f}' for v in vals[p])} | {statistics.mean(vals[p]):.4f} | "
              f"{max(vals[p]) - min(vals[p]):.4f} |")
    if not {"nanoGPT", "dense"} <= set(args.programs):
        return
    seed_spread = max(max(v) - min(v) for v in vals.values())
    gap = abs(statistics.mean(vals["nanoGPT"]) - statistics.mean(vals["dense"]))
    print(f"\nnanoGPT vs dense: mean difference {gap:.4f} nats; largest within-program seed spread "
          f"{seed_spread:.4f} nats (eval: {args.full_eval_iters} batches of {base['batch_size']}x"
          f"{base['block_size']}; nanoGPT's are random, this project's fixed)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nanogpt_dir", default=DEFAULT_DIR, help=f"nanoGPT checkout (default {DEFAULT_DIR})")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--iters", type=int, default=60, help="training iterations per timing run")
    parser.add_argument("--warmup", type=int, default=10, help="first iterations left out of the median")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="OMP/MKL threads for every program")
    parser.add_argument("--seed", type=int, default=1337, help="seed of the timing runs")
    parser.add_argument("--full", action="store_true", help="also run the full max_iters for final val losses")
    parser.add_argument("--no_timing", action="store_true", help="skip the timing rounds")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1337, 1338], help="seeds of the full runs")
    parser.add_argument("--programs", nargs="+", choices=PROGRAMS, default=list(PROGRAMS),
                        help="which programs the full runs include (timing always runs all three)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (the same for every program)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"),
                        help="default: float32 on cpu, bfloat16 on cuda")
    parser.add_argument("--compile", choices=("on", "off"), help="torch.compile (default: off on cpu, on on cuda)")
    parser.add_argument("--full_eval_iters", type=int, default=200, help="eval batches for the final val loss")
    args = parser.parse_args()
    if not 0 < args.warmup < args.iters:
        parser.error("need 0 < --warmup < --iters")
    if not re.fullmatch(r"cpu|cuda(:\d+)?", args.device):
        parser.error(f"--device {args.device!r}: expected cpu, cuda or cuda:N")
    RUN_FLAGS[:] = run_flags(args.device, args.dtype, args.compile)
    dtype, compile_on = (flag.split("=")[1] for flag in RUN_FLAGS[1:])

    nano_dir = check_nanogpt(args.nanogpt_dir)
    base = dense_config()
    data = os.path.join(ROOT, "data", base["dataset"])
    if not all(os.path.exists(os.path.join(data, f)) for f in ("train.bin", "val.bin", "meta.pkl")):
        sys.exit(f"vs_nanogpt: no prepared data in {data}; run: python data/{base['dataset']}/prepare.py")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               PYTHONUNBUFFERED="1")
    import torch
    print(f"# nanoGPT {NANOGPT_COMMIT[:10]} at {nano_dir} vs this project ({DENSE}, {TP24}); "
          f"torch {torch.__version__}, {args.threads} threads, {args.device} {dtype}, compile={compile_on}")
    print("# hyperparameters: " + ", ".join(f"{k}={base[k]}" for k in NANOGPT_KEYS))
    work = tempfile.mkdtemp(prefix="vs_nanogpt-")
    try:
        if not args.no_timing:
            timing(args, nano_dir, work, base, env)
        if args.full:
            print()
            full(args, nano_dir, work, base, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
