"""
The reliable transport's resends in finished runs, measured against theory: per iteration, the packets
resent (and their share of the packets sent) and the resend rounds, from each run's link_stats.json,
beside what the run's own loss model predicts at each sync point's message size (bench/step_time.py's
rounds_cdf, the distribution the step-time model prices resends with).

    python -m bench.resends bench/studies/lost_packets/runs --seeds 38-48

A row per `transport='reliable'` run and one per setting (its seeds pooled). z: (measured - expected) /
its standard error, from the theory alone: a packet's losses before it arrives are geometric and each message's
extra rounds independent with the analytic mean and variance. Both assume independent losses, so z is
printed for Bernoulli links only (a Gilbert-Elliott link's losses come in bursts: expected values only).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import math
import os
import sys

import numpy as np

from bench.step_time import rounds_cdf
from bench.summary import SummaryError, parse_seeds
from links import BernoulliLoss, link_from

K_MAX = 60  # rounds summed over: P(a message needs more) is below 1e-100 at the rates studied


def extra_rounds_moments(model, n_packets):
    """(mean, variance) of a message's rounds beyond the first: X >= k with probability 1 - cdf[k - 1]."""
    tail = 1 - rounds_cdf(model, n_packets, K_MAX)
    k = np.arange(1, K_MAX + 1)
    mean = tail.sum()
    return float(mean), float((tail * (2 * k - 1)).sum() - mean ** 2)


def run_resends(run_dir):
    """One reliable run's measured and expected resends (totals over its iterations), or None when the
    run is not reliable or not finished (no link_stats.json)."""
    stats_path = os.path.join(run_dir, "link_stats.json")
    if not os.path.exists(stats_path):
        return None
    with open(os.path.join(run_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("transport", "unreliable") != "reliable" or cfg.get("loss_model", "none") == "none":
        return None
    with open(stats_path) as f:
        stats = json.load(f)
    try:
        model = link_from(cfg).model
    except ValueError as e:
        raise SummaryError(f"{run_dir}/config.json: {e}")
    q = model.stationary_loss
    row = dict(run=os.path.basename(run_dir), seed=cfg["seed"], iters=stats["iters"], bernoulli=isinstance(model, BernoulliLoss),
               sent=0, resent=0, resent_expected=0.0, resent_var=0.0, rounds=0, rounds_expected=0.0, rounds_var=0.0)
    moments = {}
    for point, directions in stats["points"].items():
        for where in directions.values():
            messages, lost = where["messages"], where["retransmissions"]
            first = where["packets_sent"] - lost  # each message's first sending
            n_packets = first / messages if messages else 0
            if messages and n_packets != int(n_packets):
                raise SummaryError(f"{stats_path}: {point} sends messages of unequal size ({first} packets in "
                                   f"{messages} messages); this check assumes one size per sync point")
            if not messages:
                continue
            if n_packets not in moments:
                moments[n_packets] = extra_rounds_moments(model, int(n_packets))
            mean, var = moments[n_packets]
            row["sent"] += where["packets_sent"]
            row["resent"] += lost
            # a packet is sent until it arrives: its losses are geometric, the sum over the first sendings
            # negative binomial, mean first q / (1 - q), variance first q / (1 - q)^2 (Bernoulli)
            row["resent_expected"] += first * q / (1 - q)
            row["resent_var"] += first * q / (1 - q) ** 2
            row["rounds"] += where["resend_rounds"]
            row["rounds_expected"] += messages * mean
            row["rounds_var"] += messages * var
    row["setting"] = row["run"].rsplit("-s", 1)[0]
    return row


def pooled(rows):
    """The rows of one setting's seeds summed into one (iterations too: per-iteration rates stay rates)."""
    out = dict(rows[0], run=f"{rows[0]['setting']} (all {len(rows)} seeds)", seed="")
    for key in ("iters", "sent", "resent", "resent_expected", "resent_var", "rounds", "rounds_expected", "rounds_var"):
        out[key] = sum(r[key] for r in rows)
    return out


def line(r):
    z = lambda m, e, v: f"{(m - e) / math.sqrt(v):+.2f}" if r["bernoulli"] and v > 0 else "-"  # noqa: E731
    it = r["iters"]
    return (f"| {r['run']} | {it} | {r['resent'] / it:,.1f} | {r['resent_expected'] / it:,.1f} | "
            f"{z(r['resent'], r['resent_expected'], r['resent_var'])} | {r['resent'] / r['sent']:.3%} | "
            f"{r['rounds'] / it:.2f} | {r['rounds_expected'] / it:.2f} | {z(r['rounds'], r['rounds_expected'], r['rounds_var'])} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("sweep_dirs", nargs="+", help="directories of runs (a study's runs/)")
    parser.add_argument("--seeds", default="", help="only the runs of these seeds: 38-48, 1,3,5 (default: all)")
    parser.add_argument("--json", default="", help="also write each setting's pooled rates and every run's z here")
    args = parser.parse_args()
    try:
        seeds = parse_seeds(args.seeds) if args.seeds else None
        rows = []
        for root in args.sweep_dirs:
            if not os.path.isdir(root):
                raise SummaryError(f"{root}: no such directory of runs")
            for name in sorted(os.listdir(root)):
                run_dir = os.path.join(root, name)
                if os.path.exists(os.path.join(run_dir, "config.json")):
                    row = run_resends(run_dir)
                    if row and (seeds is None or row["seed"] in seeds):
                        rows.append(row)
        if not rows:
            raise SummaryError(f"no finished transport='reliable' runs in {', '.join(args.sweep_dirs)}"
                               f"{' at seeds ' + args.seeds if args.seeds else ''}")
    except SummaryError as e:
        sys.exit(f"error: {e}")
    print(f"# resends of the reliable transport per iteration, measured vs expected (loss model of each run); "
          f"{len(rows)} runs")
    print("| run | iters | resent packets / iter | expected | z | share of packets sent "
          "| resend rounds / iter | expected | z |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    settings = {}
    for r in rows:
        settings.setdefault(r["setting"], []).append(r)
        print(line(r))
    for members in settings.values():
        print(line(pooled(members)))
    if args.json:  # per setting: the pooled per-iteration rates and the range of the runs' z (bench/render.py)
        z = lambda r, m, e, v: (r[m] - r[e]) / math.sqrt(r[v]) if r["bernoulli"] and r[v] > 0 else None  # noqa: E731
        out = {}
        for setting, members in settings.items():
            p = pooled(members)
            zs = [x for r in members for x in (z(r, "resent", "resent_expected", "resent_var"),
                                               z(r, "rounds", "rounds_expected", "rounds_var")) if x is not None]
            out[setting] = dict(runs=len(members), resent_per_iter=p["resent"] / p["iters"],
                                resent_expected_per_iter=p["resent_expected"] / p["iters"], share=p["resent"] / p["sent"],
                                rounds_per_iter=p["rounds"] / p["iters"], rounds_expected_per_iter=p["rounds_expected"] / p["iters"],
                                z_min=min(zs, default=None), z_max=max(zs, default=None))
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
