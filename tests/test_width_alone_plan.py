"""Every analysis command of the width-alone plan, run exactly as plan.md writes it (its "Analysis" blocks, amendment
1's tuning summary and the H5 variant its prose gives), on fabricated runs of every setting the sweeps plan, built
with the sweeps' own keys (design.py), so no command first fails when the study's seeds are in. The families that
tests/test_width_alone_findings.py does not recompute (S2 with its bench.contrasts cross-check, S2b, S3 with H5,
S4) are checked against a plain loop over the fabricated final losses. The study's real runs are not read."""

import csv
import json
import math
import os
import random
import re
import shlex

import numpy as np
import pytest

from bench.harness import run_tool
from bench.studies.width_alone import design
from conftest import ROOT

STUDY = os.path.join(ROOT, "bench", "studies", "width_alone")
SCALE_RUN = os.path.join(ROOT, "bench", "studies", "scale", "runs", "shakespeare_char_24comm-w64_ref24-s300")
P = "a" * 40
SEEDS = (600, 601, 602)
RATES = {"64": {"ref24": 0.02, "drop1": 0.02, "drop5": 0.02, "half": 0.02, "ladder": 0.01},
         "128": {"ref24": 0.01, "drop1": 0.01, "half": 0.01, "ladder": 0.005}}
GPU_RATES = {str(w): {s: 0.01 * 64 / w * (0.5 if s == "ladder" else 1) for s in design.GPU} for w in design.GPU_WIDTHS}
CPU_CLASS = {"device": "cpu", "host": "x", "cpu_capability": "AVX512", "dtype": "float32", "tf32": False,
             "deterministic": False}
GPU_CLASS = {**CPU_CLASS, "device": "cuda", "host": "NVIDIA H100", "dtype": "bfloat16"}


def plan_commands():
    """The plan's analysis commands as argv lists: every `python -m` line of the Analysis section's code blocks
    (backslash continuations joined), the tuning summary as amendment 1 replaced it, and S3 with H5's additions."""
    text = open(os.path.join(STUDY, "plan.md")).read()
    analysis = text[text.index("## Analysis (fixed now)"):text.index("## What findings.md will report")]
    amendment = text[text.index("## Amendment 1"):]
    lines = [line for block in re.findall(r"```\n(.*?)```", analysis + amendment, re.S)
             for line in block.replace("\\\n", " ").splitlines() if line.startswith("python -m")]
    h5 = " ".join(re.search(r"the same command adds `([^`]+)`", analysis, re.S)[1].split())
    (s3,) = [line for line in lines if "family_horizon.json" in line]
    lines.append(s3 + " " + h5)
    return [shlex.split(line) for line in lines]


