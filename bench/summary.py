"""
The summary of a study's runs, as a library: each run directory read into a row, one aggregate row per
setting (mean, std, n over seeds), every setting paired seed by seed with a reference setting, the noise
floor and the iterations to a target. `python -m bench.summarize` is its command line (the CSV and the
plots); bench/time_to_target.py and the tests use the functions here, the statistics bench/stats.py's.

A block_schedule run's sync_points is its average forward syncs per training step (the
patterns weighted by the steps each is in force), its block_pattern the schedule.

Paired statistics. Runs of one seed start from the same weights and see the same batches in
every config, so the seed-to-seed spread cancels in per-seed differences. Each setting is
paired with the reference setting whose resolved config differs only in the sync pattern and
the link (TREATMENT_KEYS: same data, model, schedule and iterations), over the seeds both ran:
  --reference NAME    the reference setting: a config file's stem, then /<setting tag> if the
                      sweep gave one (train_shakespeare_char_12comm/bern0.01; the train_
                      prefix may be left out; a config path works too). Default: the all-tp
                      pattern (24comm at 12 layers), lossless.
Columns: paired_diff (run rows: this seed's final val loss minus the reference's), paired_n,
paired_diff_mean, paired_diff_std, paired_ci_low/high (95%, Student t with n-1 degrees of
freedom), paired_p (two-sided paired t test), paired_p_holm (Holm's step-down correction over
every setting of the table that has a p-value).

Noise floor. Dense (tp_size=1) and 24comm compute the same function from the same weights; with
the same seed their final losses differ only by float summation order, amplified by training.
Their per-seed differences (24comm - dense: mean, std, min, max, CI) are printed and written to
noise_floor.json; within_noise_floor says whether a setting's paired CI lies inside
+-max|floor difference| (a pattern "costs nothing" only then).

Iterations to target. iters_to_1pct / iters_to_2pct: the first iteration at which a run's val
loss reaches dense's final val loss of the same seed x 1.01 / x 1.02, interpolated linearly
between evals (empty if never; aggregates: the mean over the seeds that reached it, and
reached_* counts them); paired_iters_to_*: the paired difference from the reference, with its
95% CI, over the seeds where both reached the target.
"""

import glob
import json
import math
import os
import re
import statistics
import sys

from bench.stats import ALPHA, holm, paired_stats
from checkpoint import read_log
from comms import MODES
from configurator import train_defaults
from links import link_from
from model import count_sync_points, describe_pattern, parse_block_schedule, parse_block_types

COLUMNS = ["kind", "run", "config", "setting", "seed", "n", "status", "sync_points", "block_pattern", "tp_size",
           "tp_mode", "tp_backend", "dtype", "loss_model", "loss_rate", "ge_preset", "loss_fwd", "loss_bwd", "iters",
           "final_val_loss", "final_val_loss_std", "best_val_loss", "final_val_perplexity", "final_val_accuracy",
           "tokens_per_s", "it_per_s", "wall_time_s", "observed_loss_rate", "numerics_class",
           # iterations to reach dense's final val loss (same seed) + 1% / + 2%; reached_*: seeds that got there
           "iters_to_1pct", "reached_1pct", "iters_to_2pct", "reached_2pct",
           # paired against the reference setting, seed by seed (run rows: this seed's difference)
           "paired_reference", "paired_diff", "paired_n", "paired_diff_mean", "paired_diff_std", "paired_ci_low",
           "paired_ci_high", "paired_p", "paired_p_holm", "within_noise_floor",
           *(f"paired_iters_to_{t}_{c}" for t in ("1pct", "2pct") for c in ("n", "mean", "ci_low", "ci_high"))]


