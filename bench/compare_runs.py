"""
Compare the runs of two output directories written by bench/same_numbers.sh: every
metrics.jsonl record (timing fields left out) and every link_stats.json must be identical in
every field the older run wrote (fields the newer code adds are listed, not compared).

    python bench/compare_runs.py /tmp/before /tmp/after
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import json
import os
import sys

TIMING = {"ms_per_iter", "tokens_per_s", "mfu", "time_s"}


def records(path):
    with open(path) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in f if line.strip()]


def shared(old, new):
    """new restricted to the keys old has, recursively; the keys new adds go to ADDED."""
    if isinstance(old, dict) and isinstance(new, dict):
        ADDED.update(set(new) - set(old))
        return {k: shared(old[k], new[k]) if k in new else None for k in old}
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [shared(o, n) for o, n in zip(old, new)]
    return new


ADDED = set()


def main(before, after):
    same = True
    print("| run | records | identical | last train loss | packets lost |")
    print("| --- | ---: | --- | ---: | ---: |")
    for run in sorted(os.listdir(before)):
        path = os.path.join(before, run, "metrics.jsonl")
        if not os.path.exists(path):
            continue
        a, b = records(path), records(os.path.join(after, run, "metrics.jsonl"))
        stats = [os.path.join(root, run, "link_stats.json") for root in (before, after)]
        identical = a == shared(a, b)
        if os.path.exists(stats[0]):
            old_stats = json.load(open(stats[0]))
            identical &= old_stats == shared(old_stats, json.load(open(stats[1])))
        same &= identical
        last = [r for r in a if "val_loss" not in r][-1]
        print(f"| {run} | {len(a)} | {'yes' if identical else 'NO'} | {last['train_loss']!r} | "
              f"{last.get('packets_lost', '-')} |")
    print("all identical" if same else "DIFFERENCES")
    if ADDED:
        print(f"fields only the newer runs have (not compared): {', '.join(sorted(ADDED))}")
    return 0 if same else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python bench/compare_runs.py BEFORE_DIR AFTER_DIR")
    sys.exit(main(*sys.argv[1:]))
