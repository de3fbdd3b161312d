"""Land a finished seed of one of the width-alone study's CPU arms (plan.md "Runs, session by session"): its runs'
small files, copied from the worktree's sweep folder into the study's runs/ and, with --commit, committed. A seed
lands whole or not at all, and only in the class of its study runs (plan.md "Numerics classes and the host rule").

    cd /work/main && WIDTH_ALONE_STATE=$PWD/bench/studies/width_alone python -m bench.studies.width_alone.land \
        bench/studies/width_alone/sweep_horizon_w64.py --from /work/wt-width-alone/runs --seeds 604 --commit
    (--wait: beside a running sweep, land the seed once its last run ends)

Before anything is copied, every run the sweep plans for the seeds must have finished (result.json) and pass:
- the plan's provenance rule (family.py's: P's commit, a clean checkout, its resumes recorded);
- the sweep's own keys: config.json holds each key the sweep gives the run (its rate, width, iterations), as the
  sweep plans it from the committed state now;
- one class: the run's numerics class is the class of every study run of its seed already in runs/ (the seed's
  first arm, the study itself, lands against nothing);
- nothing overwritten: no run folder of that name is in runs/ yet.
- under ISA ceilings (plan.md amendment 3: the runs record a lower CPU kernel ISA than this host reaches, so land
  runs on the host that ran them) only with --repro: repro.py's record, committed as it is, from P, naming all
  three ceilings, shows the seed's w64_ref24 and w128_ref24 reproduced bit for bit in that class by reruns that
  started before each run. (MKL and oneDNN leave no trace in a run: that the sweep had all three exported is the
  session's to record, in sessions.md.)
ckpt.pt stays behind. A refusal is one line naming the run and the rule, and copies nothing.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

from bench import sweep as sweeps
from bench.studies.width_alone.budget import ISA_CEILINGS, arm_of
from bench.studies.width_alone.family import provenance
from bench.summary import class_label

STUDY = os.path.dirname(os.path.abspath(__file__))
KEPT = ("config.json", "metrics.jsonl", "result.json", "run_info.json", "train.log")  # all but ckpt.pt
STUDY_SWEEP = "width_alone_study"  # the one arm that lands with no study run of its seed to match
ISA_ORDER = ("DEFAULT", "AVX2", "AVX512")  # torch's x86 CPU kernel levels, lowest first
STALLED_S = 1800  # --wait gives up when no run of the sweep has written its train.log for this long


class LandError(Exception):
    pass


def plan_commit(study=STUDY):
    """P: the commit that added plan.md (plan.md "Status")."""
    out = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", "plan.md"], cwd=study,
                         capture_output=True, text=True)
    commits = out.stdout.split()
    if out.returncode != 0 or not commits:
        raise LandError(f"{study}/plan.md: no commit added it (is this a git checkout?)")
    return commits[-1]


def read(path):
    with open(path) as f:
        return json.load(f)


def study_classes(runs_dir, seed):
    """The numerics classes of the seed's study runs already in runs/ (budget.arm_of's S64 and S128: not a horizon,
    floor or second-reading run)."""
    found = set()
    for info in glob.glob(os.path.join(runs_dir, f"shakespeare_char_24comm-w*-s{seed}", "run_info.json")):
        if arm_of(os.path.basename(os.path.dirname(info)), tuning=False) in ("S64", "S128"):
            found.add(class_label(read(info)))
    return found


def check(sweep, planned, source, runs_dir, commits):
    """The runs of `planned` (bench.sweep.plan's records) that may land: [(run, its folder in source, its class,
    whether the seed had study runs to match)], or a LandError naming the first that may not."""
    out = []
    for run in planned:
        folder = os.path.join(source, sweep["name"], run["id"])
        if not os.path.exists(os.path.join(folder, "result.json")):
            raise LandError(f"seed {run['seed']} is not whole: {folder} has no result.json (a seed lands whole or not at all)")
        broken = provenance({"_dir": folder}, commits)
        if broken:
            raise LandError(f"{folder}: {'; '.join(broken)} (plan.md \"Provenance\"): delete it and rerun it")
        config = read(os.path.join(folder, "config.json"))
        wanted = {**sweep["common"], **sweep["settings"][run["setting"]], "seed": run["seed"]}
        differ = [k for k, v in wanted.items() if config.get(k) != v]
        if differ:
            raise LandError(f"{folder}: config.json's {', '.join(differ)} not what {sweep['name']} plans now "
                            f"({', '.join(f'{k}={wanted[k]!r}' for k in differ)})")
        label = class_label(read(os.path.join(folder, "run_info.json")))
        classes = study_classes(runs_dir, run["seed"])
        if not classes and sweep["name"] != STUDY_SWEEP:
            raise LandError(f"seed {run['seed']} has no study run in {runs_dir}: {sweep['name']}'s runs pair with its "
                            f"study runs, which land first (their class is the one these must match)")
        if classes and classes != {label}:
            raise LandError(f"{folder} ran in {label}, not the class of seed {run['seed']}'s study runs "
                            f"({', '.join(sorted(classes))}): it pairs with none of them")
        if os.path.exists(os.path.join(runs_dir, run["id"])):
            raise LandError(f"{os.path.join(runs_dir, run['id'])} exists already: nothing is overwritten")
        out.append((run, folder, label, bool(classes)))
    for seed in {run["seed"] for run, *_ in out}:  # the study arm lands against nothing: its own runs agree
        labels = sorted({label for run, _, label, _ in out if run["seed"] == seed})
        if len(labels) > 1:
            raise LandError(f"seed {seed}'s runs ran in {len(labels)} classes ({'; '.join(labels)}): a seed runs in one class")
    return out


def reproduced_seeds(record, label):
    """The seeds the record shows reproduced at both widths (w64_ref24 and w128_ref24) in class `label`, every rerun
    of the seed reproduced."""
    by_seed = {}
    for run_id, r in record["runs"].items():
        seed = int(run_id.rsplit("-s", 1)[1])
        by_seed.setdefault(seed, []).append((run_id.split("-")[1], r))
    return {seed for seed, found in by_seed.items()
            if all(r["reproduced"] and r["classes"][1] == label for _, r in found)
            and {"w64_ref24", "w128_ref24"} <= {setting for setting, _ in found}}


def check_reproduced(landing, record, name, p):
    """Amendment 3: each landing seed reproduced, in the class its runs record, by the record `name` (from P, under
    all three ceilings), its reruns started before the run."""
    missing = [k for k in ISA_CEILINGS if f"{k}=" not in record.get("variables", "")]
    if record.get("P") != p or missing:
        raise LandError(f"{name}: " + (f"its reruns ran at {str(record.get('P'))[:12]}, not P" if record.get("P") != p
                                      else f"its variables name no {', '.join(missing)} (amendment 3 sets all three)"))
    reruns = os.path.splitext(name)[0] + "-reruns"
    for run, folder, label, _ in landing:
        if run["seed"] not in reproduced_seeds(record, label):
            raise LandError(f"{folder}: {name} does not show seed {run['seed']}'s w64_ref24 and w128_ref24 reproduced "
                            f"bit for bit in {label} (plan.md amendment 3): it does not land")
        started = read(os.path.join(folder, "run_info.json")).get("started", "")
        for run_id in record["runs"]:
            if run_id.endswith(f"-s{run['seed']}"):
                first = read(os.path.join(reruns, run_id, "run_info.json")).get("started", "")
                if not (first and started and first < started):
                    raise LandError(f"{folder} started {started or 'at no recorded time'}, not after {run_id}'s rerun "
                                    f"({first or 'no recorded start'}): the reruns come first (plan.md amendment 3)")


def check_committed(path):
    """The record is in git as it is on disk (amendment 3: committed before the seed's runs land)."""
    here, name = os.path.split(os.path.abspath(path))  # git reads paths from where it runs
    for step in (["git", "ls-files", "--error-unmatch", "--", name], ["git", "diff", "--quiet", "HEAD", "--", name]):
        if subprocess.run(step, cwd=here, capture_output=True).returncode != 0:
            raise LandError(f"{path}: not committed as it is (plan.md amendment 3: commit the record first)")


def host_capability():
    """The CPU kernel ISA torch reaches on this host with no ceiling set (asked in a child process, so a ceiling
    exported here does not count)."""
    env = {k: v for k, v in os.environ.items() if k not in ISA_CEILINGS}
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                         env=env, capture_output=True, text=True)
    return out.stdout.strip()


