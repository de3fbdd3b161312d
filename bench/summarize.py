"""
Summarize sweep runs: a CSV row per run and per setting, paired statistics, plots.

One row per run plus one aggregate row per setting (mean, std, n over seeds), each setting
paired seed by seed with a reference setting, and the plots a paper needs.

    python -m bench.summarize bench/studies/sync_count/runs --seeds 1-8 --out bench/studies/sync_count
    python -m bench.summarize bench/studies/loss_sweep/runs --reference=train_shakespeare_char_12comm
    python -m bench.summarize DIR/shakespeare_char_24comm-s1 DIR/shakespeare_char_7comm-s1 ...   # runs one by one
    python -m bench.summarize bench/studies/width_alone/tuning/runs --describe   # several classes: nothing paired

Each study's folder, bench/studies/<name>/, names the exact commands that rebuild its tables from
its committed runs/ (findings.md).

--seeds keeps only the runs of those seeds ("1-7", "1,3,5", "1-4,8"), so a table computed while a
sweep is still adding seeds can be recomputed exactly later.

Reads each run directory's config.json, metrics.jsonl and result.json (unfinished runs
are listed with status 'unfinished' and left out of aggregates and plots), and train.log's
startup line for what tp_backend='auto' and dtype='auto' became. Writes to <out>:
  experiment_summary.csv     the rows; every row has tp_backend, tp_mode, dtype, it/s, wall time
  noise_floor.json           dense vs 24comm, same seed (when the runs have both)
  val_loss_vs_syncs.png      final val loss against sync points, error bars over seeds; and the
                             paired differences from the reference with their intervals
  val_loss_curves.png        val loss against iteration, one line per config (seed mean)
  val_loss_vs_loss_rate.png  final val loss against the stationary packet loss rate
  val_loss_vs_step_time.png  final val loss against measured step time (bench/step_time.json)

The reading, aggregating and pairing are bench/summary.py's (a library); the statistics
bench/stats.py's. This file is the command line: the CSV, noise_floor.json, the plots.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import csv
import json
import os
import statistics
import sys
from collections import Counter

from bench.stats import CONFIDENCE
from bench.summary import (COLUMNS, SummaryError, aggregate, by_class, fmt, label, paired_analysis, parse_seeds,
                           read_runs, verdict)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def plot_labels(aggregates):
    """{setting name: its label on a plot}: its sync count ('5comm'), and the sweep's tag beside it where two
    settings share a count (a study of one pattern at two widths or rates, or at half the channels)."""
    counts = Counter(label(a) for a in aggregates)
    return {a["_name"]: label(a) if counts[label(a)] == 1 else f"{label(a)} {a['setting'] or a['_name']}"
            for a in aggregates}


def plots(aggregates, curves, rows, out, floors=()):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lossless = sorted((a for a in aggregates if a["loss_model"] == "none"), key=lambda a: -a["sync_points"])
    names, written = plot_labels(aggregates), []
    if lossless:
        paired = [a for a in lossless if a["paired_diff_mean"] is not None or a["paired_n"]]
        fig, axes = plt.subplots(1, 2 if paired else 1, figsize=(11 if paired else 6, 4), squeeze=False)
        ax = axes[0][0]
        groups = {}  # a line joins the patterns of one model, schedule and rate (summary's _comparable) only
        for a in (a for a in lossless if a["tp_size"] > 1):
            groups.setdefault(a["_comparable"], []).append(a)
        for k, tp in enumerate(groups.values()):
            ax.errorbar([a["sync_points"] for a in tp], [a["final_val_loss"] for a in tp], color=f"C{k % 10}",
                        yerr=[a["final_val_loss_std"] for a in tp], capsize=4,  # a line only over distinct counts
                        fmt="o-" if len({a["sync_points"] for a in tp}) == len(tp) else "o",
                        label="TP=2 patterns" if len(groups) == 1 else None)
        tp = [a for group in groups.values() for a in group]
        for a in tp:  # one line: its points differ in the pattern; several: name each point's setting
            ax.annotate(a["block_pattern"] if len(groups) == 1 else names[a["_name"]],
                        (a["sync_points"], a["final_val_loss"]), fontsize=7, xytext=(4, 4), textcoords="offset points")
        for a in (a for a in lossless if a["tp_size"] == 1):
            ax.axhspan(a["final_val_loss"] - a["final_val_loss_std"], a["final_val_loss"] + a["final_val_loss_std"],
                       color="gray", alpha=0.3, label=f"dense (n={a['n']})")
        ax.set(xlabel="sync points per forward pass", ylabel=f"final val loss (iter {lossless[0]['iters']})",
               title="What each dropped sync costs (mean ± std over seeds)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
        if paired:
            # the same seeds' runs differ by less than the seed spread: compare them seed by seed
            ax = axes[0][1]
            ax.axhline(0.0, color="black", lw=0.8)
            for floor in floors:
                ax.axhspan(-floor["max_abs"], floor["max_abs"], color="gray", alpha=0.3,
                           label=f"noise floor: max |24comm - dense|, n={floor['n']}")
            for a in paired:
                mean = a["paired_diff_mean"] if a["paired_diff_mean"] is not None else 0.0
                low = a["paired_ci_low"] if a["paired_ci_low"] is not None else mean
                high = a["paired_ci_high"] if a["paired_ci_high"] is not None else mean
                ax.errorbar([a["sync_points"]], [mean], yerr=[[mean - low], [high - mean]], fmt="o", capsize=4,
                            color="C1" if a["tp_size"] == 1 else "C0")
                name = names[a["_name"]]
                ax.annotate(name if a["paired_p_holm"] is None else f"{name} p={a['paired_p_holm']:.2g}",
                            (a["sync_points"], mean), fontsize=7, xytext=(4, 4), textcoords="offset points")
            reference = next(a["paired_reference"] for a in paired)
            ax.set(xlabel="sync points per forward pass", ylabel="final val loss minus the reference's (same seed)")
            ax.set_title(f"Paired against {reference}: mean, {CONFIDENCE:.0%} CI, Holm p", fontsize=9)
            if floors:
                ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "val_loss_vs_syncs.png"), dpi=120)
        written.append("val_loss_vs_syncs.png")

        fig, ax = plt.subplots(figsize=(6, 4))
        for a in lossless:
            members = [curves[r["_dir"]] for r in rows if r["status"] == "done" and r["_setting"] == a["_setting"]]
            iters = [i for i, _ in members[0]]
            ax.plot(iters, [statistics.fmean(c[k][1] for c in members) for k in range(len(iters))],
                    label=names[a["_name"]])
        ax.set(xlabel="iteration", ylabel="val loss (mean over seeds)", title="Validation loss curves")
        ax.set_ylim(top=min(ax.get_ylim()[1], lossless[0]["final_val_loss"] + 1.0))
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "val_loss_curves.png"), dpi=120)
        written.append("val_loss_curves.png")

    lossy = [a for a in aggregates if a["loss_model"] != "none"]
    if lossy:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        configs = sorted({a["config"] for a in lossy}, key=lambda c: -next(a["sync_points"] for a in lossy
                                                                            if a["config"] == c))
        for k, config in enumerate(configs):
            color = f"C{k}"
            base = [a for a in lossless if a["config"] == config]
            bern = sorted((a for a in lossy if a["config"] == config and a["loss_model"] == "bernoulli"
                           and a["loss_fwd"] and a["loss_bwd"]), key=lambda a: a["loss_rate"])
            name = label((base or bern or [a for a in lossy if a["config"] == config])[0])
            xs = [a["loss_rate"] for a in bern]
            ys = [a["final_val_loss"] for a in bern]
            if base:
                ax.axhline(base[0]["final_val_loss"], color=color, ls=":", lw=1)
            ax.plot(xs, ys, "o-", color=color, label=f"{name} Bernoulli (fwd+bwd)")
            for a in lossy:
                if a["config"] != config or a in bern:
                    continue
                marker = {"gilbert_elliott": "s"}.get(a["loss_model"], "^")
                tag = a["ge_preset"] or "bernoulli"
                direction = "fwd+bwd" if a["loss_fwd"] and a["loss_bwd"] else ("fwd" if a["loss_fwd"] else "bwd")
                ax.plot([a["loss_rate"]], [a["final_val_loss"]], marker, color=color, mfc="none", ms=8)
                ax.annotate(f"{tag} {direction}", (a["loss_rate"], a["final_val_loss"]), fontsize=6,
                            xytext=(4, -8), textcoords="offset points", color=color)
        ax.set(xscale="log", xlabel="stationary packet loss rate", ylabel="final val loss",
               title="Loss tolerance (dotted: lossless seed mean; squares: Gilbert-Elliott)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "val_loss_vs_loss_rate.png"), dpi=120)
        written.append("val_loss_vs_loss_rate.png")

    step_json = os.path.join(ROOT, "bench", "step_time.json")
    if lossless and os.path.exists(step_json):
        measured = json.load(open(step_json))["measured"]
        batch = max(m["batch"] for m in measured)
        times = {m["config"]: m["step_ms"] for m in measured if m["batch"] == batch}
        points = [(times[label(a)], a) for a in lossless if label(a) in times]
        if points:
            fig, ax = plt.subplots(figsize=(6, 4))
            for t, a in points:
                ax.errorbar([t], [a["final_val_loss"]], yerr=[a["final_val_loss_std"]], fmt="o", capsize=4)
                ax.annotate(label(a), (t, a["final_val_loss"]), xytext=(5, 3), textcoords="offset points")
            ax.set(xlabel=f"measured ms per step (bench/step_time.py, TP=2 gloo, batch {batch})",
                   ylabel="final val loss (this sweep)", title="The trade: val loss against step time")
            fig.tight_layout()
            fig.savefig(os.path.join(out, "val_loss_vs_step_time.png"), dpi=120)
            written.append("val_loss_vs_step_time.png")
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("sweep_dirs", nargs="+", help="directories of runs (a sweep's <out>/<name>), or run directories")
    parser.add_argument("--out", default="", help="where to write the CSV and PNGs (default: the first sweep dir)")
    parser.add_argument("--reference", default="",
                        help="the setting every other is paired with, seed by seed: a setting's name, e.g. "
                             "train_shakespeare_char_24comm or train_shakespeare_char_12comm/bern0.01 "
                             "(default: the 24comm pattern, lossless)")
    parser.add_argument("--seeds", default="", help="only the runs of these seeds: 1-7, 1,3,5 or 1-4,8 (default: all)")
    parser.add_argument("--describe", action="store_true",
                        help="the CSV's rows and means only: nothing is paired (no paired or iterations-to-target "
                             "columns, no noise floor) and nothing plotted, so runs of several numerics classes "
                             "can be described together, e.g. a tuning grid; each row names its class(es)")
    args = parser.parse_args()
    if args.describe and args.reference:
        sys.exit("error: --describe pairs nothing: --reference has no meaning with it")
    try:
        rows, curves = read_runs(args.sweep_dirs, parse_seeds(args.seeds) if args.seeds else None)
        aggregates = aggregate(rows)
        floors = [] if args.describe else paired_analysis(rows, aggregates, curves, args.reference)
    except SummaryError as e:
        sys.exit(f"error: {e}")
    if args.describe:  # a pair would need one class (check_one_class); these columns stay blank
        for row in rows + aggregates:
            row.update({c: None for c in COLUMNS if c.startswith(("paired_", "iters_to_", "reached_"))
                        or c == "within_noise_floor"})
    out = args.out or args.sweep_dirs[0]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "experiment_summary.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows + aggregates:
            # floats in full (repr): a control's "exactly 0" and a rerun's equality are read from here
            writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items() if k in COLUMNS})
    written = ["experiment_summary.csv"]
    if floors:
        with open(os.path.join(out, "noise_floor.json"), "w") as f:
            json.dump(floors, f, indent=2)
        written.append("noise_floor.json")
    if not args.describe:  # the plots' lines join settings that differ in their syncs: not a grid of other keys
        written += plots(aggregates, curves, rows, out, floors)
    unfinished = sum(r["status"] != "done" for r in rows)
    print(f"summary: {len(rows)} runs ({unfinished} unfinished), {len(aggregates)} settings -> {out}: "
          f"{', '.join(written)}")
    if unfinished:  # a plain train.py run is one too: bench.sweep writes result.json (its config and setting) at the end
        print(f"unfinished: a run without result.json, which bench.sweep writes when a run ends; the {unfinished} are "
              f"listed, not aggregated")
    for floor in floors:
        print(f"noise floor, {floor['tp']} - {floor['dense']} (same seed, {floor['n']} seeds, iter {floor['iters']}): "
              f"mean {floor['mean']:+.4f}, std {fmt(floor['std'], '.4f')}, range [{floor['min']:+.4f}, "
              f"{floor['max']:+.4f}], {CONFIDENCE:.0%} CI [{fmt(floor['ci_low'], '+.4f')}, "
              f"{fmt(floor['ci_high'], '+.4f')}]")
    paired = [a for a in aggregates if a["paired_diff_mean"] is not None]
    if paired:
        tested = sum(a["paired_p"] is not None for a in aggregates)
        print(f"paired final val loss differences (same seed, {CONFIDENCE:.0%} CI, p Holm-adjusted over {tested}):")
    elif args.describe:
        classes = sorted({r["numerics_class"] for r in rows if r["status"] == "done"})
        print(f"described, nothing paired (--describe); numerics classes: {'; '.join(classes)}")
    elif not any(a["paired_reference"] for a in aggregates):
        print("paired columns left blank: no reference setting among these runs "
              "(default: the 24comm pattern, lossless; choose one with --reference)")
    for a in paired:
        print(f"  {a['_name']} - {a['paired_reference']}: {a['paired_diff_mean']:+.4f} "
              f"[{fmt(a['paired_ci_low'], '+.4f')}, {fmt(a['paired_ci_high'], '+.4f')}] n={a['paired_n']}, "
              f"p {fmt(a['paired_p_holm'], '.3g')}: {verdict(a)}")
        seeds = {s: m["paired_diff"] for s, m in a["_by_seed"].items() if m.get("paired_diff") is not None}
        for label, stats in by_class(seeds, a["_by_seed"]).items():  # the seeds ran in several numerics classes
            print(f"    of which {label}, seeds {','.join(map(str, stats['seeds']))}: {fmt(stats['mean'], '+.4f')} "
                  f"[{fmt(stats['ci_low'], '+.4f')}, {fmt(stats['ci_high'], '+.4f')}]")




if __name__ == "__main__":
    main()
