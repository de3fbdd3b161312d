"""The sequence-parallel loss study (bench/studies/sp_loss): its control (lossless SP logs every loss of the
all-reduce run), its observed loss rates per half, its report rendered from the analysis outputs (and withdrawn
where a defect made it so), and its committed families recomputed from the run logs with a plain loop."""

import json
import os
import subprocess
import sys

import pytest


def test_the_sp_studys_control_compares_every_logged_loss(tmp_path):
    """bench/studies/sp_loss/control.py: identical only when every train and val loss is the same bits."""
    records = [{"iter": 0, "val_loss": 4.25}, {"iter": 0, "train_loss": 4.5}, {"iter": 1, "train_loss": 4.0}]
    for config in ("24comm", "12comm"):
        for setting, shift in (("lossless", 0.0), ("lossless_sp", 1e-9 if config == "12comm" else 0.0)):
            run = tmp_path / f"shakespeare_char_{config}-{setting}-s400"
            run.mkdir()
            lines = [json.dumps({**r, **{k: v + shift for k, v in r.items() if k.endswith("loss") and r["iter"] == 1}})
                     for r in records]
            (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "control.json"
    result = subprocess.run([sys.executable, "-m", "bench.studies.sp_loss.control", str(tmp_path), "--out", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    control = json.loads(out.read_text())
    assert control["24comm"]["identical"] and control["24comm"]["records"] == 3
    assert not control["12comm"]["identical"] and 0 < control["12comm"]["max_abs_diff"] < 1e-8


def test_the_sp_studys_observed_rates_per_half(tmp_path):
    """bench/studies/sp_loss/halves.py: each half's packets lost / sent over both passes, per run, and pooled."""
    from bench.harness import run_tool

    def stats(points):  # {point: (lost, sent)} -> link_stats.json, both passes the same
        row = lambda lost, sent: {"packets_lost": lost, "packets_sent": sent}
        return {"points": {p: {"fwd": row(*c), "bwd": row(*c)} for p, c in points.items()}}
    for config in ("24comm", "12comm"):
        for seed, k in ((400, 1), (401, 3)):
            for setting, points in (("b1", {"h0.mlp": (k, 100)}),
                                    ("b1_sp", {"h0.mlp": (k, 100), "h0.mlp/gather": (2 * k, 100), "exit": (0, 100)})):
                run = tmp_path / f"shakespeare_char_{config}-{setting}-s{seed}"
                run.mkdir()
                (run / "link_stats.json").write_text(json.dumps(stats(points)))
    out = tmp_path / "halves.json"
    result = run_tool("bench.studies.sp_loss.halves", str(tmp_path), "--seeds", "400-401", "--out", str(out))
    assert result.returncode == 0, result.stderr
    found = json.loads(out.read_text())["12comm"]
    assert found["b1"]["all-reduce"] == dict(lowest=0.01, highest=0.03, pooled=0.02, seeds=2)
    assert found["b1_sp"]["reduce-scatter"]["pooled"] == pytest.approx((2 + 6) / 800)  # h0.mlp and exit, both passes
    assert found["b1_sp"]["all-gather"] == dict(lowest=0.02, highest=0.06, pooled=0.04, seeds=2)
    missing = run_tool("bench.studies.sp_loss.halves", str(tmp_path), "--seeds", "400-402", "--out", str(out))
    assert missing.returncode == 1 and "s402/link_stats.json: missing" in missing.stderr


def test_the_sp_studys_report_renders_from_the_analysis_outputs(tmp_path):
    """findings.md.j2 says 'in progress' until the plan's analysis writes family_A.json; then the report, its
    answer following each verdict (a resolved cost, or unresolved at this power), from made-up outputs here."""
    import csv
    import glob
    import os
    import shutil
    from bench import render
    study = tmp_path / "sp_loss"
    analysis = ("family_A.json", "family_B.json", "halves.json", "experiment_summary.csv")  # the study before them
    shutil.copytree(os.path.join(render.STUDIES, "sp_loss"), study,
                    ignore=shutil.ignore_patterns("runs", "withdrawn", "withdrawal.json", *analysis))
    (study / "runs").symlink_to(os.path.join(render.STUDIES, "sp_loss", "runs"))  # its seeds
    names = {"A1": ("24comm/b1_sp", "24comm/b1"), "A2": ("12comm/b1_sp", "12comm/b1"), "B1": ("24comm/b1", "24comm/lossless"),
             "B2": ("24comm/b1_sp", "24comm/lossless"), "B3": ("12comm/b1", "12comm/lossless"),
             "B4": ("12comm/b1_sp", "12comm/lossless")}
    record = lambda name, mean, verdict: dict(name=name, a=f"train_shakespeare_char_{names[name][0]}", n=18,
                                              b=f"train_shakespeare_char_{names[name][1]}", seeds=list(range(400, 418)),
                                              mean=mean, ci_low=mean - 0.01, ci_high=mean + 0.01, p=0.001, p_holm=0.002,
                                              verdict=verdict)
    env, data = render.environment(), {"sp_loss": render.Study(str(study))}
    text = env.get_template("bench/studies/sp_loss/findings.md.j2").render(**data)
    assert "In progress" in text and "Family A" not in text
    (study / "family_A.json").write_text(json.dumps([record("A1", 0.03, "resolved: A higher"),
                                                     record("A2", 0.005, "unresolved")]))
    (study / "family_B.json").write_text(json.dumps([record(f"B{i}", 0.02, "resolved: A higher") for i in range(1, 5)]))
    half = dict(lowest=0.0099, highest=0.0101, pooled=0.01, seeds=18)
    (study / "halves.json").write_text(json.dumps({c: {"b1": {"all-reduce": half}, "b1_sp": {"reduce-scatter": half,
                                                   "all-gather": half}} for c in ("24comm", "12comm")}))
    with open(study / "experiment_summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["kind", "run", "config", "setting", "tokens_per_s"])
        writer.writeheader()
        for config in ("24comm", "12comm"):
            for setting in ("lossless", "b1", "b1_sp"):
                writer.writerow(dict(kind="aggregate", run="", config=f"config/train_shakespeare_char_{config}.py",
                                     setting=setting, tokens_per_s=1234.5))
    text = env.get_template("bench/studies/sp_loss/findings.md.j2").render(sp_loss=render.Study(str(study)))
    assert "In progress" not in text
    assert "24comm's lossy cost (A1) is higher under SP than under all-reduce syncs, by +0.0300 [+0.0200, +0.0400] nats" in text
    assert "12comm's (A2; Holm over 2) is unresolved at this power (SP minus all-reduce +0.0050 [-0.0050, +0.0150] nats)" in text
    assert "24comm with all-reduce syncs +0.0200 [+0.0100, +0.0300] nats (resolved: above lossless)" in text
    assert "| A1 | 24comm/b1_sp - 24comm/b1 | 18 | +0.0300 [+0.0200, +0.0400] | 0.001 | 0.002 | resolved: A higher |" in text
    assert "--seeds 400-417" in text and "1.000% (0.990-1.010% over 18 seeds)" in text and "b1_sp 1234" in text
    recorded = {}  # the commit each setting's runs recorded, read here from their run_info.json
    for info in glob.glob(os.path.join(render.STUDIES, "sp_loss", "runs", "*", "run_info.json")):
        setting = os.path.basename(os.path.dirname(info)).split("-")[-2]
        recorded.setdefault(setting, set()).add(json.load(open(info))["git_commit"][:7])
    assert all(f"`{commit}`" in text for commits in recorded.values() for commit in commits) and "Amendment" not in text
    shutil.copy(os.path.join(render.STUDIES, "sp_loss", "withdrawal.json"), study)  # the rerun of amendment 1
    text = env.get_template("bench/studies/sp_loss/findings.md.j2").render(sp_loss=render.Study(str(study)))
    allreduce, rerun = text.split("the lossy SP runs (`b1_sp`) are")
    assert all(f"`{c}`" in allreduce.rsplit("Code:", 1)[1] for c in recorded["lossless"] | recorded["b1"])
    assert all(f"`{c}`" in rerun.split("whose SP code")[0] for c in recorded["b1_sp"]) and "[withdrawn/](withdrawn/)" in rerun
    assert "24comm's lossy cost (A1) is higher under SP" in text and "Withdrawn" not in text
    data = {**render.numbers(), "sp_loss": render.Study(str(study))}  # RESULTS.md's first screen: its row
    row = [line for line in env.get_template("bench/templates/results_answers.md.j2").render(**data).splitlines()
           if line.startswith("| Does a lossy network cost more under sequence parallelism?")]
    assert len(row) == 1 and "24comm costs more under SP, 12comm unresolved (Holm over 2)" in row[0]
    assert "SP minus all-reduce, 24comm +0.0300 [+0.0200, +0.0400] (Holm p 0.002)" in row[0]
    row = [line for line in env.get_template("bench/templates/readme_answers.md.j2").render(**data).splitlines()
           if line.startswith("| Does a lossy network cost more under sequence parallelism?")]  # the README's
    assert len(row) == 1 and "24comm costs more, +0.0300 [+0.0200, +0.0400]; 12comm unresolved" in row[0]


def test_a_withdrawn_sp_study_makes_no_claim_anywhere(tmp_path):
    """sp_loss's plan amendment 1: with withdrawal.json and no new analysis, findings.md, RESULTS' row and
    summary and the README's row say withdrawn and name the fix, count the rerun's b1_sp seeds, and print no
    SP contrast."""
    import glob
    import os
    import shutil
    from bench import render
    study = tmp_path / "sp_loss"
    analysis = ("family_A.json", "family_B.json", "halves.json", "experiment_summary.csv")  # the rerun's, once analysed
    shutil.copytree(os.path.join(render.STUDIES, "sp_loss"), study, ignore=shutil.ignore_patterns("runs", "withdrawn", *analysis))
    (study / "runs").mkdir()
    for run in glob.glob(os.path.join(render.STUDIES, "sp_loss", "runs", "*")):
        if "-b1_sp-" in run:  # the committed all-reduce runs only: the rerun's seeds are this test's own
            continue
        (study / "runs" / os.path.basename(run)).symlink_to(run)
    rerun = study / "runs" / "shakespeare_char_12comm-b1_sp-s403"  # one rerun seed in
    rerun.mkdir()
    (rerun / "metrics.jsonl").write_text(json.dumps({"iter": 1, "loss": 4.0}) + "\n")
    env, data = render.environment(), {**render.numbers(), "sp_loss": render.Study(str(study))}
    assert "withdrawal" in data["sp_loss"] and "family_A" not in data["sp_loss"]
    text = env.get_template("bench/studies/sp_loss/findings.md.j2").render(**data)
    fixed = data["sp_loss"]["withdrawal"]["fixed_in"]
    assert "Withdrawn" in text and f"`{fixed}`" in text and "Family A" not in text and "b1_sp - " not in text
    assert "**Rerun seeds in**: 403 of 400-417" in text
    row = [line for line in env.get_template("bench/templates/results_answers.md.j2").render(**data).splitlines()
           if line.startswith("| Does a lossy network cost more under sequence parallelism?")]
    assert len(row) == 1 and "Withdrawn" in row[0] and f"`{fixed}`" in row[0] and "SP minus all-reduce" not in row[0]
    summary = env.get_template("bench/templates/results_summary.md.j2").render(**data)  # RESULTS' paragraph
    assert "sequence parallelism is\nwithdrawn" in summary and "SP minus all-reduce" not in summary
    row = [line for line in env.get_template("bench/templates/readme_answers.md.j2").render(**data).splitlines()
           if line.startswith("| Does a lossy network cost more under sequence parallelism?")]  # the README's
    assert len(row) == 1 and "Withdrawn" in row[0] and f"`{fixed}`" in row[0] and "SP - all-reduce" not in row[0]


SP_STUDY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "studies", "sp_loss")
SP_FAMILIES = [f for f in ("family_A.json", "family_B.json") if os.path.exists(os.path.join(SP_STUDY, f))]


@pytest.mark.parametrize("family", SP_FAMILIES)
def test_the_committed_sp_families_are_what_the_run_logs_give(family):
    """The SP study's committed families recomputed from its runs' metrics.jsonl with a plain loop (tests/by_hand.py,
    not bench.contrasts): per seed, A's last logged val loss minus B's, over seeds 400-417 with both runs; mean, 95% t
    interval, p and Holm over the family. The run names come from the record's settings, not from the tool's pairing."""
    import by_hand
    runs = os.path.join(SP_STUDY, "runs")
    with open(os.path.join(SP_STUDY, family)) as f:
        records = json.load(f)

    def final(setting, seed):  # train_shakespeare_char_24comm/b1_sp -> runs/shakespeare_char_24comm-b1_sp-s<seed>
        config, name = setting.removeprefix("train_").split("/")
        with open(os.path.join(runs, f"{config}-{name}-s{seed}", "metrics.jsonl")) as f:
            return [json.loads(line) for line in f if '"val_loss"' in line][-1]["val_loss"]

    p_values = []
    for record in records:
        seeds = [s for s in range(400, 418) if all(os.path.isdir(os.path.join(runs, f"{x.removeprefix('train_').replace('/', '-')}-s{s}"))
                                                    for x in (record["a"], record["b"]))]
        mean, low, high, p = by_hand.paired([final(record["a"], s) - final(record["b"], s) for s in seeds])
        assert record["seeds"] == seeds == list(range(400, 418))
        assert (record["mean"], record["ci_low"], record["ci_high"]) == pytest.approx((mean, low, high), abs=1e-9)
        p_values.append(p)
    assert [r["p_holm"] for r in records] == pytest.approx(by_hand.holm(p_values), rel=1e-6)
    assert len(records) == {"family_A.json": 2, "family_B.json": 4}[family]