# keys that differ between the seeds of one setting; any other difference is another setting.
# `deterministic` picks kernels, not the computation: a plan may run one seed on a GPU with
# deterministic kernels and another on a CPU (whose kernels are); dtype and tp_backend enter as resolved
PER_RUN_KEYS = ("seed", "out_dir", "wandb_run_name", "init_from", "deterministic")
# keys that make one setting the treatment of another: the sync pattern and the link. Two runs
# of one seed may be paired when their resolved configs differ in these (and PER_RUN_KEYS,
# BOOKKEEPING_KEYS) only: same data, schedule, model size and iterations
TREATMENT_KEYS = ("tp_size", "block_types", "block_schedule", "loss_model", "loss_rate", "ge_preset", "ge_p", "ge_r", "ge_k", "ge_h",
                  "loss_fwd", "loss_bwd", "packet_bytes", "loss_eval", "sync_fraction", "sync_dtype", "sequence_parallel",
                  "lost_fill", "sync_rotation", "transport")  # the schemes, a lost packet's option
# keys that change what a run logs or where, not what it computes
BOOKKEEPING_KEYS = ("wandb_log", "wandb_project", "log_interval", "always_save_checkpoint", "dist_timeout_s",
                    "peak_flops", "zero_stage", "activation_checkpointing")  # the last two: same numbers, tested
DEFAULTS = train_defaults()  # a key a run's config.json predates ran as its default
TARGETS = {"1pct": 1.01, "2pct": 1.02}  # iterations to dense's final val loss times this


def stationary_loss(cfg):
    return link.model.stationary_loss if (link := link_from(cfg)).lossy else 0.0


def iters_to_target(curve, target):
    """The first iteration at which the val loss curve [(iter, val_loss), ...] reaches target,
    interpolated linearly between the eval before and the eval that reaches it; None if never."""
    for k, (it, loss) in enumerate(curve):
        if loss <= target:
            if k == 0:
                return float(it)
            prev_it, prev_loss = curve[k - 1]
            return prev_it + (prev_loss - target) / (prev_loss - loss) * (it - prev_it)
    return None


# -----------------------------------------------------------------------------
# runs


def resolved_backend_and_dtype(cfg, run_dir):
    """tp_backend and dtype as the run used them. config.json keeps 'auto' as given; the startup
    line (in train.log, which the sweep writes) says what it became. Without the log, resolve
    'auto' where the config alone decides (train.py and megatron_shim.choose), else keep 'auto'."""
    backend, dtype = cfg.get("tp_backend", "native"), cfg.get("dtype", "auto")
    log_path = os.path.join(run_dir, "train.log")
    if os.path.exists(log_path):
        with open(log_path, errors="replace") as f:
            layouts = [line for line in f if line.startswith("layout:")]
        if layouts:  # a resumed run prints one per start; they agree, take the last
            found = re.search(r"\| backend: (\S+)", layouts[-1])
            backend = {"megatron-core": "megatron"}.get(found.group(1), found.group(1)) if found else backend
            found = re.search(r"\| device: \S+ (\S+) compile=", layouts[-1])
            dtype = found.group(1) if found else dtype
    if backend == "auto" and MODES[cfg["tp_mode"]].processes_per_tp_group(cfg["tp_size"]) == 1:
        backend = "native"  # megatron's layers need real TP processes (megatron_shim.choose)
    if dtype == "auto" and str(cfg.get("device", "auto")).startswith("cpu"):
        dtype = "float32"
    return backend, dtype


def wall_time(evals, result):
    """Seconds the run trained and evaluated: the time_s of its last eval record. A resumed run
    restarts that clock, so its segments are added (the steps between the last kept eval and
    the checkpoint it resumed from are not counted; they are at most one eval interval)."""
    times = [r["time_s"] for r in evals if r.get("time_s") is not None]
    if not times:
        final = (result or {}).get("final", {})
        return final.get("time_s", math.nan)
    total = 0.0
    for previous, current in zip(times, times[1:] + [-math.inf]):
        if current < previous:  # the clock restarted (or the records end): close a segment
            total += previous
    return total


