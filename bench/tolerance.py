"""
Packet-loss tolerance per config, from a summary's run rows (bench/summarize.py's CSV): every
lossy run paired with the lossless run of the same config and seed (same weights, same batches),
its final val loss minus the lossless one's.

    python -m bench.tolerance bench/studies/loss_sweep/experiment_summary.csv [--plot bench/studies/loss_sweep/tolerance.png]

Per (config, link setting): the paired differences' mean, their 95% interval (Student t), the
paired t test's p and Holm's correction over every setting of the table, and a simultaneous
interval (Bonferroni: confidence 1 - 0.05/m over the m settings). A cost is resolved when its
Holm-adjusted p is below 0.05 (the rule of bench/summarize.py's verdicts). A config's tolerance is
the largest Bernoulli rate (both passes) at or below which no rate has a resolved cost. That is
"no cost resolved at this many seeds", not "no cost": the simultaneous interval's upper end bounds
the cost the data allow. (Holm is step-down and so at least as strict as Bonferroni's intervals
only for the smallest p: a cost can be resolved while its simultaneous interval still touches 0.)
The same rule with each setting's own 95% interval (no correction) is shown beside it. A setting that drops nothing (the `zero`
Gilbert-Elliott preset, or any lossy run whose packet counters saw no loss) is a control, not a
hypothesis: it must pair to exactly 0 (the lossy code path itself changes no number), it stays
out of the Holm family, and a control that does not pair to 0 makes the tool exit 1.

--plan adds, for every unresolved cost and contrast, the seeds a follow-up would need to resolve
one as large as the observed mean with 80% power, given the observed seed-to-seed std (bench/power.py):
as a single pre-registered hypothesis, and in a family as large as this one. A planning aid for
the next study; it says nothing about this one's unresolved costs. An observed mean is a noisy
guess of the true cost (and the largest of many, selected for being large, an inflated one): where
a smallest cost worth detecting is known, plan for it with bench/power.py --effect.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import csv
import json
import os
import sys

from bench.stats import ALPHA, CONFIDENCE, holm, interval_at, paired_stats, seeds_needed


def fail(message):
    sys.exit(f"error: {message}")


def read_rows(path):
    if not os.path.isfile(path):
        fail(f"{path} does not exist (write it with bench/summarize.py ... --out DIR)")
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == "run" and r["status"] == "done"]
    if not rows:
        fail(f"{path} has no finished run rows")
    return rows


def link_name(row):
    """A lossy setting's short name: bern0.01, bern0.03-fwd, ge-bursty (lossless: '')."""
    if row["loss_model"] == "none":
        return ""
    direction = {("True", "True"): "", ("True", "False"): "-fwd", ("False", "True"): "-bwd"}[
        row["loss_fwd"], row["loss_bwd"]]
    if row["loss_model"] == "bernoulli":
        return f"bern{float(row['loss_rate']):g}{direction}"
    return f"ge-{row['ge_preset'] or 'custom'}{direction}"


def drops_nothing(row):
    """A lossy run that lost no packet: the `zero` preset, or a run whose own counters saw no loss."""
    observed = row.get("observed_loss_rate", "")
    return row["ge_preset"] == "zero" or (observed not in ("", "nan") and float(observed) == 0.0)


def paired_costs(rows, controls=False):
    """{(config, link, rate, both passes, bernoulli): {(seed, iters): lossy minus lossless final val loss}}: each
    lossy run paired with the lossless run of the same config, seed and length. controls=True: only the runs that
    dropped nothing; False: only the others."""
    lossless, costs = {}, {}
    for r in rows:  # a config's one lossless twin per seed and length; two would pair by chance: said, not picked
        key = (r["config"], r["seed"], r["iters"])
        if r["loss_model"] == "none" and lossless.setdefault(key, float(r["final_val_loss"])) != float(r["final_val_loss"]):
            fail(f"{os.path.basename(r['config'])} seed {r['seed']}: two lossless runs (settings differ beyond the link): "
                 "summarize each setting's runs apart, so each lossy run has one twin")
    for r in rows:
        key = (r["config"], r["seed"], r["iters"])
        if r["loss_model"] != "none" and drops_nothing(r) == controls and key in lossless:
            link = (r["config"], link_name(r), float(r["loss_rate"]), r["loss_fwd"] == r["loss_bwd"] == "True",
                    r["loss_model"] == "bernoulli")
            if key[1:] in costs.setdefault(link, {}):
                fail(f"{os.path.basename(r['config'])} {link[1]} seed {r['seed']}: two lossy runs of one link "
                     "(settings differ beyond the link): summarize each setting's runs apart")
            costs[link][key[1:]] = float(r["final_val_loss"]) - lossless[key]
    return costs