def under_ceilings(landing, host):
    """The first landing run recorded at a lower CPU kernel ISA than this host reaches (it ran under ISA ceilings,
    amendment 3), as (folder, its ISA), or None."""
    rank = {isa: i for i, isa in enumerate(ISA_ORDER)}
    for _, folder, _, _ in landing:
        n = read(os.path.join(folder, "run_info.json")).get("numerics") or {}
        isa = n.get("cpu_capability")
        if n.get("device") == "cpu" and isa in rank and host in rank and rank[isa] < rank[host]:
            return folder, isa
    return None


def land(landing, runs_dir):
    """Copy the runs' small files into runs_dir; the folders written."""
    written = []
    for run, folder, *_ in landing:
        target = os.path.join(runs_dir, run["id"])
        os.makedirs(target)
        copy_kept(folder, target)
        written.append(target)
    return written


def copy_kept(folder, target):
    """A run's small files (KEPT: all but ckpt.pt) from folder into the existing target folder."""
    for name in KEPT:
        if os.path.exists(os.path.join(folder, name)):
            shutil.copy2(os.path.join(folder, name), os.path.join(target, name))


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("sweep", help="the arm's sweep file (bench/studies/width_alone/sweep_*.py)")
    parser.add_argument("--from", dest="source", required=True, help="the worktree's runs/ folder, whose <sweep name>/ holds the runs")
    parser.add_argument("--seeds", required=True, help="the seeds to land, each whole: 604 or 604-605")
    parser.add_argument("--runs", default=os.path.join(STUDY, "runs"), help="where the study's runs are committed")
    parser.add_argument("--commit", action="store_true", help="git add and commit what landed, one commit")
    parser.add_argument("--wait", action="store_true", help="first wait until every run of the seeds has result.json "
                        "(bench.sweep writes it when train.py ends), checking every minute")
    parser.add_argument("--repro", default="", help="runs from a host that joined the class by its ISA variables "
                        "(plan.md amendment 3): repro.py's record, which must show each seed reproduced at both widths")
    args = parser.parse_args()
    sweep = sweeps.load_sweep(args.sweep)
    planned = sweeps.only_seeds(sweeps.plan(sweep, args.source), args.seeds, sweep)
    result = lambda run: os.path.join(args.source, sweep["name"], run["id"], "result.json")  # noqa: E731
    started = time.time()  # a sweep launched beside this has had no time to log yet
    while args.wait and not all(os.path.exists(result(run)) for run in planned):
        logs = glob.glob(os.path.join(args.source, sweep["name"], "*", "train.log"))
        if time.time() - max(map(os.path.getmtime, logs), default=started) > STALLED_S:
            sys.exit(f"error: no run of {sweep['name']} has written its train.log for {STALLED_S // 60} minutes and "
                     f"seeds {args.seeds} are not whole: is the sweep running? (a failed run writes no result.json)")
        time.sleep(60)
    try:
        p = plan_commit()
        landing = check(sweep, planned, args.source, args.runs, [p])
        if args.repro:
            check_committed(args.repro)
            check_reproduced(landing, read(args.repro), args.repro, p)
        elif ceiled := under_ceilings(landing, host := host_capability()):
            raise LandError(f"{ceiled[0]} recorded {ceiled[1]} kernels on a host whose kernels reach "
                            f"{host}: it ran under ISA ceilings and lands only with --repro (plan.md amendment 3)")
    except LandError as e:
        sys.exit(f"error: {e}")
    written = land(landing, args.runs)
    seeds = sorted({run["seed"] for run, *_ in landing})
    settings = list(dict.fromkeys(run["setting"] for run, *_ in landing))
    labels = sorted({label for _, _, label, _ in landing})
    matched = ", the class of each seed's study runs" if all(m for *_, m in landing) else ""
    matched += f" (amendment 3: reproduced, {os.path.basename(args.repro)})" if args.repro else ""
    message = (f"width_alone {sweep['name']}: seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} whole, "
               f"{len(written)} run{'s' if len(written) != 1 else ''} ({', '.join(settings)}), from the worktree at P={p[:7]}, {'; '.join(labels)}{matched}")
    for path in written:
        print(f"landed {path}")
    if args.commit:  # only these folders, whatever else is staged, in the checkout that holds them
        for step in (["git", "add", "--", *written], ["git", "commit", "-q", "-m", message, "--", *written]):
            done = subprocess.run(step, cwd=args.runs, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"error: landed but not committed: `{' '.join(step[:3])}` failed: "
                         f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")
        print(f"committed: {message}")
    print("next: python -m bench.render, and commit findings.md")


if __name__ == "__main__":
    main()
