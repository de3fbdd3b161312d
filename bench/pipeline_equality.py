"""
How closely a pipelined run reproduces the unpipelined run of the same seed: the same short
train.py run with and without pipeline stages, for each layout, block pattern and link, and the
largest relative difference of every logged loss and gradient norm over all steps.

    python -m bench.pipeline_equality                          # CPU, gloo, fp32, 24 cases, ~36 runs
    python -m bench.pipeline_equality --layouts pp2 --set max_iters=12

Layouts (issue 19, item 5), each against its plain run, and a control:
  threads      pp=1 sim on 2 threads           vs pp=1 sim on 1 thread: another summation order, nothing else
  pp2          pp=2 sim (2 processes)          vs pp=1 sim (1 process)
  pp2_tp2_dist pp=2 x tp=2 dist (4 processes)  vs pp=1 sim (1 process)
  dp2_pp2      dp=2 x pp=2 sim (4 processes)   vs dp=2 sim (2 processes), ZeRO-1 on the lossy rows
The cuts lie where they are hardest: inside a run of `parallel` blocks where the pattern has one,
so pending partials d cross the boundary. tests/test_pipeline.py asserts the agreement; this
prints how close it is. The sync counts and packet statistics must be identical: a case whose
counts differ is marked, and the script exits non-zero. Read the pipelined rows against the
control: a step where the gradient spikes amplifies any change of summation order, pipelined or
not, and clipping carries it into the following steps.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import os
import sys
import tempfile

from bench.harness import LINKS, PIPELINE_CASES, link_args, record_differences, records, run_train, torchrun

PATTERNS = PIPELINE_CASES  # pattern -> (block_types, pp_split), the cuts the tests use
RUN_LINKS = {"lossless": "gpipe", "bernoulli": "1f1b"}  # link -> the schedule it runs under (both are covered)
LAYOUTS = {  # name -> (plain processes, compared processes, extra args of the compared run)
    "threads": (1, 1, []),
    "pp2": (1, 2, []),
    "pp2_tp2_dist": (1, 4, ["--tp_mode=dist"]),
    "dp2_pp2": (2, 4, []),
}
MODEL = ["--n_layer=12", "--n_head=4", "--n_embd=32", "--block_size=32", "--batch_size=4", "--eval_iters=2",
         "--eval_interval=3", "--log_interval=1", "--warmup_iters=2", "--device=cpu", "--compile=False",
         "--dtype=float32", "--max_iters=9", "--tp_size=2"]


def train(nproc, args, out_dir, threads=1):
    env = {"OMP_NUM_THREADS": str(threads)}
    launch = run_train if nproc == 1 else (lambda *a, env, timeout: torchrun(nproc, *a, env=env, timeout=timeout))
    result = launch(*args, f"--out_dir={out_dir}", env=env, timeout=None)
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.startswith("error:")] or \
            result.stderr.strip().splitlines()[-1:]
        sys.exit(f"error: train.py {' '.join(args[-5:])} on {nproc} processes failed: {lines[:1]}")
    return records(out_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default="", help="a prepared char dataset ('' -> data/shakespeare_char)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help=f"comma-separated, from {', '.join(LAYOUTS)}")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="more train.py overrides")
    args = parser.parse_args()
    layouts = [name for name in args.layouts.split(",") if name]
    if not layouts or any(name not in LAYOUTS for name in layouts):
        sys.exit(f"error: --layouts={args.layouts!r}: choose from {', '.join(LAYOUTS)}")
    data_dir = args.data_dir or os.path.join("data", "shakespeare_char")
    if not os.path.isfile(os.path.join(data_dir, "train.bin")):
        sys.exit(f"error: --data_dir={data_dir} holds no train.bin: run data/shakespeare_char/prepare.py first")
    base = [*MODEL, f"--data_dir={os.path.abspath(data_dir)}", *(f"--{kv}" for kv in args.set)]

    print("| layout | pattern | link | schedule | steps | train loss | val loss | grad norm | counts and packets |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
    worst, mismatched = {}, False
    with tempfile.TemporaryDirectory() as tmp:
        plain_runs = {}  # (plain processes, pattern, link) -> records: pp2 and pp2_tp2_dist share theirs
        for layout in layouts:
            plain_nproc, other_nproc, extra = LAYOUTS[layout]
            for pattern, (block_types, split) in PATTERNS.items():
                for link, schedule in RUN_LINKS.items():
                    zero = ["--zero_stage=1"] if layout == "dp2_pp2" and link != "lossless" else []
                    run_args = [*base, f"--block_types={block_types}", *link_args(LINKS[link]),
                                f"--gradient_accumulation_steps={4 if plain_nproc == 2 else 2}"]
                    key = (plain_nproc, pattern, link)
                    if key not in plain_runs:
                        plain_runs[key] = train(plain_nproc, run_args, os.path.join(tmp, "-".join(map(str, key))))
                    out_dir = os.path.join(tmp, f"{layout}-{pattern}-{link}")
                    if layout == "threads":
                        other, schedule = train(1, run_args, out_dir, threads=2), "-"
                    else:
                        other = train(other_nproc, [*run_args, "--pp_size=2", f"--pp_split={split}",
                                                    f"--pp_schedule={schedule}", *extra, *zero], out_dir)
                    floats, counts = record_differences(plain_runs[key], other)
                    mismatched |= bool(counts)
                    for name, value in floats.items():
                        worst[layout, name] = max(worst.get((layout, name), 0.0), value)
                    steps = sum("val_loss" not in r for r in other)
                    link_name = "Bernoulli 5%" if link == "bernoulli" else link
                    print(f"| {layout} | {pattern} | {link_name}{' + ZeRO-1' if zero else ''} | {schedule} | {steps} | "
                          f"{floats['train_loss']:.1e} | {floats['val_loss']:.1e} | {floats['grad_norm']:.1e} | "
                          f"{'identical' if not counts else 'DIFFERENT: ' + ', '.join(counts)} |", flush=True)
    print("\nlargest relative difference per layout (|a - b| / max(1, |a|), over every step):")
    for layout in layouts:
        print(f"  {layout:13s} " + "  ".join(f"{name} {worst[layout, name]:.1e}"
                                               for name in ("train_loss", "val_loss", "grad_norm")))
    if mismatched:
        sys.exit("error: a pipelined run counted other syncs or drew other packets than its plain run")


if __name__ == "__main__":
    main()
