"""The scale study's GPU widths in one device call (issue 46, item 5; plan.md). Each width to tune gets its
learning-rate tuning (tuning/sweep_w<W>.py, seeds 200-201) and tuning/plan.md's rule, applied here in code
(a winner at an end of the grid extends it by a factor of two and runs again), and the chosen rate goes to
learning_rates.json. Then the study's seeds of one width run, eight runs at a time, as many whole seeds as
the time left holds by the tuning's measured time per batch; a seed cut off part-way is dropped whole and
said so. Into --out ($OUT on the device): learning_rates.json, tuning_w<W>.tgz and study_w<W>.tgz (the
runs' logs, no checkpoints), host.txt (the caller's commit, the device, the timings, the seeds kept).

    python -m bench.studies.scale.device_width --tune 512 768 --study 512 --limit 540 --commit $(git rev-parse HEAD)
    python -m bench.studies.scale.device_width --study 128 --limit 540 --commit ...   # float32, TF32 off (widths.py)

--set key=value (every run) and --learning_rates (another file) exist for the CPU test at a tiny size. The
device has no network: carry data/shakespeare_char's train.bin, val.bin and meta.pkl (git-ignored). The
tree to run from and what to commit after a call: device_calls/README.md.
"""
import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

from bench import sweep as sweeps
from bench.studies.scale import widths

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))  # the repository
TIE = 0.005  # tuning/plan.md: a point within this of the lowest mean wins if its learning rate is larger


def choose(losses):
    """tuning/plan.md's rule on {peak lr: [final val loss of each seed]} (a run that failed, e.g. diverged to
    a non-finite loss, counts as inf): ('chosen', lr), or ('extend', lr) with the next grid point to run,
    a factor of two past the end whose point won."""
    means = {lr: sum(v) / len(v) for lr, v in losses.items()}
    best = min(means.values())
    if not math.isfinite(best):
        raise ValueError("every tuning run failed: no learning rate to choose")
    pick = max(lr for lr, mean in means.items() if mean <= best + TIE)
    grid = sorted(means)
    if pick == grid[-1]:
        return "extend", pick * 2
    if pick == grid[0]:
        return "extend", pick / 2
    return "chosen", pick


def lr_setting(width, lr):
    return f"w{width}_lr{lr:g}", {"learning_rate": lr, "min_lr": lr / 10}


def study_sweep(width, lr):
    """The study's sweep at `width` as sweep_w<W>.py plans it, with the learning rate given."""
    settings, common = widths.sweep(width, lr)
    return {"name": f"scale_w{width}", "configs": ["config/train_shakespeare_char_24comm.py"],
            "seeds": list(widths.SEEDS), "settings": settings, "common": common, "launcher": ""}


def run_sweep(sweep, out, limit_s, args, log):
    """bench.sweep on `sweep` (written to a temporary file, with --set's keys) under a time limit: the whole
    process group is stopped at the limit. True if it ended by itself."""
    sweep = {**sweep, "common": {**sweep["common"], **args.set}}
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write("".join(f"{key} = {value!r}\n" for key, value in sweep.items()))
    command = [sys.executable, "-m", "bench.sweep", f.name, "--slots", str(args.slots), "--threads", "1",
               "--no_summary", "--out", out]
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               env={**os.environ, "TP_SYNC_COMMIT": args.commit})
    try:
        process.wait(timeout=max(limit_s, 1))
        return True
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return False
    finally:
        os.remove(f.name)


def finished(sweep, out):
    """{seed: [runs]} and which runs are done, by bench.sweep's own plan of the sweep."""
    runs = sweeps.plan(sweep, out)
    return runs, {r["id"]: sweeps.state(r) == "done" for r in runs}


def pack(runs, path):
    with tarfile.open(path, "w:gz") as tar:
        for run in runs:
            for name in sorted(os.listdir(run["dir"])):
                if name != "ckpt.pt":
                    tar.add(os.path.join(run["dir"], name), arcname=os.path.join(run["id"], name))


def tune(width, out, deadline, args, say, log):
    """The tuning at `width` by the rule; returns (the chosen lr or None if the time ran out, seconds per batch)."""
    sweep = sweeps.load_sweep(os.path.join(HERE, "tuning", f"sweep_w{width}.py"))
    batch_s = None
    while True:
        started = time.time()
        if not run_sweep(sweep, out, deadline - time.time(), args, log):
            say(f"n_embd {width}: the tuning was cut off by the limit; nothing chosen")
            return None, None
        runs, done = finished(sweep, out)
        pack(runs, os.path.join(args.out, f"tuning_w{width}.tgz"))
        losses = {}
        for run in runs:
            final = math.inf
            if done[run["id"]]:
                with open(os.path.join(run["dir"], "result.json")) as f:
                    final = json.load(f)["final"]["val_loss"]
            losses.setdefault(sweep["settings"][run["setting"]]["learning_rate"], []).append(final)
        if batch_s is None:  # the first pass, the whole grid at once: wall seconds per `slots` runs
            batch_s = (time.time() - started) * args.slots / len(runs)
        say(f"n_embd {width}: tuning " + "; ".join(f"{lr:g}: {', '.join(f'{v:.4f}' for v in vs)}"
                                                  for lr, vs in sorted(losses.items())))
        try:
            verdict, lr = choose(losses)
        except ValueError as e:  # every run failed (sweeps.log says why): nothing to choose
            say(f"n_embd {width}: {e}; see sweeps.log")
            return None, None
        if verdict == "chosen":
            say(f"n_embd {width}: chosen peak learning rate {lr:g} ({len(runs)} runs, {batch_s:.0f} s per {args.slots})")
            return lr, batch_s
        say(f"n_embd {width}: the lowest mean is at an end of the grid; extended to {lr:g}")
        tag, keys = lr_setting(width, lr)
        sweep = {**sweep, "settings": {**sweep["settings"], tag: keys}}


