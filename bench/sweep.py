"""
Run a grid of training runs (configs x settings x seeds), each a real train.py run in its
own out_dir, then summarize them (bench/summarize.py: CSV and plots).

    python -m bench.sweep bench/studies/sync_count/sweep.py             # run what is missing
    python -m bench.sweep bench/studies/sync_count/sweep.py --slots 2   # two runs at a time
    python -m bench.sweep bench/studies/sync_count/sweep.py --dry_run   # list the runs and their state

A sweep file is plain Python, like a config file:

    name = "char_sync_study"                     # runs go to <out>/<name>/<run id>/
    configs = ["config/train_shakespeare_char_24comm.py", ...]
    seeds = [1, 2, 3]
    settings = {"lossless": {}, "bern1": {"loss_model": "bernoulli", "loss_rate": 0.01}}
    common = {"max_iters": 600}                  # overrides for every run
    launcher = ""                                # e.g. "torchrun --standalone --nproc_per_node=8"

A run is finished when its out_dir has result.json (written here after train.py exits 0);
a finished run is never run again or overwritten. A run that was interrupted resumes from
its checkpoint (sweep runs save one at every eval); one that died before its first
checkpoint starts again. Failed runs are listed at the end with the tail of their log,
and the sweep exits non-zero.

Where runs go (--executor): child processes of this one (the default), submitit's local executor
(`local`: the cluster code path on this machine), or a SLURM job per run (`slurm`, through
submitit: --partition, --gpus_per_run, --time_min; the sweep's `launcher` runs inside the job, so
torchrun uses the job's GPUs). Every executor prints the same `[done/total] ... ETA` line as runs
finish, skips finished runs and resumes interrupted ones; this process stays up to follow them.

    python -m bench.sweep bench/studies/gpt2_sync/sweep.py --executor slurm --partition gpu \
        --gpus_per_run 8 --time_min 720 --slots 33
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

import configurator
from patterns import parse_block_schedule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SWEEP_KEYS = {"name": str, "configs": list, "seeds": list, "settings": dict, "common": dict, "launcher": str}


def fail(message):
    sys.exit(f"error: {message}")


def load_sweep(path):
    if not os.path.isfile(path):
        fail(f"sweep file {path!r} " + ("is a directory" if os.path.isdir(path) else "does not exist") +
             ": give a sweep's .py file (see bench/studies/*/sweep.py)")
    namespace = {}
    try:
        exec(compile(open(path).read(), path, "exec"), namespace)
    except Exception as e:  # user input: one line
        fail(f"sweep file {path}: {type(e).__name__}: {e}")
    sweep = {k: v for k, v in namespace.items() if not k.startswith("_") and k in SWEEP_KEYS}
    unknown = [k for k in namespace if not k.startswith("_") and k not in SWEEP_KEYS and k != "__builtins__"]
    if unknown:
        fail(f"sweep file {path}: unknown key {unknown[0]!r}; allowed: {', '.join(SWEEP_KEYS)}")
    sweep = {"seeds": [1337], "settings": {"": {}}, "common": {}, "launcher": "", **sweep}
    for key, kind in SWEEP_KEYS.items():
        if key not in sweep:
            fail(f"sweep file {path}: {key!r} is missing")
        if not isinstance(sweep[key], kind):
            fail(f"sweep file {path}: {key} must be a {kind.__name__}")
    return sweep


def plan(sweep, out):
    """Every run of the sweep: its id, out_dir and train.py arguments, checked before anything runs."""
    defaults = configurator.train_defaults()
    runs = []
    # seeds outermost: a sweep stopped part-way holds every config and setting of its first seeds,
    # which is what the paired statistics need, rather than all seeds of its first configs
    for seed in sweep["seeds"]:
        for config in sweep["configs"]:
            for tag, setting in sweep["settings"].items():
                overrides = {**sweep["common"], **setting, "seed": seed}
                args = [config] + [f"--{k}={v}" for k, v in overrides.items()]
                try:  # the same validation as train.py: a typo fails the sweep now, not after an hour
                    checked, given = configurator.configure(defaults, args)
                    configurator.check_train_config(checked, given)
                    parse_block_schedule(checked["block_schedule"] or f"0:{checked['block_types']}", checked["n_layer"],
                                         "block_schedule" if checked["block_schedule"] else "block_types")
                except (configurator.ConfigError, ValueError) as e:
                    fail(f"sweep {sweep['name']}, {config} {tag}: {e}")
                stem = os.path.splitext(os.path.basename(config))[0].replace("train_", "")
                run_id = "-".join(p for p in (stem, tag, f"s{seed}") if p)
                run_dir = os.path.join(out, sweep["name"], run_id)
                runs.append(dict(id=run_id, dir=run_dir, config=config, setting=tag, seed=seed, args=args))
    ids = [r["id"] for r in runs]
    if len(set(ids)) != len(ids):
        fail(f"sweep {sweep['name']}: two runs would share an out_dir; give configs or settings distinct names")
    return runs


def only_seeds(runs, text, sweep):
    """The runs of the seeds `text` names ('28-32', '1,3'); each must be one of the sweep's."""
    from bench.summary import SummaryError, parse_seeds
    try:
        wanted = parse_seeds(text)
    except SummaryError as e:
        fail(str(e))
    missing = sorted(wanted - set(sweep["seeds"]))
    if missing:
        fail(f"--seeds={text}: seed {missing[0]} is not one of sweep {sweep['name']}'s seeds "
             f"({', '.join(map(str, sweep['seeds']))})")
    return [r for r in runs if r["seed"] in wanted]


