"""Does this machine compute a class's numbers? Each rerun of a committed study run against that run, row by row
(plan.md, amendment 3). A rerun reproduces its run when every logged row of metrics.jsonl is equal in every field but
the clock's, both record the same numerics class, and the rerun passes the plan's provenance rule (P, clean).

    cd /work/main && python -m bench.studies.width_alone.repro --rerun /tmp/repro/runs \
        --ids shakespeare_char_24comm-w64_ref24-s612 shakespeare_char_24comm-w128_ref24-s612 \
        --json bench/studies/width_alone/repro/2026-12-08.json --variables "ATEN_CPU_CAPABILITY=avx2 ..."

The record ({id: verdict and first difference}, the variables, P) goes to --json, and each rerun's small files beside
it (repro/<record's name>-reruns/<id>/), so anyone can recompute it. `land.py --repro <record>` reads it.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import os
import sys

from bench.studies.width_alone.family import provenance
from bench.studies.width_alone.land import STUDY, LandError, copy_kept, plan_commit
from bench.summary import class_label

CLOCK = ("time_s", "ms_per_iter", "tokens_per_s", "mfu")  # how long a row took: a machine's own, not its arithmetic


def rows(folder):
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in CLOCK} for line in f if line.strip()]


def compare(committed, rerun, commits):
    """One rerun against its committed run: {reproduced, rows, differing, first_difference, classes, provenance}."""
    a, b = rows(committed), rows(rerun)
    differing = [i for i, (x, y) in enumerate(zip(a, b)) if x != y] + list(range(min(len(a), len(b)), max(len(a), len(b))))
    first = None
    if differing:
        i = differing[0]
        x, y = (a[i] if i < len(a) else {}), (b[i] if i < len(b) else {})
        first = {"row": i, "fields": {k: [x.get(k), y.get(k)] for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)}}
    with open(os.path.join(committed, "run_info.json")) as f:
        committed_class = class_label(json.load(f))
    with open(os.path.join(rerun, "run_info.json")) as f:
        rerun_class = class_label(json.load(f))
    broken = provenance({"_dir": rerun}, commits)
    return {"reproduced": not differing and committed_class == rerun_class and not broken,
            "rows": [len(a), len(b)], "differing": len(differing), "first_difference": first,
            "classes": [committed_class, rerun_class], "provenance": broken or "P, clean"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--rerun", required=True, help="the folder holding each rerun as <run id>/")
    parser.add_argument("--ids", nargs="+", required=True, help="the committed runs rerun (their folder names in --runs)")
    parser.add_argument("--runs", default=os.path.join(STUDY, "runs"), help="where the study's runs are committed")
    parser.add_argument("--json", required=True, help="the record to write (bench/studies/width_alone/repro/<date>.json)")
    parser.add_argument("--variables", required=True, help="the environment the reruns (and the runs after them) ran under")
    args = parser.parse_args()
    try:
        p = plan_commit()
    except LandError as e:
        sys.exit(f"error: {e}")
    if os.path.exists(args.json):
        sys.exit(f"error: {args.json} exists: a record is never rewritten (landed runs name it); give another --json")
    args.ids = [os.path.basename(os.path.normpath(run_id)) for run_id in args.ids]  # a folder path names its run
    runs = {}
    for run_id in args.ids:
        committed, rerun = os.path.join(args.runs, run_id), os.path.join(args.rerun, run_id)
        for folder in (committed, rerun):
            if not os.path.exists(os.path.join(folder, "metrics.jsonl")):
                sys.exit(f"error: {folder} has no metrics.jsonl: --ids names runs present in both --runs and --rerun")
        runs[run_id] = compare(committed, rerun, [p])
    record = {"P": p, "variables": args.variables, "runs": runs}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(record, f, indent=1)
    logs = os.path.splitext(args.json)[0] + "-reruns"  # not the record's stem: render reads both by name
    for run_id in args.ids:  # the reruns' small files, so the record can be recomputed
        os.makedirs(os.path.join(logs, run_id), exist_ok=True)
        copy_kept(os.path.join(args.rerun, run_id), os.path.join(logs, run_id))
    for run_id, r in runs.items():
        print(f"{run_id}: {'reproduced' if r['reproduced'] else 'NOT reproduced'} ({r['rows'][1]} of {r['rows'][0]} rows, "
              f"{r['differing']} differ; {r['classes'][1]}; {r['provenance']})")
    print(f"wrote {args.json} and {logs}/")


if __name__ == "__main__":
    main()
