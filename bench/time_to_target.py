"""
Time to target on a network: the iterations each config needs to reach the target val loss
(measured, in the runs given) times the projected time of an iteration of GPT-2 124M with TP=2
across two nodes at 25, 100 and 400 Gb/s (assumed: bench/step_time.py's model).

    python -m bench.time_to_target bench/studies/sync_count/runs --seeds 1-8 --out bench/studies/sync_count

Measured: per run, the first iteration at which the val loss reaches dense's final val loss of
the same seed x 1.01 (--target 1pct) or x 1.02 (2pct), interpolated between evals
(bench/summarize.py's iters_to_target). Assumed: that GPT-2 124M needs those iterations in the
same proportions as these runs (the runs are char-scale; this is the hypothesis the
projection rests on, not a finding), and bench/step_time.py's micro-step model (compute at
--mfu of --gpu_peak, all-reduce = latency + bytes / bandwidth; 5 micro-steps per iteration).
A schedule run's iterations are costed at its average syncs per step.

Prints, per setting: seeds that reached the target, mean iterations, projected minutes at each
bandwidth, and the paired difference from the 24comm pattern in projected minutes (per seed:
its minutes minus 24comm's of the same seed; 95% Student t interval over the seeds where both
reached the target). Writes time_to_target.png (val loss vs projected wall-clock, one panel per
bandwidth) to --out.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import os
import statistics
import sys

from bench.frontier import compute_terms
from bench.stats import CONFIDENCE, paired_stats
from bench.step_time import MICRO_STEPS, gpt2_projection
from bench.summary import TARGETS, SummaryError, aggregate, label, paired_analysis, parse_seeds, read_runs

BANDWIDTHS = (25, 100, 400)  # Gb/s


def minutes_per_iteration(syncs, gbps, args):
    compute, comm, _ = gpt2_projection(syncs, gbps, args.mfu, args.gpu_peak, args.net_latency)
    if args.gpu:  # a TP=2 rank's micro-step measured on a GPU (bench/gpu_compute.py) instead of assumed
        compute = args.terms["compute"]
    return MICRO_STEPS * (compute + comm) / 6e4


def table(aggregates, tag, args):
    """[(aggregate, {gbps: mean minutes or None}, {gbps: paired stats vs 24comm})] for the lossless TP settings."""
    reference = next((a for a in aggregates if a["_full_tp"]), None)
    out = []
    # dense sets the target; its tp_size=1 layout has no TP pair to project
    for a in sorted((a for a in aggregates if a["loss_model"] == "none" and a["tp_size"] > 1),
                    key=lambda a: -a["sync_points"]):
        minutes, paired = {}, {}
        for gbps in BANDWIDTHS:
            per_iter = minutes_per_iteration(a["sync_points"], gbps, args)
            minutes[gbps] = None if a[f"iters_to_{tag}"] is None else a[f"iters_to_{tag}"] * per_iter
            if reference is not None and a is not reference and reference["_comparable"] == a["_comparable"]:
                ref_per_iter = minutes_per_iteration(reference["sync_points"], gbps, args)
                diffs = [m[f"iters_to_{tag}"] * per_iter - reference["_by_seed"][seed][f"iters_to_{tag}"] * ref_per_iter
                         for seed, m in a["_by_seed"].items() if seed in reference["_by_seed"]
                         and m[f"iters_to_{tag}"] is not None
                         and reference["_by_seed"][seed][f"iters_to_{tag}"] is not None]
                paired[gbps] = paired_stats(diffs)
        out.append((a, minutes, paired))
    return out


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("sweep_dirs", nargs="+", help="directories of runs (a sweep's <out>/<name>)")
    parser.add_argument("--out", default="", help="where to write time_to_target.png (default: no plot)")
    parser.add_argument("--target", choices=sorted(TARGETS), default="1pct", help="dense's final val loss + 1%% or 2%%")
    parser.add_argument("--mfu", type=float, default=0.4, help="assumed MFU of the projected GPU")
    parser.add_argument("--gpu_peak", type=float, default=989e12, help="projected GPU's peak FLOP/s (H100 bf16 dense)")
    parser.add_argument("--net_latency", type=float, default=1e-5, help="all-reduce latency, seconds")
    parser.add_argument("--gpu", default="", help="bench/gpu_compute.py's json (e.g. bench/gpu_compute/h100_compiled.json): "
                        "its measured TP=2 rank micro-step replaces the assumed MFU")
    parser.add_argument("--seeds", default="", help="only the runs of these seeds: 1-7, 1,3,5 or 1-4,8 (default: all)")
    parser.add_argument("--json", default="", help="also write the table's numbers here (bench/render.py reads them)")
    args = parser.parse_args()
    try:
        args.terms = compute_terms(args.gpu) if args.gpu else None
        rows, curves = read_runs(args.sweep_dirs, parse_seeds(args.seeds) if args.seeds else None)
        aggregates = aggregate(rows)
        paired_analysis(rows, aggregates, curves)
    except SummaryError as e:
        sys.exit(f"error: {e}")
    if not any(a["_dense"] for a in aggregates):
        sys.exit("error: no dense (tp_size=1, lossless) runs among these: the target is dense's final val loss")
    result = table(aggregates, args.target, args)
    print(f"# measured: iterations to dense's final val loss x {TARGETS[args.target]} (same seed), in these runs; "
          f"assumed: GPT-2 124M, TP=2 across two nodes, {MICRO_STEPS} micro-steps of 12x1024 per iteration, "
          + (f"compute {args.terms['compute']:.2f} ms per micro-step {args.terms['source']}" if args.gpu else
             f"{args.mfu:.0%} MFU of {args.gpu_peak / 1e12:.0f} TFLOP/s") + f", {args.net_latency * 1e6:.0f} us per all-reduce")
    head = " | ".join(f"{g} Gb/s: minutes | vs 24comm (paired, {CONFIDENCE:.0%} CI)" for g in BANDWIDTHS)
    print(f"| setting | syncs | reached / seeds | iterations (mean) | {head} |")
    print("| --- | ---: | ---: | ---: | " + " | ".join("---: | ---" for _ in BANDWIDTHS) + " |")
    for a, minutes, paired in result:
        cells = []
        for g in BANDWIDTHS:
            s = paired.get(g)
            ci = "" if not s or s["ci_low"] is None else f"{s['mean']:+.2f} [{s['ci_low']:+.2f}, {s['ci_high']:+.2f}]"
            cells.append(f"{fmt(minutes[g])} | {ci}")
        print(f"| {a['_name']} | {a['sync_points']:g} | {a['reached_' + args.target] or 0} / {a['n']} | "
              f"{fmt(a['iters_to_' + args.target], '.0f')} | " + " | ".join(cells) + " |")
    if args.json:  # per setting (name without train_): reached, iterations, minutes and paired minutes per Gb/s
        with open(args.json, "w") as f:
            json.dump({a["_name"].removeprefix("train_"): dict(
                syncs=a["sync_points"], reached=a["reached_" + args.target] or 0, n=a["n"], iters=a["iters_to_" + args.target],
                minutes={str(g): minutes[g] for g in BANDWIDTHS}, vs_24comm={str(g): paired.get(g) for g in BANDWIDTHS})
                for a, minutes, paired in result}, f, indent=1)
    if args.out:
        plot(result, curves, args)


def plot(result, curves, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(BANDWIDTHS), figsize=(5 * len(BANDWIDTHS), 4), sharey=True)
    for ax, gbps in zip(axes, BANDWIDTHS):
        for a, _, _ in result:
            members = [curves[m["_dir"]] for m in a["_by_seed"].values()]
            iters = [it for it, _ in members[0]]
            if any([it for it, _ in c] != iters for c in members):
                continue  # seeds evaluated at other iterations: no mean curve
            per_iter = minutes_per_iteration(a["sync_points"], gbps, args)
            ax.plot([it * per_iter for it in iters], [statistics.fmean(c[k][1] for c in members)
                                                      for k in range(len(iters))], label=label(a))
        ax.set(title=f"{gbps} Gb/s (projected)", xlabel="projected GPT-2 124M wall-clock (minutes)")
    axes[0].set_ylabel("val loss (measured, seed mean)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "time_to_target.png")
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
