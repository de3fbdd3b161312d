"""
Step time of pipeline parallelism against no pipeline, and the bubble: predicted by the schedule
vs measured. Real train.py runs on gloo (one thread per process), interleaved rounds, medians.

    python -m bench.pipeline_bubble                    # pp=2, GPipe and 1F1B, 2/4/8 micro-batches
    python -m bench.pipeline_bubble --rounds 5 --iters 12

With p stages of equal work and M micro-batches, GPipe and 1F1B both idle a stage for p-1 of
M+p-1 micro-batch slots: predicted bubble (p-1)/(M+p-1) (1F1B holds fewer activations, not
fewer idle slots). Measured bubble: 1 - (t1 / p) / tp, where t1 is the step time of the
unpipelined run (the same micro-batches on one process) and tp the pipelined run's: the share of
the pipelined step that perfect p-way splitting would not need. It includes what a model
ignores: the boundary sends, the per-step collectives over the stages (loss, counts, norm,
tied weight) and uneven stages (the embedding on the first, the head on the last).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import os
import statistics
import sys
import tempfile

from bench.harness import records, run_train, torchrun

MODEL = ["--n_layer=8", "--n_head=4", "--n_embd=128", "--block_size=64", "--batch_size=8", "--tp_size=2",
         "--block_types=spd", "--eval_interval=1000", "--eval_iters=1", "--log_interval=1", "--device=cpu",
         "--compile=False", "--dtype=float32"]


def step_ms(out_dir, skip):
    """Median ms per iteration after the first `skip` iterations (warm-up, the pipeline's shape pass)."""
    times = [r["ms_per_iter"] for r in records(out_dir) if "ms_per_iter" in r and r["iter"] >= skip]
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default="", help="a prepared char dataset ('' -> data/shakespeare_char)")
    parser.add_argument("--micro_batches", default="2,4,8")
    parser.add_argument("--pp_size", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    p = args.pp_size
    common = MODEL + [f"--max_iters={args.iters}"] + ([f"--data_dir={args.data_dir}"] if args.data_dir else [])
    layouts = {"pp=1": []} | {f"pp={p} {s}": [f"--pp_size={p}", f"--pp_schedule={s}"] for s in ("gpipe", "1f1b")}
    times = {}  # (layout, M) -> [ms per round]
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):  # interleaved: each round runs every configuration once
            for m in [int(x) for x in args.micro_batches.split(",")]:
                for name, extra in layouts.items():
                    out = os.path.join(tmp, f"{name.replace(' ', '_')}-{m}-{round_}")
                    run_args = [*common, *extra, f"--gradient_accumulation_steps={m}", f"--out_dir={out}"]
                    result = run_train(*run_args, timeout=None) if not extra else torchrun(p, *run_args, timeout=None)
                    if result.returncode != 0:
                        sys.exit(f"error: {name} M={m} failed:\n{result.stderr[-1500:]}")
                    times.setdefault((name, m), []).append(step_ms(out, skip=3))
                    print(f"round {round_ + 1}: {name:10s} M={m}: {times[name, m][-1]:.1f} ms/iter", file=sys.stderr)
    print(f"\npipeline bubble, pp={p} (gloo, CPU, 1 thread per process; {args.rounds} interleaved rounds, "
          f"median of iterations 3..{args.iters - 1} per run, median over rounds)\n")
    print("| micro-batches M | pp=1 ms/iter | schedule | pp ms/iter | speed-up | predicted bubble | measured bubble |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for m in sorted({m for _, m in times}):
        t1 = statistics.median(times["pp=1", m])
        for s in ("gpipe", "1f1b"):
            tp = statistics.median(times[f"pp={p} {s}", m])
            predicted, measured = (p - 1) / (m + p - 1), 1 - (t1 / p) / tp
            print(f"| {m} | {t1:.1f} | {s} | {tp:.1f} | {t1 / tp:.2f}x | {predicted:.1%} | {measured:.1%} |")


if __name__ == "__main__":
    main()
