"""The width-alone study's design (plan.md, committed before any of its runs): its settings, widths, rate grids
and seeds, and the sweeps built from them. Every sweep file of the study is a few lines over these functions, so
the tuning, the study, the horizon arm and the GPU ladder cannot drift apart.

The study's state (the rates the tuning's rule chose, the grid points it added at an edge) lives in two files the
rates tool writes and a person commits: chosen_rates.json and tuning/extensions.json. The CPU runs go from a
worktree at the plan's commit, whose copies of these files are the empty ones committed with the plan; the sweeps
read the committed files of the main checkout instead, named by WIDTH_ALONE_STATE (plan.md "Runs"), and refuse a
state file with uncommitted changes, so a run's rate is always one a commit records (it is in the run's argv too).
"""
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = "config/train_shakespeare_char_24comm.py"  # 12 layers, TP=2 sim, 600 iterations, 50 warmup, cosine

# the settings, each an override of 24comm's config (the scale study's names and meanings)
SETTINGS = {
    "ref24": {},                                        # tp x12: 24 syncs, the reference
    "drop1": {"block_types": "parallel"},               # 1comm
    "drop5": {"block_types": "spd,parallel,parallel"},  # 5comm
    "half": {"sync_fraction": 0.5},                     # tp x12, each sync half the channels
    "ladder": {"block_types": "ladder"},                # Ladder Residual: 24 syncs, 1 exposed
}
CPU = {64: ("ref24", "drop1", "drop5", "half", "ladder"), 128: ("ref24", "drop1", "half", "ladder")}
GPU = ("ref24", "drop1", "half", "ladder")                # at every width of the GPU ladder
GPU_WIDTHS = (64, 128, 256, 512)                         # in this order; 768 only once these are complete
HORIZON = ("ref24", "drop1", "half", "ladder")           # 2,400 iterations at n_embd 64
HORIZON_LAST = ("drop5",)                                # its own sweep file: cut before the four above

# the tuning's base grid per width (factor-2 steps); the rule extends a setting's grid at an edge (rates.py)
GRID = {64: (0.005, 0.01, 0.02, 0.04), 128: (0.0025, 0.005, 0.01, 0.02), 256: (0.00125, 0.0025, 0.005, 0.01),
        512: (0.000625, 0.00125, 0.0025, 0.005), 768: (0.000625, 0.00125, 0.0025, 0.005)}

# seeds: fresh (no study of bench/studies uses 500-502 or 600-613); tuning seeds never enter the study
TUNING_SEEDS = [500, 501, 502]
GPU_TUNING_SEEDS = [500, 501]
STUDY_SEEDS = list(range(600, 614))  # 14, from the power calculation (plan.md)
# the horizon arm runs 8 of the study seeds (plan.md: the first 8, in seed order, that a session of their study
# runs' class reaches), so its sweep plans all 14 and a session names its seeds with --seeds
HORIZON_SEEDS = STUDY_SEEDS
HORIZON_N = 8
HORIZON_ITERS = 2400  # 4x: max_iters and lr_decay_iters scale, warmup_iters (50) and min_lr = lr/10 do not

STATE = os.environ.get("WIDTH_ALONE_STATE", HERE)  # where chosen_rates.json and tuning/extensions.json are read


def common(gpu=False):
    """The keys every run shares (the scale study's): eval every 75 iterations on 40 batches, float32. On a GPU,
    bfloat16 autocast with TF32 off for what stays in float32: the GPU ladder's one class (plan.md)."""
    keys = {"compile": False, "eval_interval": 75, "eval_iters": 40, "dtype": "float32"}
    return {**keys, "dtype": "bfloat16", "tf32": False} if gpu else keys


def shape(width):
    return {"n_embd": width, "n_head": width // 16}  # 16-wide heads at every width


def rate(lr):
    return {"learning_rate": lr, "min_lr": lr / 10}


def committed(path):
    """Refuse a state file with uncommitted changes: a run's rate must be one a commit records. Outside a git
    checkout (a test's folder), WIDTH_ALONE_UNCOMMITTED=1 is required to read it at all."""
    if os.environ.get("WIDTH_ALONE_UNCOMMITTED") == "1":
        return
    folder, name = os.path.split(os.path.abspath(path))
    out = subprocess.run(["git", "status", "--porcelain", "--", name], cwd=folder, capture_output=True, text=True)
    if out.returncode != 0:
        raise ValueError(f"{path} is not in a git checkout: the study reads only committed state (plan.md)")
    if out.stdout.strip():
        raise ValueError(f"{path} has uncommitted changes: commit it before a run reads it (plan.md)")


def read_state(name, state=None):
    path = os.path.join(state or STATE, name)
    if not os.path.exists(path):
        return {}
    committed(path)
    with open(path) as f:
        return json.load(f)


def grid(width, setting, extensions):
    """A setting's tuning grid at a width: the base grid and the points the rule added, ascending."""
    return sorted(set(GRID[width]) | set(extensions.get(str(width), {}).get(setting, [])))


def tuning_sweep(width, settings, seeds, extensions, gpu=False):
    """Every setting at every rate of its grid, on the tuning seeds (seeds outermost, as bench.sweep plans)."""
    tagged = {f"w{width}_{s}_lr{lr:g}": {**SETTINGS[s], **rate(lr)}
              for s in settings for lr in grid(width, s, extensions)}
    return {"name": f"width_alone_{'gpu_' if gpu else ''}tuning_w{width}", "configs": [CONFIG], "seeds": list(seeds),
            "settings": tagged, "common": {**common(gpu), **shape(width)}, "launcher": ""}


def chosen(rates, width, settings):
    """{setting: its chosen rate} at a width, or a ValueError naming what the tuning has not chosen yet."""
    at = rates.get(str(width)) or {}
    missing = [s for s in settings if at.get(s) is None]
    if missing:
        raise ValueError(f"n_embd {width}: no rate chosen for {', '.join(missing)} yet: run the tuning and "
                         f"`python -m bench.studies.width_alone.rates --width {width} --write` first (plan.md)")
    return {s: at[s] for s in settings}


def study_settings(widths_settings, rates, suffix=""):
    """{w<W>_<setting>: its keys at its own chosen rate}, the widths in the order given (a seed's runs together)."""
    out = {}
    for width, settings in widths_settings:
        for s, lr in chosen(rates, width, settings).items():
            out[f"w{width}{suffix}_{s}"] = {**SETTINGS[s], **shape(width), **rate(lr)}
    return out


def at24_settings(width, settings, rates):
    """The second reading's runs: each setting at 24comm's chosen rate, where that is not its own (where it is,
    the study's own run is the second reading as well)."""
    lrs = chosen(rates, width, ("ref24",) + tuple(settings))
    return {f"w{width}_{s}_at24": {**SETTINGS[s], **shape(width), **rate(lrs["ref24"])}
            for s in settings if s != "ref24" and lrs[s] != lrs["ref24"]}


def horizon_common():
    """The 600-iteration runs' keys with the horizon's four times the iterations: the cosine is stretched over
    the run (lr_decay_iters = max_iters), the warmup (50) and min_lr (a tenth of the peak) are unchanged, and
    evals every 300 iterations (nine evals, as at 600: iteration 600 is one of them)."""
    return {**common(), "max_iters": HORIZON_ITERS, "lr_decay_iters": HORIZON_ITERS, "eval_interval": 300}
