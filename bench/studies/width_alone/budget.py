"""The width-alone study's CPU budget, projected from the per-run times its own committed runs measured (plan.md
"Budget (CPU)": before each arm starts, the remaining arms are projected from the per-run times measured so far in
this study; if they do not fit the sessions left, arms are cut in the plan's order).

    python -m bench.studies.width_alone.budget                 # for this host's numerics class
    python -m bench.studies.width_alone.budget --class "cpu Intel(R) Xeon(R) Processor @ 2.50GHz AVX512, float32"

A run's time is its wall time to its last eval (result.json's final time_s), the median per width over the class's
committed 600-iteration runs (tuning and study) that were not resumed. A width the class has not run yet is scaled from the width it has
by the plan's measured ratio (n_embd 128 / 64 on AMD EPYC: 784 / 309 s); a horizon run is 4x the class's 600-iteration
time at 64 until horizon runs of the class are in. A session is 2.5 usable hours at two slots: 5 CPU-hours.
The projection prices every run left at this class's times; a last line says which of them a host of this class may
take at all: a seed's horizon, floor and second-reading runs run only in its study runs' class (plan.md), and the
next line the sweep command a host of this class runs next (the first arm in the table's order with runs left).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import glob
import json
import os
import re
import statistics
import sys

from bench.studies.width_alone import design

STUDY = os.path.dirname(os.path.abspath(__file__))
SESSION_CPU_HOURS = 5.0   # plan.md: 2 slots x 2.5 usable hours
ALLOTMENT = 20            # CPU sessions the plan was given
RATIO_128_64 = 784 / 309  # plan.md: n_embd 128 over 64, AMD EPYC, two runs at a time, one thread each
# (arm, width, iterations factor, runs the plan counts) in the plan's table order (amendment 2 put the noise floor,
# F64 and F128, after the horizon); the study arms' seeds are 14
ARMS = (("T64", 64, 1, 69), ("T128", 128, 1, 57), ("S64", 64, 1, 70), ("S128", 128, 1, 56), ("H", 64, 4, 32),
        ("F64", 64, 1, 14), ("F128", 128, 1, 14), ("H5", 64, 4, 8), ("A64", 64, 1, 56), ("A128", 128, 1, 42))
CUT_ORDER = ("A128", "A64", "H5", "F", "H", "seeds 612-613")  # plan.md: first first; nothing else is cut
CUT_UNITS = {"F": ("F64", "F128")}  # one sweep runs a seed's floor at both widths, and fd needs both: cut together
PER_SEED = {"S64": len(design.CPU[64]), "S128": len(design.CPU[128]), "F64": 1, "F128": 1}  # runs a seed has in an arm
# each arm after the study: its sweep file (amendment 2's floor is run by its path in the main checkout)
SWEEPS = {"H": "sweep_horizon_w64.py", "F64": "sweep_floor.py", "F128": "sweep_floor.py",
          "H5": "sweep_horizon_w64_drop5.py", "A64": "sweep_at24_w64.py", "A128": "sweep_at24_w128.py"}
WORKTREE = "/work/wt-width-alone"  # plan.md "Provenance"
RUN = re.compile(r"shakespeare_char_24comm-w(\d+)(h?)_([a-z0-9]+?)(_at24|_lr[0-9.e-]+)?-s(\d+)")


def arm_of(name, tuning):
    """The plan's arm of a committed run folder's name, or None."""
    m = RUN.fullmatch(name)
    if not m:
        return None
    width, horizon, setting, suffix = int(m[1]), m[2], m[3], m[4] or ""
    if tuning:
        return f"T{width}"
    if horizon:
        return "H5" if setting == "drop5" else "H"
    if setting == "dense":
        return f"F{width}"
    return f"{'A' if suffix == '_at24' else 'S'}{width}"


def committed_runs(study):
    """[(arm, width, class label, time_s, seed, resumed)] of every finished committed run (result.json)."""
    from bench.summary import class_label
    out = []
    for tuning, folder in ((True, "tuning/runs"), (False, "runs")):
        for result in sorted(glob.glob(os.path.join(study, folder, "*", "result.json"))):
            run = os.path.dirname(result)
            match, arm = RUN.fullmatch(os.path.basename(run)), arm_of(os.path.basename(run), tuning)
            info_path = os.path.join(run, "run_info.json")
            if arm:
                info = json.load(open(info_path)) if os.path.exists(info_path) else {}
                out.append((arm, int(match[1]), class_label(info), json.load(open(result))["final"]["time_s"],
                            int(match[5]), bool(info.get("earlier_parts"))))
    return out


def seconds_per_run(runs, label):
    """{(width, factor): seconds a run} for the class: measured medians over its runs that were not resumed (a
    resumed run's clock restarted), scaled where the class has not run a width; and how many runs each is from."""
    measured = {}
    for arm, width, run_label, seconds, _, resumed in runs:
        if run_label == label and not resumed:
            measured.setdefault((width, 4 if arm in ("H", "H5") else 1), []).append(seconds)
    s = {key: statistics.median(v) for key, v in measured.items()}
    if (64, 1) not in s and (128, 1) in s:
        s[64, 1] = s[128, 1] / RATIO_128_64
    if (128, 1) not in s and (64, 1) in s:
        s[128, 1] = s[64, 1] * RATIO_128_64
    if (64, 4) not in s and (64, 1) in s:
        s[64, 4] = 4 * s[64, 1]
    return s, {key: len(v) for key, v in measured.items()}


def planned_runs(arm, width, planned, rates):
    """The runs an arm has in all: the plan's count, or, for the second reading once the width's rates are chosen,
    14 seeds times the settings whose own rate is not 24comm's (the others' study runs are that reading)."""
    at = rates.get(str(width))
    if arm.startswith("A") and at:
        return len(design.STUDY_SEEDS) * sum(s != "ref24" and lr != at["ref24"] for s, lr in at.items())
    return planned


def runnable_here(runs, label, rates):
    """What a host of this class may run of the arms after the study. A seed's H, F, H5, A64 and A128 runs run in its
    study runs' class (plan.md "Numerics classes and the host rule"), and the horizon's 8 seeds are the first 8 a
    host of their class reaches: (this class's whole study seeds, {arm: (seeds, runs left for them)})."""
    labels, done = {}, {}
    for arm, _, run_label, _, seed, _ in runs:
        done[arm, seed] = done.get((arm, seed), 0) + 1
        if arm in ("S64", "S128"):
            labels.setdefault(seed, set()).add(run_label)
    nine = lambda s: done.get(("S64", s)) == len(design.CPU[64]) and done.get(("S128", s)) == len(design.CPU[128])  # noqa: E731
    whole = sorted(s for s, found in labels.items() if found == {label} and nine(s))
    taken = {seed for arm, seed in done if arm == "H"}  # a horizon seed is committed whole
    horizon = sorted(taken & set(whole)) + [s for s in whole if s not in taken][:max(design.HORIZON_N - len(taken), 0)]
    per_seed = {"H": len(design.HORIZON), "F64": PER_SEED["F64"], "F128": PER_SEED["F128"], "H5": len(design.HORIZON_LAST)}
    for arm, width in (("A64", 64), ("A128", 128)):
        per_seed[arm] = planned_runs(arm, width, None, rates) // len(design.STUDY_SEEDS) if rates.get(str(width)) else None
    out = {}
    for arm, n in per_seed.items():
        seeds = [s for s in (horizon if arm in ("H", "H5") else whole) if n is None or done.get((arm, s), 0) < n]
        out[arm] = (seeds, None if n is None else sum(n - done.get((arm, s), 0) for s in seeds))
    return whole, out


ISA_CEILINGS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")  # plan.md amendment 3


def next_sweep(here, study=STUDY, environ=os.environ):
    """The command a host of this class runs next: the first arm, in the table's order, with runs left for its
    seeds (runnable_here's), or None. Under ISA ceilings (amendment 3) the command carries them: the class this
    host reports is theirs."""
    from bench.render import seeds as seed_ranges
    ceilings = "".join(f"{k}={environ[k]} " for k in ISA_CEILINGS if environ.get(k))
    for arm, *_ in ARMS:
        seeds, left = here.get(arm, ([], 0))
        if seeds and left:
            name = SWEEPS[arm]
            path = os.path.join(study, name) if name == "sweep_floor.py" else f"bench/studies/width_alone/{name}"
            return (f"cd {WORKTREE} && {ceilings}WIDTH_ALONE_STATE={study} python -m bench.sweep {path} --slots 2 --threads 1 "
                    f"--no_summary --seeds {seed_ranges(seeds).replace(' ', '')}")
    return None


def project(runs, label, rates, sessions_used):
    """The plan's table for the remaining runs, and the cuts it needs: (rows, cuts, fits, sessions needed after the
    cuts, sessions left). rates: chosen_rates.json ({width: {setting: rate} or null})."""
    per_run, _ = seconds_per_run(runs, label)
    done, late = {}, {}  # late: the runs of seeds 612-613 done per study arm
    for arm, _, _, _, seed, _ in runs:
        done[arm] = done.get(arm, 0) + 1
        late[arm] = late.get(arm, 0) + (seed in (612, 613))
    rows = []
    for arm, width, factor, planned in ARMS:
        total = planned_runs(arm, width, planned, rates)
        left = 0 if arm.startswith("T") and rates.get(str(width)) else max(total - done.get(arm, 0), 0)
        seconds = per_run.get((width, factor))
        rows.append(dict(arm=arm, done=done.get(arm, 0), left=left, s=seconds,
                         cpu_h=None if seconds is None else left * seconds / 3600))
    left_sessions = ALLOTMENT - sessions_used
    need = lambda rs: sum(r["cpu_h"] or 0 for r in rs) / SESSION_CPU_HOURS  # noqa: E731
    kept, cuts = list(rows), []
    for cut in CUT_ORDER:
        if need(kept) <= left_sessions:
            break
        if cut == "seeds 612-613":  # seeds are whole: their runs not yet done leave the study arms
            kept = [dict(r, cpu_h=max(r["left"] - (2 * PER_SEED[r["arm"]] - late.get(r["arm"], 0)), 0) * r["s"] / 3600)
                    if r["arm"] in PER_SEED and r["s"] else r for r in kept]
        else:
            kept = [r for r in kept if r["arm"] not in CUT_UNITS.get(cut, (cut,))]
        cuts.append(cut)
    return rows, cuts, need(kept) <= left_sessions, need(kept), left_sessions


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--study", default=STUDY, help="the study folder (its runs/, tuning/runs/, sessions.md)")
    parser.add_argument("--class", dest="label", default="", help="a numerics class (bench.summary.class_label); "
                        "default: this host's, float32")
    args = parser.parse_args()
    if not args.label:
        from provenance import numerics_class
        from bench.summary import class_label
        args.label = class_label({"numerics": numerics_class("cpu", "float32")})
    runs = committed_runs(args.study)
    per_run, counts = seconds_per_run(runs, args.label)
    if not per_run:
        sys.exit(f"error: no committed run of class {args.label!r} in {args.study}: nothing to project from "
                 f"(classes with runs: {sorted({r[2] for r in runs}) or 'none'})")
    with open(os.path.join(args.study, "chosen_rates.json")) as f:
        rates = json.load(f)
    with open(os.path.join(args.study, "sessions.md")) as f:
        used = sum(bool(re.match(r"- \d{4}-\d\d-\d\d( \([^)|]*\))? \|", line)) for line in f)  # "date (hours) |"
    rows, cuts, fits, need, left = project(runs, args.label, rates, used)
    print(f"# class {args.label}; measured: " + ", ".join(f"n_embd {w} x{k} iterations: {per_run[w, k]:.0f} s over "
                                                          f"{n} runs" for (w, k), n in sorted(counts.items())))
    print("| arm | runs done | runs left | s a run | CPU-hours left | sessions |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        s = "-" if r["s"] is None else f"{r['s']:.0f}"
        h = "-" if r["cpu_h"] is None else f"{r['cpu_h']:.1f}"
        n = "-" if r["cpu_h"] is None else f"{r['cpu_h'] / SESSION_CPU_HOURS:.1f}"
        print(f"| {r['arm']} | {r['done']} | {r['left']} | {s} | {h} | {n} |")
    total = sum(r["cpu_h"] or 0 for r in rows) / SESSION_CPU_HOURS
    print(f"all arms: {total:.1f} sessions; {left} of the plan's {ALLOTMENT} CPU sessions left ({used} used)")
    whole, here = runnable_here(runs, args.label, rates)
    may_take = "; ".join(f"{arm} {'?' if n is None else n} ({', '.join(map(str, seeds)) or 'no seed'})"
                         for arm, (seeds, n) in here.items())
    print(f"# this class's whole study seeds: {', '.join(map(str, whole)) or 'none'}; a seed's H, F, H5, A64 and A128 run "
          f"only in its study runs' class (plan.md), so a host of this class may take: {may_take}")
    idle = "nothing: its seeds' arms are done" if whole else (
        "nothing: no study seed's runs are of this class (plan.md amendment 3: under ISA ceilings a host may join a "
        "seed's class; `ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 python -m "
        "bench.studies.width_alone.budget` says what it could then take, once repro.py shows it reproduces)")
    print(f"next for this class: {next_sweep(here) or idle}")
    ceilings = [k for k in ISA_CEILINGS if os.environ.get(k)]
    if 0 < len(ceilings) < len(ISA_CEILINGS):  # MKL or oneDNN left at the host's own ISA: another arithmetic
        print(f"warning: only {', '.join(ceilings)} of the ISA ceilings set: amendment 3 sets all three "
              f"({', '.join(ISA_CEILINGS)})")
    if not cuts:
        print("fits: nothing is cut")
    else:
        print(f"cut, in the plan's order: {', '.join(cuts)} -> {need:.1f} sessions"
              + ("" if fits else ": still over; nothing else may be cut, so the plan must be amended (plan.md)"))


if __name__ == "__main__":
    main()