def state(run):
    if os.path.exists(os.path.join(run["dir"], "result.json")):
        return "done"
    if os.path.exists(os.path.join(run["dir"], "ckpt.pt")):
        return "resume"
    return "new"


def command(run, launcher):
    """The train.py command for a run: new, or resumed from its checkpoint."""
    args = run["args"] + [f"--out_dir={run['dir']}", "--always_save_checkpoint=True"]
    if state(run) == "resume":
        args.append("--init_from=resume")
    else:  # nothing worth keeping: a run that died before its first checkpoint starts again
        for name in ("metrics.jsonl", "config.json", "link_stats.json"):
            if os.path.exists(os.path.join(run["dir"], name)):
                os.remove(os.path.join(run["dir"], name))
    prefix = shlex.split(launcher) if launcher else [sys.executable]
    return prefix + [os.path.join(ROOT, "train.py")] + args


def finish(run):
    """Mark a run finished: result.json with its final numbers (what summarize.py reads first)."""
    with open(os.path.join(run["dir"], "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    evals = [r for r in records if "val_loss" in r]
    result = {"id": run["id"], "config": run["config"], "setting": run["setting"], "seed": run["seed"],
              "args": run["args"], "final": evals[-1], "best_val_loss": min(r["val_loss"] for r in evals)}
    tmp = os.path.join(run["dir"], "result.json.tmp")
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2)
    os.replace(tmp, os.path.join(run["dir"], "result.json"))


def train_job(argv, log_path, env):
    """One run as a job (this process's child, or a submitit job on this machine or a cluster node):
    train.py, its output appended to the run's train.log; returns its exit status."""
    with open(log_path, "a") as log:
        return subprocess.run(argv, cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=log).returncode


class ProcessExecutor:
    """Today's default: each run a child process of this one."""

    def submit(self, argv, log_path, env):
        log = open(log_path, "a")
        proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=log)
        proc.log = log
        return proc

    @staticmethod
    def returncode(proc):
        """None while the run goes on, then its exit status."""
        if proc.poll() is None:
            return None
        proc.log.close()
        return proc.returncode


class SubmititExecutor:
    """Each run a submitit job: `local` (submitit's LocalExecutor, the same code path on this
    machine) or `slurm` (sbatch; `launcher` still runs inside the job, e.g. torchrun on its GPUs).
    A job that the cluster kills (time limit, preemption) counts as failed; its checkpoint stays,
    and the next sweep resumes it, as a killed local run does."""

    def __init__(self, kind, folder, partition="", gpus=0, time_min=0, cpus=1):
        try:
            import submitit  # imported only when asked for: the default executor needs nothing more
        except ImportError:
            fail(f"--executor {kind} needs submitit, which is not installed: pip install submitit")
        self.executor = submitit.AutoExecutor(folder=folder, cluster=kind)
        params = dict(gpus_per_node=gpus, cpus_per_task=cpus, tasks_per_node=1, nodes=1)
        if time_min:
            params["timeout_min"] = time_min
        if partition:
            params["slurm_partition"] = partition
        self.executor.update_parameters(**params)
        # the job unpickles bench.sweep.train_job: it must find this repository's bench package
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)

    def submit(self, argv, log_path, env):
        return self.executor.submit(train_job, argv, log_path, env)

    @staticmethod
    def returncode(job):
        if not job.done():
            return None
        try:
            return job.result()
        except Exception as e:  # the job itself failed (killed, timed out): a failed run, resumed next time
            print(f"note: job {job.job_id} ended without a result: {type(e).__name__}: {str(e).strip()[-300:]}",
                  file=sys.stderr)
            return -1