def read_run(run_dir):
    with open(os.path.join(run_dir, "config.json")) as f:
        cfg = json.load(f)
    log = os.path.join(run_dir, "metrics.jsonl")  # none yet, or a torn last line: a run that has not finished
    records = read_log(log, SummaryError) if os.path.exists(log) else []
    result_path = os.path.join(run_dir, "result.json")
    result = json.load(open(result_path)) if os.path.exists(result_path) else None
    evals = [r for r in records if "val_loss" in r]
    steps = [r for r in records if "val_loss" not in r]
    kinds = parse_block_types(cfg["block_types"], cfg["n_layer"])
    syncs, pattern = count_sync_points(kinds, cfg["tp_size"]), describe_pattern(kinds) if cfg["tp_size"] > 1 else "dense"
    if cfg.get("block_schedule"):  # a schedule's syncs: the average per training step over the run
        syncs, pattern = schedule_syncs(cfg), "schedule " + cfg["block_schedule"]
    tp_backend, dtype = resolved_backend_and_dtype(cfg, run_dir)
    ms_per_iter = [r["ms_per_iter"] for r in steps[1:] if r.get("ms_per_iter")]  # the first step pays warm-up
    row = dict(kind="run", run=os.path.basename(run_dir), config=result["config"] if result else "",
               setting=result["setting"] if result else "", seed=cfg["seed"], n=1,
               status="done" if result else "unfinished",
               sync_points=syncs, block_pattern=pattern, tp_size=cfg["tp_size"],
               tp_mode=cfg["tp_mode"], tp_backend=tp_backend, dtype=dtype, loss_model=cfg["loss_model"],
               loss_rate=stationary_loss(cfg),
               ge_preset=cfg["ge_preset"] if cfg["loss_model"] == "gilbert_elliott" else "",
               loss_fwd=cfg["loss_fwd"], loss_bwd=cfg["loss_bwd"], iters=evals[-1]["iter"] if evals else 0,
               final_val_loss=evals[-1]["val_loss"] if evals else math.nan, final_val_loss_std="",
               best_val_loss=min((r["val_loss"] for r in evals), default=math.nan),
               final_val_perplexity=evals[-1]["val_perplexity"] if evals else math.nan,
               final_val_accuracy=evals[-1]["val_accuracy"] if evals else math.nan,
               tokens_per_s=statistics.median(r["tokens_per_s"] for r in steps[1:]) if len(steps) > 1 else math.nan,
               it_per_s=1000.0 / statistics.median(ms_per_iter) if ms_per_iter else math.nan,
               wall_time_s=wall_time(evals, result),
               observed_loss_rate=steps[-1].get("observed_loss_rate", 0.0) if steps else math.nan)
    # the setting is a fingerprint of every key that changes training: the resolved config but the seed
    # and the bookkeeping. Runs of one config file with another max_iters (say, from two sweeps) are not
    # averaged together; runs of two config files that train the same (5comm, and 24comm with the same
    # pattern given on the command line) are one setting. A key the run predates takes today's default
    # (the feature did not exist: it ran as the default does), and the pattern is compared block by block
    cfg = {**DEFAULTS, **cfg, "tp_backend": tp_backend, "dtype": dtype,  # 'auto' as resolved: on a CPU, float32
           "block_types": ",".join(kinds)}
    row["_setting"] = json.dumps({k: v for k, v in cfg.items() if k not in PER_RUN_KEYS + BOOKKEEPING_KEYS},
                                 sort_keys=True)
    # settings with equal _comparable differ only in the sync pattern and the link: their runs of
    # one seed start from the same weights and see the same data, so they may be paired
    row["_comparable"] = json.dumps({k: v for k, v in cfg.items()
                                     if k not in PER_RUN_KEYS + TREATMENT_KEYS + BOOKKEEPING_KEYS}, sort_keys=True)
    row["_dense"] = cfg["tp_size"] == 1 and cfg["loss_model"] == "none"
    # Megatron's pattern on a lossless network: the same function as dense (the noise floor's twin)
    # (a block_schedule run starts as all-tp but switches: not the twin)
    # (every sync whole and unquantized, the receiver's defaults: 24comm at sync_fraction=0.5 or in int8 is
    # a scheme, not the reference). _megatron: that pattern on any link (bench/frontier.py's reference per network)
    row["_megatron"] = (cfg["tp_size"] > 1 and set(kinds) == {"tp"} and not cfg.get("block_schedule")
                        and cfg.get("sync_fraction", 1.0) == 1.0 and not cfg.get("sync_dtype")
                        and cfg.get("lost_fill", "zero") == "zero" and cfg.get("sync_rotation", "none") == "none"
                        and cfg.get("transport", "unreliable") == "unreliable")
    row["_full_tp"] = row["_megatron"] and cfg["loss_model"] == "none"
    row["_name"] = setting_name(row["config"], row["setting"])
    row["_dir"] = run_dir  # unique, unlike the run's name when two sweeps are summarized together
    info_path = os.path.join(run_dir, "run_info.json")  # its numerics class (provenance.numerics_class), if recorded
    info = json.load(open(info_path)) if os.path.exists(info_path) else {}
    row["_numerics"], row["numerics_class"] = run_numerics(info), class_label(info)
    curve = [(r["iter"], r["val_loss"]) for r in evals]
    return row, curve