def controls_table(rows):
    """[(config, link, paired differences)] for the lossy runs that dropped nothing: each must be exactly 0."""
    return sorted((config, name, list(d.values())) for (config, name, *_), d in paired_costs(rows, controls=True).items())


def tolerance_table(rows):
    """[(config, link, stats, rate, both passes, bernoulli)] of the paired costs; the controls (lossy runs that
    dropped nothing) are left to controls_table. Holm and the simultaneous interval over every setting."""
    table = [(config, name, paired_stats(list(d.values())), rate, both, bern)
             for (config, name, rate, both, bern), d in paired_costs(rows).items()]
    table.sort(key=lambda t: (t[0], not t[5], t[3], t[1]))
    tested = [k for k, t in enumerate(table) if t[2]["p"] is not None]
    adjusted = holm([table[k][2]["p"] for k in tested])
    m = max(1, len(tested))
    for k, p_holm in zip(tested, adjusted):
        stats = table[k][2]
        simultaneous = interval_at(stats, 1.0 - (1.0 - CONFIDENCE) / m)
        stats.update(p_holm=p_holm, sim_low=simultaneous[0], sim_high=simultaneous[1])
    return table


def contrasts(costs, reference):
    """[(question, contrast, stats)]: one paired cost minus another, seed by seed over the seeds both have, Holm
    over the list (a family of its own, apart from the costs). Three questions the sweep's design answers:
    what loss on the backward pass adds (both passes minus forward only, same rate); what burstiness adds
    (Gilbert-Elliott minus Bernoulli at the same rate within 5%, both passes); and whether another sync pattern
    pays more or less for the same link than the reference config (its cost minus the reference's)."""
    out = []

    def add(question, label, a, b):
        seeds = sorted(a.keys() & b.keys())
        if len(seeds) >= 2:
            out.append([question, label, paired_stats([a[s] - b[s] for s in seeds])])
    for (config, name, rate, both, bern), cost in costs.items():
        short = os.path.basename(config)
        if bern and both and (config, f"{name}-fwd", rate, False, True) in costs:
            add("backward-pass loss", f"{short}: {name} - {name}-fwd", cost, costs[config, f"{name}-fwd", rate, False, True])
        if not bern and both:
            for (c, other, r, b, is_bern), bern_cost in costs.items():
                if c == config and is_bern and b and abs(r - rate) <= 0.05 * rate:
                    add("burstiness", f"{short}: {name} - {other}", cost, bern_cost)
        if config != reference and (reference, name, rate, both, bern) in costs:
            add("vs the reference config", f"{short} - {os.path.basename(reference)}: {name}", cost, costs[reference, name, rate, both, bern])
    adjusted = holm([c[2]["p"] for c in out])
    for c, p_holm in zip(out, adjusted):
        c[2]["p_holm"] = p_holm
    return sorted(out, key=lambda c: (c[0], c[1]))


def resolved(stats, corrected=True):
    """Whether a paired cost is resolved from 0: Holm-adjusted p < 0.05, or (uncorrected) its own 95% interval
    excludes 0. None where it cannot be told (fewer than 2 seeds)."""
    if stats.get("p_holm") is None:
        return None
    return stats["p_holm"] < ALPHA if corrected else not stats["ci_low"] <= 0.0 <= stats["ci_high"]


def tolerances(table, corrected=True):
    """config -> (largest tolerated Bernoulli rate or None, its stats): no rate up to it has a resolved cost."""
    out = {}
    for config in dict.fromkeys(t[0] for t in table):
        tolerated = None
        rungs = sorted((t for t in table if t[0] == config and t[4] and t[5]), key=lambda t: t[3])  # by rate
        for _, _, stats, rate, both, bern in rungs:
            if resolved(stats, corrected) is not False:
                break
            tolerated = (rate, stats)
        out[config] = tolerated
    return out


def read_floor(path):
    """The noise floor's half-width: the largest |same-seed dense - 24comm difference| in noise_floor.json."""
    try:
        with open(path) as f:
            entries = json.load(f)
        return max(entry["max_abs"] for entry in entries)
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"--noise_floor {path}: not a noise_floor.json from bench/summarize.py ({type(e).__name__}: {e})")


def inside_floor(stats, floor):
    """The table's last cell: whether the cost's 95% interval lies inside +-floor ('' without a floor)."""
    if floor is None:
        return ""
    if stats["ci_low"] is None:
        return " |"
    return " yes |" if max(abs(stats["ci_low"]), abs(stats["ci_high"])) <= floor else " no |"