def make_executor(args, sweep):
    if args.executor == "process":
        return ProcessExecutor()
    return SubmititExecutor(args.executor, args.submitit_dir or os.path.join(args.out, sweep["name"], ".submitit"),
                            partition=args.partition, gpus=args.gpus_per_run, time_min=args.time_min,
                            cpus=args.threads or 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("sweep", help="a sweep file, e.g. bench/studies/sync_count/sweep.py")
    parser.add_argument("--out", default=os.path.join(ROOT, "runs"), help="where run directories go")
    parser.add_argument("--slots", type=int, default=1, help="runs at a time (CPU threads are split among them; "
                        "with --executor slurm: jobs in the queue at once)")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads per run (default: cores / slots)")
    parser.add_argument("--seeds", default="", help="only these of the sweep's seeds: 28-32, 1,3,5 (default: all); "
                        "a study split over machines runs each part whole this way")
    parser.add_argument("--dry_run", action="store_true", help="list the runs and their state, run nothing")
    parser.add_argument("--no_summary", action="store_true", help="skip bench/summarize.py at the end")
    parser.add_argument("--executor", choices=("process", "local", "slurm"), default="process",
                        help="process: child processes of this one (default); local: submitit's local executor; "
                             "slurm: a SLURM job per run through submitit")
    parser.add_argument("--partition", default="", help="SLURM partition (--executor slurm)")
    parser.add_argument("--gpus_per_run", type=int, default=0, help="GPUs per job (submitit executors; e.g. 8 with "
                        "launcher = 'torchrun --standalone --nproc_per_node=8')")
    parser.add_argument("--time_min", type=int, default=0, help="a job's time limit in minutes (submitit executors; "
                        "a run stopped by it resumes from its checkpoint on the next sweep)")
    parser.add_argument("--submitit_dir", default="", help="submitit's logs and pickles (default: <out>/<name>/.submitit)")
    args = parser.parse_args()
    if args.slots < 1:
        fail(f"--slots={args.slots} must be at least 1")
    if args.executor != "slurm" and args.partition:
        fail(f"--partition is for --executor slurm, not {args.executor}")
    sweep = load_sweep(args.sweep)
    runs = plan(sweep, args.out)
    if args.seeds:
        runs = only_seeds(runs, args.seeds, sweep)
    todo = [r for r in runs if state(r) != "done"]
    print(f"sweep {sweep['name']}: {len(runs)} runs, {len(runs) - len(todo)} done, {len(todo)} to run "
          f"({sum(state(r) == 'resume' for r in todo)} to resume) -> {os.path.join(args.out, sweep['name'])}", flush=True)
    if args.dry_run:
        for r in runs:
            print(f"  {state(r):6s} {r['id']}")
        return

    threads = args.threads or max(1, (os.cpu_count() or 1) // args.slots)
    env = dict(OMP_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
    executor = make_executor(args, sweep) if todo else None
    running, failed, durations, started = {}, [], [], time.time()
    queue = list(todo)
    while queue or running:
        while queue and len(running) < args.slots:
            run = queue.pop(0)
            os.makedirs(run["dir"], exist_ok=True)
            handle = executor.submit(command(run, sweep["launcher"]), os.path.join(run["dir"], "train.log"), env)
            running[id(handle)] = (handle, run, time.time())
        time.sleep(0.5)
        for key, (handle, run, t0) in list(running.items()):
            returncode = executor.returncode(handle)
            if returncode is None:
                continue
            del running[key]
            if returncode == 0:
                finish(run)
                durations.append(time.time() - t0)
            else:
                failed.append(run)
            done = len(durations) + len(failed)
            eta = (sum(durations) / len(durations)) * (len(queue) + len(running)) / args.slots if durations else 0
            print(f"[{done}/{len(todo)}] {'ok    ' if returncode == 0 else 'FAILED'} {run['id']} "
                  f"({time.time() - t0:.0f}s) | elapsed {(time.time() - started) / 60:.1f} min, "
                  f"ETA {eta / 60:.1f} min", flush=True)
    for run in failed:
        with open(os.path.join(run["dir"], "train.log")) as f:
            tail = f.read().strip().splitlines()[-3:]
        print(f"FAILED {run['id']}: {' | '.join(tail)}  (log: {os.path.join(run['dir'], 'train.log')})")
    if not args.no_summary:
        subprocess.run([sys.executable, "-m", "bench.summarize", os.path.join(args.out, sweep["name"])],
                       cwd=ROOT, check=False)
    if failed:
        sys.exit(f"error: {len(failed)} of {len(todo)} runs failed (they resume or restart on the next sweep)")


if __name__ == "__main__":
    main()