def run_numerics(info):
    """run_info.json's numerics class; a run resumed in another class names the earlier ones too (resumed_from)."""
    numerics, parts = info.get("numerics"), info.get("earlier_parts", [])
    others = [p["numerics"] for p in parts if p.get("numerics") not in (None, numerics)]
    return {**numerics, "resumed_from": others} if numerics and others else numerics


def class_label(info):
    """A run's numerics class in a few words, for reports per class: 'NVIDIA H200, float32, TF32' or
    'cpu AMD EPYC 7B13 AVX2, float32'. A run written before run_info.json recorded the class is labelled
    from what it did record (its device, or its CPU's kernel ISA), marked 'as recorded then'."""
    n = info.get("numerics")
    if n:
        where = n["host"] if n["device"] == "cuda" else f"cpu {n['host']} {n['cpu_capability']}"
        others = run_numerics(info).get("resumed_from", [])  # a run resumed in another class is a class of its own
        return (f"{where}, {n['dtype']}" + (", TF32" if n["tf32"] else "") + (", deterministic" if n["deterministic"] else "")
                + "".join(f" (resumed from {class_label({'numerics': other})})" for other in others))
    if not info:
        return "unknown (no run_info.json)"
    device, isa = info.get("device", "cpu"), info.get("cpu_capability") or "ISA not recorded"
    return f"{'cpu ' + isa if device == 'cpu' else device} (as recorded then)"


def by_class(diffs, runs):
    """{numerics class: paired stats and seeds} of per-seed differences {seed: d} whose runs {seed: row}
    span several classes (a pair is of one class: check_one_class); {} when they are of one class."""
    classes = {}
    for seed in sorted(diffs):
        classes.setdefault(runs[seed]["numerics_class"], []).append(seed)
    if len(classes) < 2:
        return {}
    return {label: dict(seeds=seeds, **paired_stats([diffs[s] for s in seeds])) for label, seeds in classes.items()}


def schedule_syncs(cfg):
    """The average forward syncs per training step of a block_schedule run over its max_iters steps."""
    schedule = parse_block_schedule(cfg["block_schedule"], cfg["n_layer"])
    ends = [start for start, _ in schedule[1:]] + [cfg["max_iters"]]
    steps = [(min(end, cfg["max_iters"]) - min(start, cfg["max_iters"]), count_sync_points(kinds, cfg["tp_size"]))
             for (start, kinds), end in zip(schedule, ends)]
    return sum(n * syncs for n, syncs in steps) / max(1, cfg["max_iters"])


def setting_name(config, setting):
    """A setting's name for --reference and the paired_reference column: the config file's stem,
    then '/' and the sweep's setting tag if it has one: train_shakespeare_char_12comm/bern0.01."""
    stem = os.path.splitext(os.path.basename(config))[0]
    return f"{stem}/{setting}" if setting else stem


