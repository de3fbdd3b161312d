"""The SP loss study's observed loss rates (plan.md: reported beside the hypotheses, not tested): per config, over
the seeds, each lossy run's packets lost / sent from its link_stats.json, both passes together; for b1_sp the
reduce-scatter half (a point's own rows) and the all-gather half (`<point>/gather`) apart. Writes halves.json.

    python -m bench.studies.sp_loss.halves bench/studies/sp_loss/runs --seeds 400-417
"""
import argparse
import json
import os
import sys

from bench.summary import SummaryError, parse_seeds

HALVES = {"b1": {"all-reduce": lambda point: True},
          "b1_sp": {"reduce-scatter": lambda point: not point.endswith("/gather"),
                    "all-gather": lambda point: point.endswith("/gather")}}


def rates(link_stats, picks):
    """{half: (packets lost, packets sent)} of one run, its points summed over both passes."""
    out = {}
    for half, pick in picks.items():
        rows = [row for point, both in link_stats["points"].items() if pick(point) for row in both.values()]
        out[half] = (sum(r["packets_lost"] for r in rows), sum(r["packets_sent"] for r in rows))
    return out


def observed(runs, seeds):
    """{config: {setting: {half: {lowest, highest, pooled, seeds}}}}: each run's rate, the lowest and highest
    over the seeds, and the pooled rate (all lost / all sent)."""
    found = {}
    for config in ("24comm", "12comm"):
        for setting, picks in HALVES.items():
            per_seed = {}
            for seed in seeds:
                path = os.path.join(runs, f"shakespeare_char_{config}-{setting}-s{seed}", "link_stats.json")
                if not os.path.exists(path):
                    raise SummaryError(f"{path}: missing; the analysis needs every planned seed's run")
                with open(path) as f:
                    per_seed[seed] = rates(json.load(f), picks)
            found.setdefault(config, {})[setting] = {
                half: dict(lowest=min(r[half][0] / r[half][1] for r in per_seed.values()),
                           highest=max(r[half][0] / r[half][1] for r in per_seed.values()),
                           pooled=sum(r[half][0] for r in per_seed.values()) / sum(r[half][1] for r in per_seed.values()),
                           seeds=len(per_seed))
                for half in picks}
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("runs", help="the study's runs/ folder")
    parser.add_argument("--seeds", required=True, help="the planned seeds, e.g. 400-417")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "halves.json"))
    args = parser.parse_args()
    try:
        found = observed(args.runs, parse_seeds(args.seeds))
    except SummaryError as e:
        sys.exit(f"error: {e}")
    for config, settings in found.items():
        for setting, halves in settings.items():
            for half, r in halves.items():
                print(f"{config} {setting} {half}: {100 * r['pooled']:.3f}% pooled, {100 * r['lowest']:.3f}-"
                      f"{100 * r['highest']:.3f}% over {r['seeds']} seeds")
    with open(args.out, "w") as f:
        json.dump(found, f, indent=2)


if __name__ == "__main__":
    main()