def fmt(x, spec="+.4f"):
    return "" if x is None else format(x, spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("summary", help="experiment_summary.csv from bench/summarize.py")
    parser.add_argument("--plot", default="", help="write the paired cost vs loss rate plot here (.png)")
    parser.add_argument("--noise_floor", default="", help="noise_floor.json from bench/summarize.py (e.g. "
                        "bench/studies/sync_count/noise_floor.json): say which costs' 95%% intervals lie inside it")
    parser.add_argument("--reference", default="", help="config the others' costs are compared with "
                        "(default: the one with the most sync points), e.g. config/train_shakespeare_char_24comm.py")
    parser.add_argument("--plan", action="store_true", help="also print the seeds a follow-up needs to resolve each "
                        "unresolved cost or contrast as large as observed, with 80%% power (bench/power.py)")
    parser.add_argument("--json", default="", help="also write the costs and contrasts here (bench/render.py reads them)")
    args = parser.parse_args()
    rows = read_rows(args.summary)
    syncs = {r["config"]: int(r["sync_points"]) for r in rows}
    reference = args.reference or max(syncs, key=syncs.get)
    if reference not in syncs:
        fail(f"--reference {reference!r} is not a config of {args.summary}; there: {', '.join(sorted(syncs))}")
    floor = read_floor(args.noise_floor) if args.noise_floor else None
    table, controls = tolerance_table(rows), controls_table(rows)
    if not table:
        fail(f"{args.summary}: no lossy run has a lossless run of the same config and seed to pair with")
    print(f"paired final val loss, lossy minus lossless (same config and seed); {CONFIDENCE:.0%} interval, "
          f"Holm over {sum('p_holm' in t[2] for t in table)} settings, simultaneous (Bonferroni) interval\n")
    if floor is not None:
        print(f"noise floor: same-seed dense vs 24comm differences reach +-{floor:.4f} ({args.noise_floor}); a cost whose "
              "95% CI lies inside it is 'inside the floor' (bench/summarize.py's rule)\n")
    print("| config | link | n | mean | 95% CI | p (Holm) | simultaneous CI | resolved (Holm p < 0.05) |"
          + (" 95% CI inside the noise floor |" if floor is not None else ""))
    print("| --- | --- | ---: | ---: | --- | ---: | --- | --- |" + (" --- |" if floor is not None else ""))
    for config, name, s, *_ in table:
        ci = f"[{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]" if s["ci_low"] is not None else ""
        sim = f"[{fmt(s.get('sim_low'))}, {fmt(s.get('sim_high'))}]" if "sim_low" in s else ""
        verdict = {None: "", True: "yes", False: "no"}[resolved(s)]
        print(f"| {os.path.basename(config)} | {name} | {s['n']} | {fmt(s['mean'])} | {ci} | "
              f"{fmt(s.get('p_holm'), '.3g')} | {sim} | {verdict} |" + inside_floor(s, floor))
    # the tolerance is the corrected one (no Holm-resolved cost up to the rate); the per-comparison
    # column is the same rule at 95% per setting, shown so a reader sees how much the correction decides
    print("\n| config | largest Bernoulli rate with no resolved cost (Holm) | its paired mean | its simultaneous CI "
          "| same, uncorrected 95% | its 95% CI |")
    print("| --- | ---: | ---: | --- | ---: | --- |")
    uncorrected = tolerances(table, corrected=False)
    none = "none (the smallest rate's cost is resolved, or n < 2)"
    for config, tolerated in tolerances(table).items():
        # a walk that reaches the largest rate tested found no resolved cost at all: the tolerance is
        # then "at least" that rate, which the table must not print as if it were a measured edge
        top = max(t[3] for t in table if t[0] == config and t[4] and t[5])

        def at_least(rate):
            return f">= {rate:.2%} (none resolved)" if rate == top else f"{rate:.2%}"
        corrected = f"{none} | | " if tolerated is None else \
            f"{at_least(tolerated[0])} | {fmt(tolerated[1]['mean'])} | [{fmt(tolerated[1]['sim_low'])}, {fmt(tolerated[1]['sim_high'])}]"
        loose = uncorrected[config]
        per_comparison = f"{none} | " if loose is None else \
            f"{at_least(loose[0])} | [{fmt(loose[1]['ci_low'])}, {fmt(loose[1]['ci_high'])}]"
        print(f"| {os.path.basename(config)} | {corrected} | {per_comparison} |")
    found = contrasts(paired_costs(rows), reference)
    if found:
        print(f"\nContrasts, seed by seed (one paired cost minus another; Holm over these {len(found)}, a family of its own):\n")
        print("| question | contrast | n | mean | 95% CI | p (Holm) |")
        print("| --- | --- | ---: | ---: | --- | ---: |")
        for question, label, s in found:
            print(f"| {question} | {label} | {s['n']} | {fmt(s['mean'])} | [{fmt(s['ci_low'])}, {fmt(s['ci_high'])}] | "
                  f"{fmt(s['p_holm'], '.3g')} |")
    if args.plan:
        print_plan(table, found)
    if args.json:  # costs by '<config stem>/<link>' (train_ dropped), contrasts by their label
        stem = lambda c: os.path.splitext(os.path.basename(c))[0].removeprefix("train_")  # noqa: E731
        with open(args.json, "w") as f:
            json.dump(dict(costs={f"{stem(c)}/{name}": dict(s, rate=rate, both_passes=both, bernoulli=bern)
                                  for c, name, s, rate, both, bern in table},
                           contrasts={label: dict(s, question=q) for q, label, s in found}), f, indent=1)
    failed = []
    if controls:
        print("\n| config | control (drops nothing) | pairs | exactly 0 | largest difference |")
        print("| --- | --- | ---: | --- | ---: |")
        for config, name, d in controls:
            exact = all(x == 0.0 for x in d)
            failed += [] if exact else [f"{os.path.basename(config)} {name}"]
            print(f"| {os.path.basename(config)} | {name} | {len(d)} | {'yes' if exact else 'NO'} | "
                  f"{max(d, key=abs):+.3g} |")
    if args.plot:
        plot(table, args.plot)
    if failed:
        fail(f"control(s) {', '.join(failed)} dropped no packet yet differ from their lossless twins: the lossy code "
             "path changed a number (or the pair ran on different machines; see bench/RESULTS.md)")


def print_plan(table, found, power=0.8):
    """Seeds to resolve each unresolved cost and contrast if its true size were the observed mean (planning)."""
    unresolved = [(f"{os.path.basename(c)}: {name}", s, len(table)) for c, name, s, *_ in table if resolved(s) is False]
    unresolved += [(label, s, len(found)) for _, label, s in found if resolved(s) is False]
    if not unresolved:
        return
    print(f"\nPlanning a follow-up (not a result): the seeds at which a paired t test resolves a cost as large as "
          f"the observed mean, with the observed std, with probability {power:g} (bench/power.py)\n")
    print("| cost or contrast | observed mean | observed std | seeds, one hypothesis | seeds, in a family this size |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, s, family in unresolved:
        alone, in_family = (seeds_needed(s["mean"], s["std"], m, power) for m in (1, family))
        print(f"| {label} | {fmt(s['mean'])} | {fmt(s['std'], '.4f')} | {alone or '> 10,000'} | "
              f"{in_family or '> 10,000'} (of {family}) |")


def plot(table, path):
    """Paired cost vs loss rate: Bernoulli on both passes as a line per config; forward-only loss
    (triangle, at its forward rate) and Gilbert-Elliott (square, at its stationary rate) as single
    points in the config's colour. Configs are nudged apart along x so their error bars do not overlap."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    configs = list(dict.fromkeys(t[0] for t in table))
    for k, config in enumerate(configs):
        nudge = 1.0 + 0.06 * (k - (len(configs) - 1) / 2)
        label = os.path.basename(config).removeprefix("train_").removesuffix(".py")
        color = f"C{k}"
        for marker, shift, keep, suffix in (("o-", 1.0, lambda both, bern: both and bern, ""),
                                            ("^", 1.04, lambda both, bern: bern and not both, ", one pass"),
                                            ("s", 0.96, lambda both, bern: not bern, ", Gilbert-Elliott")):
            points = [(rate, s) for c, _, s, rate, both, bern in table
                      if c == config and keep(both, bern) and s["ci_low"] is not None]
            if points:
                ax.errorbar([r * 100 * nudge * shift for r, _ in points], [s["mean"] for _, s in points],
                            yerr=[[s["mean"] - s["ci_low"] for _, s in points], [s["ci_high"] - s["mean"] for _, s in points]],
                            fmt=marker, color=color, capsize=4, label=label + suffix)
    ax.axhline(0.0, color="gray", lw=0.8)
    rates = sorted({t[3] * 100 for t in table if t[5] and t[3] > 0})  # the Bernoulli rates
    ax.set_xscale("log")
    ax.set_xticks(rates, [f"{r:g}" for r in rates])
    ax.minorticks_off()
    ax.set(xlabel="packet loss rate (%): Bernoulli rate, or Gilbert-Elliott's stationary rate",
           ylabel="paired final val loss cost (nats)", title="Cost of packet loss, paired over seeds (95% CI)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