def aggregate(rows):
    """One row per setting (the resolved config but the seed): mean and std over seeds of the finished runs."""
    groups = {}
    for row in rows:  # one run per seed: a seed run twice (two sweeps, two names) is one sample, the first run
        if row["status"] == "done" and groups.setdefault(row["_setting"], {}).setdefault(row["seed"], row) is not row:
            print(f"note: {row['_dir']} repeats seed {row['seed']} of its setting: the first run counts", file=sys.stderr)
    out = []
    for by_seed in groups.values():
        members = list(by_seed.values())
        # one setting under several names (5comm's config file, and 24comm with its pattern given as
        # a sweep setting): named by the config file without a tag where there is one, every name kept
        names = sorted({m["_name"] for m in members}, key=lambda n: ("/" in n, len(n), n))
        first = next(m for m in members if m["_name"] == names[0])
        mean = lambda key: statistics.fmean(m[key] for m in members)  # noqa: E731
        losses = [m["final_val_loss"] for m in members]
        out.append({**first, "kind": "aggregate", "run": f"{first['run'].rsplit('-s', 1)[0]} (mean)", "seed": "",
                    "n": len(members), "final_val_loss": mean("final_val_loss"),
                    "final_val_loss_std": statistics.stdev(losses) if len(losses) > 1 else 0.0,
                    "best_val_loss": mean("best_val_loss"), "final_val_perplexity": mean("final_val_perplexity"),
                    "final_val_accuracy": mean("final_val_accuracy"), "tokens_per_s": mean("tokens_per_s"),
                    "it_per_s": mean("it_per_s"), "wall_time_s": mean("wall_time_s"),
                    "observed_loss_rate": mean("observed_loss_rate"), "_aliases": names,  # its seeds' classes:
                    "numerics_class": "; ".join(sorted({m["numerics_class"] for m in members})),
                    "_by_seed": by_seed})
    return out


class SummaryError(Exception):
    """A bad choice of runs, seeds or reference: the command-line tools print it as one line."""


def find_references(aggregates, reference):
    """The settings a --reference names (the default: Megatron's all-tp pattern, lossless: 24comm at
    12 layers). A name is a setting's name (train_shakespeare_char_24comm, .../bern0.01), with or
    without the train_ prefix; a config path (config/train_gpt2_24comm.py) works too."""
    if not reference:
        return [a for a in aggregates if a["_full_tp"]]
    wanted = setting_name(reference, "") if reference.endswith(".py") else reference
    found = [a for a in aggregates if any(wanted in (n, n.removeprefix("train_")) for n in a["_aliases"])]
    if not found:
        names = sorted({a["_name"] for a in aggregates})
        raise SummaryError(f"--reference={reference!r} matches no setting; allowed: {', '.join(names)}")
    return found


def check_one_class(name, run_a, run_b):
    """A pair's two runs must share a numerics class (run_info.json's `numerics`: device, host model, ISA,
    dtype, TF32, deterministic kernels), or their difference mixes the setting with the arithmetic.
    Runs written before the class was recorded have none: two such runs pair as before; one of each cannot
    be checked, and is refused too."""
    x, y = run_a["_numerics"], run_b["_numerics"]
    if x == y:
        return
    if x is None or y is None:
        raise SummaryError(f"{name}: seed {run_a['seed']}: {run_a['_dir'] if x is None else run_b['_dir']} has no "
                           f"numerics class in run_info.json and the other has: their classes cannot be compared")
    differ = ", ".join(f"{k} {x.get(k)!r} vs {y.get(k)!r}" for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k))
    raise SummaryError(f"{name}: seed {run_a['seed']}: {run_a['_dir']} and {run_b['_dir']} ran in different "
                       f"numerics classes ({differ}): a contrast pairs runs of one class")