def fabricate(folder, tag, seed, keys, loss, numerics):
    """A finished run as bench.sweep leaves it: the scale study's 24comm config under the sweep's keys."""
    d = folder / f"shakespeare_char_24comm-{tag}-s{seed}"
    d.mkdir(parents=True)
    cfg = {**json.load(open(os.path.join(SCALE_RUN, "config.json"))), **keys, "seed": seed, "out_dir": str(d)}
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "metrics.jsonl").write_text(json.dumps({"iter": cfg["max_iters"], "val_loss": loss, "val_perplexity": math.exp(loss),
                                                 "val_accuracy": 0.3, "time_s": 1.0}) + "\n")
    (d / "result.json").write_text(json.dumps({"config": design.CONFIG, "setting": tag, "final": {"val_loss": loss}}))
    (d / "run_info.json").write_text(json.dumps({"git_commit": P, "git_commit_from": "checkout", "git_dirty": False,
                                                 "numerics": numerics}))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Every run the plan's sweeps make (study, second reading, horizon with H5, the GPU ladder, a GPU tuning
    run), with random final losses; {(tag, seed): loss} to check against."""
    root, rng, final = tmp_path_factory.mktemp("width_alone"), random.Random(67), {}
    plans = [(root / "runs", design.common(), design.study_settings([(64, design.CPU[64]), (128, design.CPU[128])], RATES)),
             (root / "runs", design.common(), {**design.at24_settings(64, design.CPU[64], RATES),
                                               **design.at24_settings(128, design.CPU[128], RATES)}),
             (root / "runs", design.common(), {f"w{w}_dense": {"tp_size": 1, **design.shape(w), **design.rate(RATES[str(w)]["ref24"])}
                                               for w in (64, 128)}),  # amendment 2's floor, as sweep_floor.py plans it
             (root / "runs", design.horizon_common(),
              design.study_settings([(64, design.HORIZON + design.HORIZON_LAST)], RATES, suffix="h")),
             (root / "gpu" / "runs", design.common(gpu=True),
              design.study_settings([(w, design.GPU) for w in design.GPU_WIDTHS], GPU_RATES))]
    for folder, common, settings in plans:
        for tag, keys in settings.items():
            for seed in SEEDS:
                key = ("gpu/" if "gpu" in folder.parts else "") + tag  # the GPU ladder's tags are the CPU's too
                final[key, seed] = 1.8 + rng.uniform(-0.05, 0.1)
                fabricate(folder, tag, seed, {**common, **keys}, final[key, seed],
                          GPU_CLASS if "gpu" in folder.parts else CPU_CLASS)
    tuning = design.tuning_sweep(64, ("ref24",), (500,), {}, gpu=True)
    for tag, keys in tuning["settings"].items():
        fabricate(root / "gpu" / "tuning" / "runs", tag, 500, {**tuning["common"], **keys}, 2.0, GPU_CLASS)
    tuning = design.tuning_sweep(128, ("ref24", "drop1"), (500, 501), {})  # seed 501's drop1 on another host, as
    for tag, keys in tuning["settings"].items():  # the real tuning at 128 ran (amendment 1)
        for seed in (500, 501):
            other = seed == 501 and "drop1" in tag
            fabricate(root / "tuning" / "runs", tag, seed, {**tuning["common"], **keys}, 2.0,
                      {**CPU_CLASS, "host": "y"} if other else CPU_CLASS)
    return root, final


def mean_over_seeds(f):
    return sum(f(s) for s in SEEDS) / len(SEEDS)


@pytest.mark.slow
def test_every_analysis_command_of_the_plan_runs_as_written_and_gives_what_a_plain_loop_gives(study):
    root, final = study
    commands, family_json = plan_commands(), {}
    # the rates (2) and the tuning's summary, the study's summary, the families S1, S2 (and its check), S2b, S3,
    # S4 and the GPU summaries (2), amendment 1's tuning summary, amendment 2's floor, S3 with H5
    assert len(commands) == 15
    for argv in commands:
        assert argv[:2] == ["python", "-m"], argv
        if argv[2] == "bench.studies.width_alone.rates" or (argv[2] == "bench.summarize" and "tuning/runs" in argv[3]
                                                             and "--describe" not in argv and "gpu" not in argv[3]):
            continue  # the rates tool writes the study's state (tests/test_width_alone.py runs it); the summary
            # amendment 1 replaced refuses the tuning's runs of two classes (tests/test_contrasts.py)
        args = [a.replace("<P>", P).replace("bench/studies/width_alone/", f"{root}/") for a in argv[3:]]
        if "<A>" in args:  # S2's cross-check: each A is the run family_at24.json's contrast picked
            picked = {c["name"]: c["a"] for c in family_json["family_at24.json"]}
            args = [picked[args[i - 1]] if a == "<A>" else a for i, a in enumerate(args)]
        result = run_tool(argv[2], *args)
        assert result.returncode == 0, (argv, result.stderr[-2000:])
        if "--json" in args:
            path = args[args.index("--json") + 1]
            family_json[os.path.basename(path) + ("+h5" if "h_drop5" in args else "")] = json.load(open(path))

    cost = lambda a, b: lambda s: final[a, s] - final[b, s]  # noqa: E731
    # S1 and S3 as written are recomputed by a plain loop in tests/test_width_alone_findings.py; here, the rest
    at24 = {c["name"]: c for c in family_json["family_at24.json"]}
    assert at24["a64_ladder"]["a"].endswith("w64_ladder_at24") and at24["a64_drop1"]["a"].endswith("w64_drop1")
    assert at24["a128_ladder"]["mean"] == pytest.approx(mean_over_seeds(cost("w128_ladder_at24", "w128_ref24")), abs=1e-12)
    cross = {c["name"]: c["mean"] for c in family_json["contrasts_at24.json"]}
    assert cross == pytest.approx({name: c["mean"] for name, c in at24.items()}, abs=1e-12)

    mistuned = {c["name"]: c for c in family_json["family_mistuned.json"]}
    assert mistuned["m64_drop1"]["mean"] == 0 and mistuned["m128_half"]["mean"] == 0  # one run with itself
    assert mistuned["m64_ladder"]["mean"] == pytest.approx(mean_over_seeds(cost("w64_ladder_at24", "w64_ladder")), abs=1e-12)

    with_h5 = {c["name"]: c for c in family_json["family_horizon.json+h5"]}
    assert len(with_h5) == 8 and all(c["n"] == len(SEEDS) for c in with_h5.values())
    assert with_h5["h_drop5"]["mean"] == pytest.approx(mean_over_seeds(cost("w64h_drop5", "w64h_ref24")), abs=1e-12)
    change = lambda seed: cost("w64h_drop5", "w64h_ref24")(seed) - cost("w64_drop5", "w64_ref24")(seed)  # noqa: E731
    assert with_h5["hd_drop5"]["mean"] == pytest.approx(mean_over_seeds(change), abs=1e-12)

    floor = {c["name"]: c for c in family_json["family_floor.json"]}
    assert floor["f128"]["mean"] == pytest.approx(mean_over_seeds(cost("w128_dense", "w128_ref24")), abs=1e-12)
    fd = lambda seed: cost("w128_dense", "w128_ref24")(seed) - cost("w64_dense", "w64_ref24")(seed)  # noqa: E731
    assert floor["fd"]["mean"] == pytest.approx(mean_over_seeds(fd), abs=1e-12)

    gpu = {c["name"]: c for c in family_json["family_gpu.json"]}
    assert len(gpu) == 15
    x = np.log2(design.GPU_WIDTHS)
    slopes = [np.polyfit(x, [cost(f"gpu/w{w}_half", f"gpu/w{w}_ref24")(s) for w in design.GPU_WIDTHS], 1)[0]
              for s in SEEDS]
    assert gpu["gt_half"]["mean"] == pytest.approx(float(np.mean(slopes)), abs=1e-12)

    # the study's summary pairs only runs of one rate: 1comm with 24comm at n_embd 64, not ladder at its own rate
    with open(root / "study" / "experiment_summary.csv") as f:
        means = {r["setting"]: r for r in csv.DictReader(f) if r["kind"] == "aggregate"}
    assert means["w64_drop1"]["paired_reference"].endswith("w64_ref24") and means["w64_ladder"]["paired_reference"] == ""