def study(width, lr, out, deadline, batch_s, args, say, log):
    """As many whole seeds of the study as the time left holds at `batch_s` a seed; the cut-off ones dropped."""
    sweep = study_sweep(width, lr)
    sweep["seeds"] = [s for s in sweep["seeds"] if s >= args.from_seed]
    batch_s = batch_s or args.seed_s
    fits = int((deadline - time.time() - 20) // batch_s) if batch_s else len(sweep["seeds"])
    sweep["seeds"] = sweep["seeds"][:max(0, min(fits, args.max_seeds or len(sweep["seeds"])))]
    if not sweep["seeds"]:
        say(f"n_embd {width}: no whole seed of the study fits in the time left ({deadline - time.time():.0f} s)")
        return
    say(f"n_embd {width}: study seeds {sweep['seeds'][0]}-{sweep['seeds'][-1]} planned"
        + (f" ({batch_s:.0f} s a seed expected, from the tuning)" if batch_s else ""))
    started = time.time()
    whole = run_sweep(sweep, out, deadline - time.time(), args, log)
    runs, done = finished(sweep, out)
    kept = [s for s in sweep["seeds"] if all(done[r["id"]] for r in runs if r["seed"] == s)]
    dropped = [s for s in sweep["seeds"] if s not in kept]
    pack([r for r in runs if r["seed"] in kept], os.path.join(args.out, f"study_w{width}.tgz"))
    say(f"n_embd {width}: study {'ended' if whole else 'cut off by the limit'} after {time.time() - started:.0f} s; "
        f"seeds kept (every run finished): {' '.join(map(str, kept)) or 'none'}; "
        f"dropped (cut off or failed, rerun whole): {' '.join(map(str, dropped)) or 'none'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--tune", type=int, nargs="*", default=[], help="widths to tune first (their tuning sweeps)")
    parser.add_argument("--study", type=int, default=0, help="the width whose study seeds run next")
    parser.add_argument("--limit", type=float, default=540, help="seconds for the whole call")
    parser.add_argument("--commit", required=True, help="the repo's true commit (the copy's git metadata may be stale)")
    parser.add_argument("--out", default=os.environ.get("OUT", "device_width_out"), help="where what comes back goes")
    parser.add_argument("--runs", default="", help="where the runs go (default: a temporary folder)")
    parser.add_argument("--slots", type=int, default=8, help="runs at once on the one GPU")
    parser.add_argument("--max_seeds", type=int, default=0, help="at most this many study seeds (default: all that fit)")
    parser.add_argument("--from_seed", type=int, default=0, help="the study's seeds from this one (a later call)")
    parser.add_argument("--seed_s", type=float, default=0, help="seconds a seed, measured by an earlier call")
    parser.add_argument("--learning_rates", default=os.path.join(HERE, "learning_rates.json"))
    parser.add_argument("--set", nargs="*", default=[], help="key=value for every run (the CPU test's tiny size)")
    args = parser.parse_args()
    deadline = time.time() + args.limit
    if any("=" not in item for item in args.set):
        sys.exit(f"error: --set takes key=value items, got {[i for i in args.set if '=' not in i][0]!r}")
    args.set = dict(item.split("=", 1) for item in args.set)
    for width in args.tune + [args.study] * bool(args.study):
        if width not in widths.GPU_WIDTHS + widths.GPU_FLOAT32:
            sys.exit(f"error: n_embd {width} is not one of the widths a GPU may run: {widths.GPU_WIDTHS} in bfloat16, "
                     f"{widths.GPU_FLOAT32} in float32 (widths.py, plan.md's amendments)")
    os.makedirs(args.out, exist_ok=True)
    runs = args.runs or tempfile.mkdtemp(prefix="device_width_")
    with open(args.learning_rates) as f:
        chosen = json.load(f)
    host = open(os.path.join(args.out, "host.txt"), "a")
    log = open(os.path.join(args.out, "sweeps.log"), "a")

    def say(line):
        print(line, flush=True)
        host.write(line + "\n")
        host.flush()

    import torch
    say(f"repo commit {args.commit} (passed by the caller); torch {torch.__version__}; "
        f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}; {os.cpu_count()} cores; "
        f"start {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; limit {args.limit:.0f} s; --set {args.set}")
    batch = {}
    for width in args.tune:
        lr, batch[width] = tune(width, runs, deadline, args, say, log)
        if lr is None:
            break
        chosen[str(width)] = lr
        for path in (args.learning_rates, os.path.join(args.out, "learning_rates.json")):
            with open(path, "w") as f:
                json.dump(chosen, f)
    if args.study:
        lr = chosen.get(str(args.study))
        if lr is None:
            say(f"n_embd {args.study}: no learning rate chosen; the study does not run")
        else:
            study(args.study, lr, runs, deadline, batch.get(args.study), args, say, log)
    say(f"end {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC")


if __name__ == "__main__":
    main()