def reference_for(setting, references):
    """The reference setting a setting is paired with: one of the same comparable group (same
    data, model size, schedule and iterations). Several fit only when the reference name spans
    settings of one group that differ in a link key; take the one sharing the most seeds."""
    fits = [r for r in references if r["_comparable"] == setting["_comparable"]]
    if len(fits) > 1:
        fits.sort(key=lambda r: -len(set(r["_by_seed"]) & set(setting["_by_seed"])))
        print(f"note: {len(fits)} reference settings fit {setting['run']}; pairing it with {fits[0]['run']}",
              file=sys.stderr)
    return fits[0] if fits else None


def paired_analysis(rows, aggregates, curves, reference=""):
    """Fill the iterations-to-target and paired columns of run rows and aggregates (in place) and
    return the noise floors: per comparable group, dense vs 24comm over the seeds both ran."""
    # iterations to target: the target is dense's final val loss of the same seed and group
    dense_final = {(r["_comparable"], r["seed"]): r["final_val_loss"]
                   for r in reversed(rows) if r["status"] == "done" and r["_dense"]}
    for r in rows:
        final = dense_final.get((r["_comparable"], r["seed"])) if r["status"] == "done" else None
        for tag, factor in TARGETS.items():
            r[f"iters_to_{tag}"] = iters_to_target(curves[r["_dir"]], final * factor) if final is not None else None
            r[f"reached_{tag}"] = None if final is None else int(r[f"iters_to_{tag}"] is not None)
    for a in aggregates:
        for tag in TARGETS:
            reached = [m[f"iters_to_{tag}"] for m in a["_by_seed"].values() if m[f"iters_to_{tag}"] is not None]
            known = [m for m in a["_by_seed"].values() if m[f"reached_{tag}"] is not None]
            a[f"iters_to_{tag}"] = statistics.fmean(reached) if reached else None
            a[f"reached_{tag}"] = len(reached) if known else None

    # the noise floor: same seed, same start, the same function up to float summation order
    floors = {}
    for dense in (a for a in aggregates if a["_dense"]):
        twin = next((a for a in aggregates if a["_full_tp"] and a["_comparable"] == dense["_comparable"]), None)
        if twin is None or dense["_comparable"] in floors:
            continue
        seeds = sorted(set(dense["_by_seed"]) & set(twin["_by_seed"]))
        for s in seeds:
            check_one_class(f"the noise floor ({twin['_name']} - {dense['_name']})", twin["_by_seed"][s], dense["_by_seed"][s])
        diffs = [twin["_by_seed"][s]["final_val_loss"] - dense["_by_seed"][s]["final_val_loss"] for s in seeds]
        if diffs:
            floors[dense["_comparable"]] = dict(
                dense=dense["_name"], tp=twin["_name"], iters=dense["iters"], seeds=seeds, diffs=diffs,
                **{k: v for k, v in paired_stats(diffs).items() if k != "n"}, n=len(diffs),
                min=min(diffs), max=max(diffs), max_abs=max(abs(d) for d in diffs))

    # paired differences against the reference, seed by seed
    references = find_references(aggregates, reference)
    for r in rows:
        r.update(paired_reference=None, paired_diff=None)
    for a in aggregates:
        ref = reference_for(a, references)
        for column in COLUMNS:
            if column.startswith("paired_") or column == "within_noise_floor":
                a[column] = None
        if ref is None:
            continue
        a["paired_reference"] = ref["_name"]
        seeds = sorted(set(a["_by_seed"]) & set(ref["_by_seed"]))
        for s in seeds:
            check_one_class(f"{a['_name']} - {ref['_name']}", a["_by_seed"][s], ref["_by_seed"][s])
            a["_by_seed"][s].update(paired_reference=ref["_name"], paired_diff=a["_by_seed"][s]["final_val_loss"]
                                    - ref["_by_seed"][s]["final_val_loss"])
        if a is ref:
            a["paired_n"] = len(seeds)  # its differences from itself are 0: no interval, no test
            continue
        stats = paired_stats([a["_by_seed"][s]["paired_diff"] for s in seeds])
        a.update(paired_n=stats["n"], paired_diff_mean=stats["mean"], paired_diff_std=stats["std"],
                 paired_ci_low=stats["ci_low"], paired_ci_high=stats["ci_high"], paired_p=stats["p"])
        floor = floors.get(a["_comparable"])
        if floor and stats["ci_low"] is not None:
            a["within_noise_floor"] = max(abs(stats["ci_low"]), abs(stats["ci_high"])) <= floor["max_abs"]
        for tag in TARGETS:
            key = f"iters_to_{tag}"
            diffs = [a["_by_seed"][s][key] - ref["_by_seed"][s][key] for s in seeds
                     if a["_by_seed"][s][key] is not None and ref["_by_seed"][s][key] is not None]
            stats = paired_stats(diffs)
            a.update({f"paired_{key}_n": stats["n"], f"paired_{key}_mean": stats["mean"],
                      f"paired_{key}_ci_low": stats["ci_low"], f"paired_{key}_ci_high": stats["ci_high"]})
    # Holm over every setting in the table that has a test: the family the table is read as
    tested = [a for a in aggregates if a["paired_p"] is not None]
    for a, adjusted in zip(tested, holm([a["paired_p"] for a in tested])):
        a["paired_p_holm"] = adjusted
    return list(floors.values())


