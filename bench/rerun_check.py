"""
Does a rerun give the same bits on this machine? A study whose control must pair to exactly 0 (the
lost-packets study: `transport='reliable'` against its lossless twin) can run only where it does.
CPU kernels are deterministic; CUDA's are not by default (atomic adds in some backward kernels), and
train.py's `deterministic=True` asks for kernels that are. This runs each config's pairs side by
side and prints, per pair, the largest relative difference of every logged float and whether any
count differs:

- rerun, default kernels: the same lossless run twice (the noise `deterministic` should remove);
- rerun, deterministic: the same lossless run twice with `deterministic=True`;
- rerun, lossy + Hadamard: a 1% Bernoulli run with Hadamard spreading twice, deterministic;
- control: reliable 1% against lossless, both deterministic: every float must be identical for the study
  (the packet counts differ by design: the reliable run loses packets and resends them).

    python -m bench.rerun_check --configs config/train_shakespeare_char_24comm.py \
        config/train_shakespeare_char_2comm.py --max_iters 150 --slots 8     # on a lent GPU
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import torch

from bench.harness import FLOAT_KEYS, record_differences, records, run_train

BERN1 = ["--loss_model=bernoulli", "--loss_rate=0.01"]
DET = ["--deterministic=True"]
# the runs of one config: name -> overrides
RUNS = {"plain_a": [], "plain_b": [], "det_a": DET, "det_b": DET,
        "hadamard_a": [*DET, *BERN1, "--sync_rotation=hadamard"], "hadamard_b": [*DET, *BERN1, "--sync_rotation=hadamard"],
        "reliable": [*DET, *BERN1, "--transport=reliable"]}
# pair name -> (run, run, whether the packet counts must agree: the reliable run loses packets and resends
# them). Every pair but the first must be identical for a bit-exact study here; the first shows the noise.
PAIRS = {"rerun, default kernels": ("plain_a", "plain_b", True), "rerun, deterministic": ("det_a", "det_b", True),
         "rerun, lossy + Hadamard, deterministic": ("hadamard_a", "hadamard_b", True),
         "control: reliable 1% vs lossless, deterministic": ("reliable", "det_a", False)}
INFORMATIONAL = "rerun, default kernels"


def compare(a, b, with_counts=True):
    """Two runs' records -> (largest relative difference per float key, count keys that differ, identical)."""
    floats, counts = record_differences(a, b)
    counts = counts if with_counts else []
    return floats, counts, not counts and all(gap == 0.0 for gap in floats.values())


def run_pairs(config, common, out, slots):
    """Every run of RUNS for one config (slots at a time) -> {pair name: compare(...)}."""
    def one(name):
        out_dir = os.path.join(out, name)
        result = run_train(config, *common, *RUNS[name], f"--out_dir={out_dir}", timeout=None)
        if result.returncode != 0:
            sys.exit(f"error: {config} {name} failed:\n{result.stderr[-2000:]}")
        return name, records(out_dir)
    with ThreadPoolExecutor(slots) as pool:
        logs = dict(pool.map(one, RUNS))
    return {pair: compare(logs[a], logs[b], with_counts) for pair, (a, b, with_counts) in PAIRS.items()}


def table(results):
    lines = ["| config | pair | " + " | ".join(f"max rel. diff {k}" for k in FLOAT_KEYS) + " | counts differ | identical |",
             "| --- | --- | " + "---: | " * len(FLOAT_KEYS) + "--- | --- |"]
    for config, pairs in results.items():
        for pair, (floats, counts, same) in pairs.items():
            lines.append(f"| {config} | {pair} | " + " | ".join(f"{floats[k]:.2g}" for k in FLOAT_KEYS)
                         + f" | {', '.join(counts) or 'none'} | {'yes' if same else 'NO'} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["config/train_shakespeare_char_24comm.py"])
    parser.add_argument("--max_iters", type=int, default=150)
    parser.add_argument("--slots", type=int, default=7, help="runs at a time")
    parser.add_argument("--out", default="", help="where the runs go ('' -> a temporary directory)")
    parser.add_argument("--train_args", nargs=argparse.REMAINDER, default=[], help="more train.py overrides, last")
    args = parser.parse_args(argv)
    for config in args.configs:
        if not os.path.exists(config):
            sys.exit(f"error: --configs: {config} does not exist")
    common = [f"--max_iters={args.max_iters}", "--eval_interval=50", "--eval_iters=20", "--log_interval=1",
              "--compile=False", "--dtype=float32", *args.train_args]
    out = args.out or tempfile.mkdtemp(prefix="rerun_check_")
    results = {os.path.basename(c).removesuffix(".py"): run_pairs(c, common, os.path.join(out, os.path.basename(c)), args.slots)
               for c in args.configs}
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    print(f"host: {device}, torch {torch.__version__}, cpu capability {torch.backends.cpu.get_cpu_capability()}; "
          f"{args.max_iters} iterations, float32; runs in {out}\n")
    print(table(results))
    failed = [f"{config}: {pair}" for config, pairs in results.items() for pair, (_, _, same) in pairs.items()
              if not same and pair != INFORMATIONAL]
    if failed:
        sys.exit(f"not bit-reproducible here: {'; '.join(failed)}")


if __name__ == "__main__":
    main()