def label(row):
    return "dense" if row["tp_size"] == 1 else f"{row['sync_points']:g}comm"  # a schedule's average: 11.25comm


def parse_seeds(text):
    """'1-7' / '1,3,5' / '1-4,8' -> {1, ..., 7} etc.; anything else is a SummaryError."""
    seeds = set()
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match or (match[2] is not None and int(match[2]) < int(match[1])):
            raise SummaryError(f"--seeds={text!r}: expected seeds and increasing ranges, e.g. 1-7 or 1,3,5")
        seeds.update(range(int(match[1]), int(match[2] or match[1]) + 1))
    return seeds


def read_runs(sweep_dirs, seeds=None):
    """(rows, curves) of every run directory (one with config.json) under the sweep directories, or
    given itself (a study that pairs its runs with another study's names those runs one by one),
    only those of `seeds` if given; a missing directory or no runs at all is a SummaryError."""
    run_dirs = []
    for d in sweep_dirs:
        if not os.path.isdir(d):
            raise SummaryError(f"{d!r} is not a directory of runs")
        if os.path.exists(os.path.join(d, "config.json")):
            run_dirs.append(d.rstrip("/"))
            continue
        run_dirs += sorted(p for p in glob.glob(os.path.join(d, "*")) if os.path.exists(os.path.join(p, "config.json")))
    if not run_dirs:
        raise SummaryError(f"no runs (directories with config.json) under {', '.join(sweep_dirs)}")
    rows, curves = [], {}
    for run_dir in run_dirs:
        row, curve = read_run(run_dir)
        if seeds is None or row["seed"] in seeds:
            rows.append(row)
            curves[row["_dir"]] = curve
    if not rows:
        raise SummaryError(f"no runs of seeds {sorted(seeds)} under {', '.join(sweep_dirs)}")
    return rows, curves


def verdict(a):
    """What a paired comparison resolves: a difference (Holm-adjusted p < 0.05), no difference beyond
    the noise floor (the whole interval inside it), or neither (unresolved: more seeds needed)."""
    if a["paired_p_holm"] is not None and a["paired_p_holm"] < ALPHA:
        return "resolved, " + ("higher" if a["paired_diff_mean"] > 0 else "lower") + " val loss than the reference"
    if a["within_noise_floor"]:
        return "resolved, within the noise floor"
    return "unresolved" + (" (interval wider than the noise floor)" if a["within_noise_floor"] is False else "")


def fmt(value, spec):
    """A number for a printed line, or '-' where it is undefined (fewer than two seeds)."""
    return "-" if value is None else format(value, spec)


