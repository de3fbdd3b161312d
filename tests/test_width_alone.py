"""The width-alone study's tools (bench/studies/width_alone/): the tuning rule and the rates it writes, the sweep
files over the chosen rates, the best-against-best family with its provenance rule, and the GPU call's tree check
and flow (its sweeps faked). Every test takes seconds: no training run."""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

from bench import sweep as sweeps
from bench.studies.width_alone import design, device_ladder, family, rates
from bench.summary import SummaryError, aggregate, read_runs
from conftest import ROOT

STUDY = os.path.join(ROOT, "bench", "studies", "width_alone")
SCALE = os.path.join(ROOT, "bench", "studies", "scale")
RATES = {"64": {"ref24": 0.02, "drop1": 0.02, "drop5": 0.01, "half": 0.02, "ladder": 0.005},
         "128": {"ref24": 0.01, "drop1": 0.01, "half": 0.005, "ladder": 0.0025}}


@pytest.fixture
def state(tmp_path, monkeypatch):
    """A state folder of the study's (chosen_rates.json, tuning/extensions.json) outside git."""
    (tmp_path / "tuning").mkdir()
    (tmp_path / "tuning" / "extensions.json").write_text("{}")
    (tmp_path / "chosen_rates.json").write_text('{"64": null, "128": null}')
    monkeypatch.setattr(design, "STATE", str(tmp_path))
    monkeypatch.setenv("WIDTH_ALONE_UNCOMMITTED", "1")
    return tmp_path


def test_the_rule_chooses_inside_the_grid_ties_to_the_larger_rate_and_extends_at_an_edge():
    base = (0.005, 0.01, 0.02, 0.04)
    assert rates.rule({0.005: 2.0, 0.01: 1.9, 0.02: 1.95, 0.04: 2.5}, base) == ("chosen", 0.01)
    assert rates.rule({0.005: 2.0, 0.01: 1.9, 0.02: 1.904, 0.04: 2.5}, base) == ("chosen", 0.02)  # within 0.005
    assert rates.rule({0.005: 1.8, 0.01: 1.9, 0.02: 2.0, 0.04: 2.5}, base) == ("extend", 0.0025)
    assert rates.rule({0.005: 2.0, 0.01: 1.9, 0.02: 1.8, 0.04: 1.7}, base) == ("extend", 0.08)
    # a diverged rate (+inf) loses; the top of a grid whose next point diverged wins inside
    assert rates.rule({0.005: 2.0, 0.01: 1.9, 0.02: 1.8, 0.04: 1.7, 0.08: math.inf}, base) == ("chosen", 0.04)
    low = {0.000625: 1.5, 0.00125: 1.6, 0.0025: 1.7, **dict.fromkeys(base, 2.0)}
    assert rates.rule(low, base) == ("edge", 0.000625)  # three points past the low end: the winner stands
    assert rates.rule(dict.fromkeys(base, math.inf), base) == ("extend", 0.0025)
    assert rates.rule({0.000625: math.inf, 0.00125: math.inf, 0.0025: math.inf, **dict.fromkeys(base, math.inf)},
                      base) == ("untrainable", None)


def test_every_setting_holds_24comms_chosen_rate_before_its_own_choice_counts():
    finals = {"ref24": {0.005: [2.0] * 3, 0.01: [1.9] * 3, 0.02: [1.8] * 3, 0.04: [1.7] * 3, 0.08: [2.4] * 3},
              "ladder": {0.005: [2.0] * 3, 0.01: [1.8] * 3, 0.02: [1.9] * 3, 0.04: [2.5, 2.6, math.inf]}}
    verdicts, needed = rates.decide(64, finals, ("ref24", "ladder"))
    assert verdicts["ref24"] == ("chosen", 0.04) and verdicts["ladder"] == ("chosen", 0.01)  # 0.04 is in its grid
    finals["ref24"][0.16], finals["ref24"][0.08] = [3.0] * 3, [1.6] * 3  # 24comm now wins at 0.08, ladder never ran it
    verdicts, needed = rates.decide(64, finals, ("ref24", "ladder"))
    assert verdicts == {"ref24": ("chosen", 0.08), "ladder": ("pending", None)} and needed == {"ladder": [0.08]}


def fake_tuning_run(folder, run_id, loss=None, diverged=False, width=128, seed=500, lr=0.01):
    """A tuning run's files as train.py and bench.sweep leave them: result.json and the logs (a diverged run: only
    the evals before its stop, and the error line train.py writes)."""
    os.makedirs(folder / run_id)
    (folder / run_id / "config.json").write_text(json.dumps({"seed": seed, "n_embd": width, "learning_rate": lr, "max_iters": 600}))
    evals = [{"iter": 300, "val_loss": 2.3}] + ([] if diverged else [{"iter": 600, "val_loss": loss}])
    (folder / run_id / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    if diverged:
        (folder / run_id / "train.log").write_text("step 300: ...\nerror: iteration 300: val loss nan is not finite; ...\n")
    else:
        (folder / run_id / "train.log").write_text("iter 600: ...\n")
        (folder / run_id / "result.json").write_text(json.dumps({"final": {"val_loss": loss}}))


def fill_tuning(runs, width, best, diverged=()):
    """Every planned tuning run of the width not yet there, its final loss a parabola in log2(rate) around the
    setting's best rate plus a seed offset; diverged: (setting, rate, seed) that stop on a non-finite loss."""
    sweep = design.tuning_sweep(width, design.CPU[width], design.TUNING_SEEDS, design.read_state("tuning/extensions.json"))
    for run in sweeps.plan(sweep, str(runs)):
        if not (runs / run["id"]).exists():
            s, lr = run["setting"].split("_")[1], sweep["settings"][run["setting"]]["learning_rate"]
            loss = 1.8 + math.log2(lr / best[s]) ** 2 / 10 + (run["seed"] - 501) / 100
            fake_tuning_run(runs, run["id"], loss, (s, lr, run["seed"]) in diverged, width, run["seed"], lr)


def test_the_rates_tool_extends_a_grid_then_writes_the_chosen_rates(state, tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    best = {"ref24": 0.01, "drop1": 0.01, "half": 0.005, "ladder": 0.0025}  # ladder's at the low end: extend once

    def fill():
        fill_tuning(runs, 128, best, diverged={("ladder", 0.02, 502)})
    argv = ["rates", "--width", "128", "--runs", str(runs), "--write"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit, match="48 tuning runs have no verdict yet"):
        rates.main()
    fill()
    rates.main()
    assert json.loads((state / "tuning" / "extensions.json").read_text()) == {"128": {"ladder": [0.00125]}}
    assert json.loads((state / "chosen_rates.json").read_text())["128"] is None
    out = capsys.readouterr().out
    assert "ladder: " in out and "0.02: diverged (1 of 3)" in out and "-> extend 0.00125" in out
    fill()  # the three runs at 0.00125
    rates.main()
    assert json.loads((state / "chosen_rates.json").read_text())["128"] == best
    curves = json.loads((state / "tuning" / "sensitivity_w128.json").read_text())["curves"]
    assert curves["ladder"]["band"] == [0.00125, 0.0025, 0.005] and curves["ref24"]["highest_stable"] == 0.02


TUNING_RUN = re.compile(r"shakespeare_char_24comm-w(\d+)_([a-z0-9]+)_lr([0-9.e-]+)-s(\d+)")


def recompute_tuning(state, runs, width):
    """A decided width's tuning recomputed from its run logs with a plain loop, not with rates.py: each run's final
    val loss (metrics.jsonl's eval at max_iters; a run train.py stopped on a non-finite value is diverged, +inf),
    per setting and rate the mean, sd, min and max over the tuning seeds, the stable band, and the rate the plan's
    rule picks. Asserts they are what tuning/sensitivity_w<W>.json and chosen_rates.json say."""
    with open(os.path.join(state, "tuning", f"sensitivity_w{width}.json")) as f:
        written = json.load(f)
    with open(os.path.join(state, "chosen_rates.json")) as f:
        chosen = json.load(f)[str(width)]
    finals = {}
    for name in sorted(os.listdir(runs)):
        match = TUNING_RUN.fullmatch(name)
        if not match or int(match[1]) != width or int(match[4]) not in written["seeds"]:
            continue
        with open(os.path.join(runs, name, "config.json")) as f:
            max_iters = json.load(f)["max_iters"]
        with open(os.path.join(runs, name, "metrics.jsonl")) as f:
            evals = [json.loads(line) for line in f if '"val_loss"' in line]
        if evals and evals[-1]["iter"] == max_iters and math.isfinite(evals[-1]["val_loss"]):
            value = evals[-1]["val_loss"]
        else:
            with open(os.path.join(runs, name, "train.log")) as f:
                errors = [line for line in f if line.startswith("error:")]
            assert errors and ("not finite" in errors[-1] or "non-finite" in errors[-1]), f"{name}: neither ended nor diverged"
            value = math.inf
        finals.setdefault(match[2], {}).setdefault(float(match[3]), []).append(value)
    assert sorted(finals) == sorted(written["curves"]) == sorted(chosen)
    for setting, by_rate in finals.items():
        points, means = written["curves"][setting]["points"], {}
        assert sorted(float(lr) for lr in points) == sorted(by_rate)
        assert all(chosen["ref24"] in finals[s] for s in finals)  # the rule's step 4: 24comm's rate in every grid
        for lr, values in by_rate.items():
            point, ok = points[f"{lr:g}"], [v for v in values if math.isfinite(v)]
            assert len(values) == point["n"] == len(written["seeds"]) and point["diverged"] == len(values) - len(ok)
            means[lr] = sum(values) / len(values) if len(ok) == len(values) else math.inf
            assert point["mean"] == pytest.approx(means[lr], abs=1e-12)
            if ok:
                assert (point["min"], point["max"]) == pytest.approx((min(ok), max(ok)), abs=1e-12)
            if len(ok) > 1:
                sd = math.sqrt(sum((v - sum(ok) / len(ok)) ** 2 for v in ok) / (len(ok) - 1))
                assert point["sd"] == pytest.approx(sd, abs=1e-12)
        best = min(means.values())
        band = sorted(lr for lr, m in means.items() if m <= best + 0.1) if math.isfinite(best) else []
        assert written["curves"][setting]["band"] == pytest.approx(band)
        pick = max(lr for lr, m in means.items() if m <= best + 0.005) if math.isfinite(best) else None
        assert chosen[setting] == pick, (setting, chosen[setting], pick)


def test_the_tuning_is_what_its_run_logs_give_and_renders_from_its_files(state, monkeypatch):
    """The recompute above on a width the rates tool decided (a diverged seed, a grid extended once), then a run's
    logged loss moved: the recompute catches it. findings.md's S1 table and choices come from the written files."""
    from bench.render import Study, render_template
    runs = state / "tuning" / "runs"
    best = {"ref24": 0.01, "drop1": 0.01, "half": 0.005, "ladder": 0.0025}
    monkeypatch.setattr(sys, "argv", ["rates", "--width", "128", "--runs", str(runs), "--write"])
    for _ in range(2):  # the base grid, then ladder's extension to 0.00125
        fill_tuning(runs, 128, best, diverged={("ladder", 0.02, 502)})
        rates.main()
    recompute_tuning(state, runs, 128)
    text = render_template("bench/studies/width_alone/findings.md.j2", data={"width_alone": Study(str(state))})
    assert "n_embd 128: ref24 0.01, drop1 0.01, half 0.005, ladder 0.0025" in text
    row = next(line for line in text.splitlines() if line.startswith("| 0.02 |"))
    assert row.count("diverged (1 of 3)") == 1  # ladder: seed 502 stopped on a non-finite loss
    assert "| 0.01 | 1.8000 (0.0100) [1.7900, 1.8100] |" in text  # 24comm at its best: 1.8 + seed offsets
    assert "- ladder: 0.0025; band 0.00125 to 0.005 (2 factor-2 steps)" in text
    assert "Is ladder's stable range narrower than 24comm's at n_embd 128? Narrower on this grid" in text
    moved = runs / "shakespeare_char_24comm-w128_half_lr0.005-s501" / "metrics.jsonl"
    moved.write_text(moved.read_text().replace('"val_loss": 1.8', '"val_loss": 1.9'))
    with pytest.raises(AssertionError):
        recompute_tuning(state, runs, 128)


TUNED = [w for w in design.CPU if os.path.exists(os.path.join(STUDY, "tuning", f"sensitivity_w{w}.json"))]


@pytest.mark.parametrize("width", TUNED)
def test_each_committed_tuning_is_what_its_run_logs_give(width):
    recompute_tuning(STUDY, os.path.join(STUDY, "tuning", "runs"), width)


def test_each_sweep_file_plans_its_arm_at_the_chosen_rates_and_refuses_before_them(state):
    def load(name):
        return sweeps.load_sweep(os.path.join(STUDY, name))

    with pytest.raises(SystemExit, match="n_embd 64: no rate chosen for ref24, drop1, drop5, half, ladder yet"):
        load("sweep_study.py")
    tuning = {w: sweeps.plan(load(f"tuning/sweep_w{w}.py"), "out") for w in (64, 128)}
    assert [len(tuning[64]), len(tuning[128])] == [5 * 4 * 3, 4 * 4 * 3]
    assert {r["seed"] for r in tuning[64]} == {500, 501, 502}
    (state / "chosen_rates.json").write_text(json.dumps(RATES))
    study = load("sweep_study.py")
    runs = sweeps.plan(study, "out")
    assert len(runs) == 14 * 9 and [r["setting"] for r in runs[:9]] == [
        "w64_ref24", "w64_drop1", "w64_drop5", "w64_half", "w64_ladder", "w128_ref24", "w128_drop1", "w128_half", "w128_ladder"]
    assert study["settings"]["w128_ladder"] == {"block_types": "ladder", "n_embd": 128, "n_head": 8,
                                                "learning_rate": 0.0025, "min_lr": 0.00025}
    assert set(load("sweep_at24_w64.py")["settings"]) == {"w64_drop5_at24", "w64_ladder_at24"}
    assert load("sweep_at24_w128.py")["settings"]["w128_half_at24"]["learning_rate"] == 0.01
    horizon = load("sweep_horizon_w64.py")
    assert list(horizon["settings"]) == ["w64h_ref24", "w64h_drop1", "w64h_half", "w64h_ladder"]
    assert horizon["seeds"] == list(range(600, 614)) and "warmup_iters" not in horizon["common"]
    assert {k: horizon["common"][k] for k in ("max_iters", "lr_decay_iters", "eval_interval")} == {
        "max_iters": 2400, "lr_decay_iters": 2400, "eval_interval": 300}
    assert list(load("sweep_horizon_w64_drop5.py")["settings"]) == ["w64h_drop5"]


def test_a_state_file_with_uncommitted_changes_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("WIDTH_ALONE_UNCOMMITTED", raising=False)
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=tmp_path,  # noqa: E731
                                    check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "chosen_rates.json").write_text("{}")
    with pytest.raises(ValueError, match="uncommitted changes"):
        design.read_state("chosen_rates.json", str(tmp_path))
    git("add", "chosen_rates.json"), git("commit", "-qm", "x")
    assert design.read_state("chosen_rates.json", str(tmp_path)) == {}
    (tmp_path / "chosen_rates.json").write_text('{"64": {}}')
    with pytest.raises(ValueError, match="uncommitted changes"):
        design.read_state("chosen_rates.json", str(tmp_path))


def scale_runs(tmp_path, *names):
    """Copies of the scale study's committed run folders (small files only)."""
    out = []
    for name in names:
        source = os.path.join(SCALE, "tuning" if "_lr" in name else "", "runs", name)
        shutil.copytree(source, tmp_path / name)
        out.append(str(tmp_path / name))
    return out


def final(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if '"val_loss"' in line][-1]["val_loss"]


def test_the_family_pairs_across_rates_and_refuses_runs_that_break_the_provenance_rule(tmp_path):
    from bench.contrasts import family as contrasts_family
    names = [f"shakespeare_char_24comm-w64_lr{lr}-s{s}" for lr in ("0.01", "0.02") for s in (200, 201)]
    dirs = scale_runs(tmp_path, *names)
    aggregates = aggregate(read_runs(dirs)[0])
    with pytest.raises(SummaryError, match="differ in more than the pattern"):  # bench.contrasts: rightly refused
        contrasts_family(aggregates, [("x", "w64_lr0.01", "w64_lr0.02")])
    (c,) = family.family(aggregates, [("cost", ("x", "w64_lr0.01", "w64_lr0.02"))], ["5b75504"])
    assert c["n"] == 2 and c["mean"] == pytest.approx(sum(final(dirs[i]) - final(dirs[i + 2]) for i in (0, 1)) / 2)
    # the second reading: a setting's run at 24comm's rate where it has one, else its own run, which must then be
    # at that rate (here it is not: refused)
    (alt,) = family.family(aggregates, [("cost", ("x", "w64_lr0.01_at24|w64_lr0.01", "w64_lr0.02"))], ["5b75504"])
    assert alt["mean"] == c["mean"]
    with pytest.raises(SummaryError, match="differ in learning_rate, min_lr"):
        family.family(aggregates, [("cost", ("x", "w64_lr0.01_at24|w64_lr0.01", "w64_lr0.02"))], ["5b75504"], same_rate=True)
    with pytest.raises(SummaryError, match="is not the plan's"):
        family.family(aggregates, [("cost", ("x", "w64_lr0.01", "w64_lr0.02"))], ["8d2508d"])
    # a run resumed with no earlier_parts (the scale study's seed 304 at n_embd 64) is refused
    resumed = scale_runs(tmp_path, "shakespeare_char_24comm-w64_drop1-s304", "shakespeare_char_24comm-w64_ref24-s304")
    with pytest.raises(SummaryError, match=r"resumed 1 time\(s\) but records 0 earlier part"):
        family.family(aggregate(read_runs(resumed)[0]), [("cost", ("c", "w64_drop1", "w64_ref24"))], ["8d2508d"])
    # a device run (commit given by the caller, a dirty copy) passes only with the call's verified provenance.json
    gpu = scale_runs(tmp_path, "shakespeare_char_24comm-w512_drop1-s300", "shakespeare_char_24comm-w512_ref24-s300")
    spec = [("cost", ("c", "w512_drop1", "w512_ref24"))]
    with pytest.raises(SummaryError, match="no provenance.json says its tree was verified"):
        family.family(aggregate(read_runs(gpu)[0]), spec, ["0744d77"])
    for d in gpu:
        commit = json.load(open(os.path.join(d, "run_info.json")))["git_commit"]
        json.dump({"commit": commit, "tree_verified": True}, open(os.path.join(d, "provenance.json"), "w"))
    (c,) = family.family(aggregate(read_runs(gpu)[0]), spec, ["0744d77"])
    assert c["mean"] == pytest.approx(final(gpu[0]) - final(gpu[1]))


def fake_run(folder, tag, width, seed, loss, lr=0.01):
    """A finished run as bench.summary reads it: config.json, metrics.jsonl, result.json, a clean run_info.json."""
    d = folder / f"shakespeare_char_24comm-{tag}-s{seed}"
    d.mkdir()
    cfg = {**design.SETTINGS[tag.split("_")[1]], "n_embd": width, "n_head": width // 16, "learning_rate": lr, "seed": seed}
    base = json.loads(open(os.path.join(SCALE, "runs", "shakespeare_char_24comm-w64_ref24-s300", "config.json")).read())
    (d / "config.json").write_text(json.dumps({**base, **cfg}))
    (d / "metrics.jsonl").write_text(json.dumps({"iter": 600, "val_loss": loss, "val_perplexity": 1, "val_accuracy": 0,
                                                 "time_s": 1.0}) + "\n")
    (d / "result.json").write_text(json.dumps({"config": design.CONFIG, "setting": tag, "final": {"val_loss": loss}}))
    (d / "run_info.json").write_text(json.dumps({"git_commit": "a" * 40, "git_commit_from": "checkout", "git_dirty": False,
                                                 "numerics": {"device": "cpu", "host": "x", "cpu_capability": "AVX2", "dtype": "float32",
                                                              "tf32": False, "deterministic": False}}))


def test_a_trend_is_the_per_seed_slope_on_log2_width_and_a_bent_one_is_not_a_line(tmp_path):
    widths, seeds = (64, 128, 256), range(600, 606)
    for seed in seeds:
        for i, w in enumerate(widths):
            # seed noise whose mean is 0 at every width: ±0.003 at the middle width, -0.0025..+0.0025 at the last
            noise = [0.0, (seed % 2 * 2 - 1) * 0.003, (seed - 602.5) / 1000][i]
            fake_run(tmp_path, f"w{w}_ref24", w, seed, 1.8)
            fake_run(tmp_path, f"w{w}_drop1", w, seed, 1.8 + 0.01 + 0.02 * i + noise, lr=0.02)  # +0.02 a doubling
            fake_run(tmp_path, f"w{w}_ladder", w, seed, 1.8 + (0.1 if i == 1 else 0.0) + noise)  # up, then down
    aggregates = aggregate(read_runs([str(tmp_path)])[0])
    specs = [("trend", ("t_drop1", "w{W}_drop1", "w{W}_ref24", list(widths))),
             ("trend", ("t_ladder", "w{W}_ladder", "w{W}_ref24", list(widths))),
             ("change", ("d_drop1", "w64_drop1", "w64_ref24", "w128_drop1", "w128_ref24"))]
    found = {c["name"]: c for c in family.family(aggregates, specs, ["aaaaaaa"])}
    assert found["t_drop1"]["mean"] == pytest.approx(0.02, abs=1e-9) and found["t_drop1"]["verdict"] == "resolved: the cost rises with width"
    assert found["t_ladder"]["verdict"].startswith("not a line")
    assert found["d_drop1"]["mean"] == pytest.approx(0.02, abs=1e-9) and found["d_drop1"]["n"] == 6


def test_the_device_call_runs_only_from_the_commits_own_tree(tmp_path):
    """--prepare packs HEAD's tree (git archive), its manifest and the data; the unpacked tree passes the check, and an
    edited file, an extra Python file, another commit or other data are each refused in one line."""
    if subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("no git history here")
    data = tmp_path / "data"
    data.mkdir()
    for name in device_ladder.DATA:
        (data / name).write_bytes(name.encode())
    commit, state = device_ladder.prepare("HEAD", out=str(tmp_path / "state"), data=str(data))
    tree = tmp_path / "tree"
    tree.mkdir()
    with tarfile.open(os.path.join(state, "tree.tar.gz")) as tar:
        tar.extractall(tree)
    with tarfile.open(os.path.join(state, "data.tar.gz")) as tar:
        tar.extractall(tree / "data" / "shakespeare_char")
    record = device_ladder.verify_tree(commit, state, str(tree))
    assert record["tree_verified"] and record["commit"] == commit and record["files_verified"] > 100
    with pytest.raises(device_ladder.Refused, match="tree.tar.gz is of commit"):
        device_ladder.verify_tree("f" * 40, state, str(tree))
    original = (tree / "model.py").read_text()
    (tree / "model.py").write_text(original + "\n# an edit\n")
    with pytest.raises(device_ladder.Refused, match=r"1 file\(s\) differ or are missing \(model.py\).*a dirty tree is refused"):
        device_ladder.verify_tree(commit, state, str(tree))
    (tree / "model.py").write_text(original)
    (tree / "bench" / "extra.py").write_text("")
    with pytest.raises(device_ladder.Refused, match=r"1 Python file\(s\) not in it \(bench/extra.py\)"):
        device_ladder.verify_tree(commit, state, str(tree))
    (tree / "bench" / "extra.py").unlink()
    (tree / "data" / "shakespeare_char" / "val.bin").write_bytes(b"other")
    with pytest.raises(device_ladder.Refused, match="not the data --prepare packed"):
        device_ladder.verify_tree(commit, state, str(tree))


def test_the_device_call_tunes_every_width_then_keeps_whole_seeds_only(tmp_path, monkeypatch):
    """The call with its sweeps faked (a run's loss a function of its setting and rate): every width of the ladder
    tuned by the rule (ladder's grid extended at its low end), the rates written out, then two study seeds of
    which one has a failed run: only the whole seed comes back, each run with the call's provenance.json."""
    monkeypatch.chdir(ROOT)
    state, out = tmp_path / "state", tmp_path / "out"
    state.mkdir()
    (state / "rates.json").write_text("{}")
    record = {"commit": "f" * 40, "tree_verified": True, "files_verified": 1, "manifest_sha256": "0" * 64}
    monkeypatch.setattr(device_ladder, "verify_tree", lambda commit, folder: record)
    planned = []

    def fake_run_sweep(sweep, runs_dir, limit_s, args, log):
        planned.append(sweep)
        for run in sweeps.plan(sweep, runs_dir):
            os.makedirs(run["dir"], exist_ok=True)
            keys, width = sweep["settings"][run["setting"]], int(run["setting"][1:].split("_")[0])
            lr = keys["learning_rate"] / design.GRID[width][1]  # each width's second grid point is its 1
            best = 0.25 if keys.get("block_types") == "ladder" else 1.0
            if not (run["seed"] == 601 and run["setting"] == "w256_half"):
                with open(os.path.join(run["dir"], "result.json"), "w") as f:
                    json.dump({"final": {"val_loss": 1.8 + math.log2(lr / best) ** 2 / 10}}, f)
        return True

    monkeypatch.setattr(device_ladder, "run_sweep", fake_run_sweep)
    monkeypatch.setattr(sys, "argv", ["device_ladder", "--commit", "f" * 40, "--state", str(state), "--out", str(out),
                                      "--runs", str(tmp_path / "runs"), "--max_seeds", "2"])
    device_ladder.main()
    chosen = json.loads((out / "chosen_rates.json").read_text())
    assert chosen["512"] == {"ref24": 0.00125, "drop1": 0.00125, "half": 0.00125, "ladder": 0.0003125}
    assert chosen["64"]["ladder"] == 0.0025 and [len(s["settings"]) for s in planned[:2]] == [16, 17]
    host = (out / "host.txt").read_text()
    assert "seeds kept (every run at every width finished): 600; dropped (cut off or failed, rerun whole in a later call): 601" in host
    with tarfile.open(out / "study.tgz") as tar:
        names = tar.getnames()
        assert {n.split("/")[0].rsplit("-s", 1)[1] for n in names} == {"600"}
        assert len({n.split("/")[0] for n in names}) == 16 and not any(n.endswith("ckpt.pt") for n in names)
        assert json.load(tar.extractfile(names[[n.endswith("provenance.json") for n in names].index(True)])) == record
    assert planned[-1]["common"]["dtype"] == "bfloat16" and planned[-1]["seeds"] == [600, 601]


def plan_command(writes):
    """The plan's analysis command (plan.md "Analysis") that writes `writes`, as family.py's argv."""
    import shlex
    with open(os.path.join(STUDY, "plan.md")) as f:
        blocks = re.findall(r"^```[a-z]*\n(.*?)^```", f.read(), re.S | re.M)
    commands = [c for b in blocks for c in b.replace("\\\n", " ").splitlines()]
    return next(shlex.split(c)[3:] for c in commands if c.startswith("python -m bench.studies.width_alone.family") and writes in c)


def fake_study_runs(runs, finals, commit, hosts):
    """Study runs as train.py and bench.sweep leave them, built from a committed scale run's files: finals
    {(width, setting, seed): final val loss}, each setting at RATES' rate; hosts {seed: its CPU model}."""
    template = os.path.join(SCALE, "runs", "shakespeare_char_24comm-w64_ref24-s300")
    load = lambda name: json.load(open(os.path.join(template, name)))  # noqa: E731
    config, info, result = load("config.json"), load("run_info.json"), load("result.json")
    with open(os.path.join(template, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    last = max(i for i, r in enumerate(records) if "val_loss" in r)
    for (width, setting, seed), loss in finals.items():
        run = runs / f"shakespeare_char_24comm-w{width}_{setting}-s{seed}"
        run.mkdir(parents=True)
        shutil.copy(os.path.join(template, "train.log"), run / "train.log")
        write = lambda name, content: (run / name).write_text(json.dumps(content))  # noqa: E731
        write("config.json", {**config, **design.SETTINGS[setting], **design.shape(width),
                              **design.rate(RATES[str(width)][setting]), "seed": seed})
        write("run_info.json", {**info, "git_commit": commit, "checkout_commit": commit, "git_dirty": False,
                                "numerics": {**info["numerics"], "host": hosts[seed]}})
        write("result.json", {**result, "id": run.name, "setting": f"w{width}_{setting}", "seed": seed,
                              "final": {**result["final"], "val_loss": loss}})
        (run / "metrics.jsonl").write_text("".join(json.dumps({**r, "val_loss": loss} if i == last else r) + "\n"
                                                   for i, r in enumerate(records)))


def recompute_primary(study, commit_runs):
    """family_primary.json recomputed from the runs' metrics.jsonl with a plain loop (not family.py or
    bench.stats): each cost per seed, each change per seed as (cost at 128) - (cost at 64), the mean, the 95% t
    interval, the t test's p and Holm's adjustment by hand. Asserts they are what the file says."""
    from scipy import stats
    with open(os.path.join(study, "family_primary.json")) as f:
        records = json.load(f)
    runs = os.path.join(study, commit_runs)
    loss = lambda w, s, seed: final(os.path.join(runs, f"shakespeare_char_24comm-w{w}_{s}-s{seed}"))  # noqa: E731
    seeds_of = lambda w, s: {int(n.rsplit("-s", 1)[1]) for n in os.listdir(runs) if f"-w{w}_{s}-" in n}  # noqa: E731
    p_values = []
    for record in records:
        setting = record["name"].split("_", 1)[1]
        if record["name"].startswith("c"):
            width = int(record["name"][1:].split("_")[0])
            seeds = sorted(seeds_of(width, setting) & seeds_of(width, "ref24"))
            diffs = [loss(width, setting, s) - loss(width, "ref24", s) for s in seeds]
        else:
            seeds = sorted(set.intersection(*(seeds_of(w, x) for w in (64, 128) for x in (setting, "ref24"))))
            diffs = [(loss(128, setting, s) - loss(128, "ref24", s)) - (loss(64, setting, s) - loss(64, "ref24", s))
                     for s in seeds]
        n = len(diffs)
        mean = sum(diffs) / n
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
        half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
        assert record["seeds"] == seeds and record["n"] == n
        assert (record["mean"], record["ci_low"], record["ci_high"]) == pytest.approx((mean, mean - half, mean + half), abs=1e-9)
        p_values.append(2 * stats.t.sf(abs(mean) / (sd / math.sqrt(n)), n - 1))
        assert record["p"] == pytest.approx(p_values[-1], rel=1e-6)
    order, running = sorted(range(len(p_values)), key=p_values.__getitem__), 0.0
    for rank, i in enumerate(order):  # Holm: the k-th smallest times (m - k), kept monotone, capped at 1
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        assert records[i]["p_holm"] == pytest.approx(running, rel=1e-6)
    return records


@pytest.fixture
def analysed(tmp_path, monkeypatch):
    """A study folder with fourteen fake seeds over two numerics classes (ladder's cost rising from 64 to 128, the
    others not) and family_primary.json written by the plan's own command for it: (folder, the runs' finals)."""
    import random
    effect = {64: {"drop1": 0.01, "drop5": 0.005, "half": 0.0, "ladder": 0.02}, 128: {"drop1": 0.01, "half": 0.0, "ladder": 0.09}}
    finals = {(w, s, seed): 1.9 + effect[w].get(s, 0.0) + random.Random(f"{w}{s}{seed}").gauss(0, 0.01)
              for w in (64, 128) for s in design.CPU[w] for seed in design.STUDY_SEEDS}
    hosts = {seed: "AMD EPYC" if seed < 607 else "Intel(R) Xeon(R) Processor @ 2.50GHz" for seed in design.STUDY_SEEDS}
    commit = "a" * 40
    fake_study_runs(tmp_path / "runs", finals, commit, hosts)
    (tmp_path / "chosen_rates.json").write_text(json.dumps(RATES))
    argv = [a.replace("<P>", commit).replace("bench/studies/width_alone/", f"{tmp_path}/") for a in plan_command("family_primary.json")]
    monkeypatch.setattr(sys, "argv", ["family", *argv])
    family.main()
    return tmp_path, finals


def test_the_primary_family_by_the_plans_command_is_what_the_run_logs_give_and_renders(analysed):
    """The plan's command on the fake seeds, the plain-loop recompute, findings.md's table and answer; then a
    run's logged loss moved: the recompute catches it."""
    from bench.render import Study, ci, render_template
    tmp_path, finals = analysed
    records = recompute_primary(tmp_path, "runs")
    assert [r["name"] for r in records] == ["c64_drop1", "c64_drop5", "c64_half", "c64_ladder", "c128_drop1", "c128_half",
                                            "c128_ladder", "d_drop1", "d_half", "d_ladder"]
    by_name = {r["name"]: r for r in records}
    assert by_name["d_ladder"]["verdict"].startswith("resolved") and by_name["d_ladder"]["mean"] > 0
    assert sorted(by_name["c64_half"]["by_class"]) == ["cpu AMD EPYC AVX512, float32",
                                                        "cpu Intel(R) Xeon(R) Processor @ 2.50GHz AVX512, float32"]
    text = render_template("bench/studies/width_alone/findings.md.j2", data={"width_alone": Study(str(tmp_path))})
    row = next(line for line in text.splitlines() if line.startswith("| d_ladder |"))
    assert f"| 64: 0.005, 0.02; 128: 0.0025, 0.01 | 14 | {ci(by_name['d_ladder'])} |" in row
    assert f"Yes, it rises: {ci(by_name['d_ladder'])} nats from 64 to 128" in text
    assert "- c64_half: cpu AMD EPYC AVX512, float32, seeds 600-606: " in text
    moved = tmp_path / "runs" / "shakespeare_char_24comm-w128_ladder-s605" / "metrics.jsonl"
    moved.write_text(moved.read_text().replace(f'"val_loss": {finals[(128, "ladder", 605)]}', '"val_loss": 2.5'))
    with pytest.raises(AssertionError):
        recompute_primary(tmp_path, "runs")


PRIMARY = [STUDY] if os.path.exists(os.path.join(STUDY, "family_primary.json")) else []


@pytest.mark.parametrize("study", PRIMARY)
def test_the_committed_primary_family_is_what_its_run_logs_give(study):
    recompute_primary(study, "runs")


def test_the_first_screens_answer_from_the_primary_family_once_it_is_analysed(analysed):
    """README's and RESULTS' row "Does it hold as the model grows?" come from family_primary.json (the plan's reading
    of d_ladder, the rates each setting ran at) once it exists; the scale study's confounded line is gone from them."""
    from bench.render import Study, ci, numbers, render_template
    data = numbers()
    data["width_alone"] = Study(str(analysed[0]))
    d = {r["name"]: r for r in json.load(open(analysed[0] / "family_primary.json"))}
    for template in ("bench/templates/readme_answers.md.j2", "bench/templates/results_answers.md.j2"):
        row = next(line for line in render_template(template, data=data).splitlines() if "Does it hold as the model grows?" in line)
        assert f"ladder's cost rises: {ci(d['d_ladder'])} nats; 1comm {ci(d['d_drop1'])}, half the channels {ci(d['d_half'])}" in row
        assert "n_embd 64: ref24 0.02, drop1 0.02, drop5 0.01, half 0.02, ladder 0.005; n_embd 128: ref24 0.01" in row
        assert "scale" in row and "rate, progress and arithmetic" not in row and "per doubling" not in row
    for template in ("bench/templates/readme_answers.md.j2", "bench/templates/results_answers.md.j2"):
        text = render_template(template, data=data)
        assert "unresolved as an effect of width" not in text.lower() and "not yet a variable" not in text
        assert "grows is unresolved" not in text
        assert "width_alone/findings.md" in text


def test_the_budget_projects_the_arms_left_from_the_classs_own_run_times_and_cuts_in_the_plans_order(tmp_path, monkeypatch, capsys):
    """bench.studies.width_alone.budget: per-run seconds are the class's medians (another class's runs ignored), a
    width it has not run is scaled by the plan's ratio, a horizon run is 4x; the arms left are cut in the plan's
    order until they fit the sessions left, and the primary arms never."""
    from bench.studies.width_alone import budget
    amd = {"device": "cpu", "host": "AMD EPYC", "cpu_capability": "AVX2", "dtype": "float32", "tf32": False, "deterministic": False}

    def run(folder, name, seconds, numerics=amd):
        (tmp_path / folder / name).mkdir(parents=True)
        (tmp_path / folder / name / "result.json").write_text(json.dumps({"final": {"time_s": seconds}}))
        (tmp_path / folder / name / "run_info.json").write_text(json.dumps({"numerics": numerics}))

    for i, seconds in enumerate((600, 700, 650)):  # median 650 at n_embd 64
        run("tuning/runs", f"shakespeare_char_24comm-w64_ref24_lr0.01-s{500 + i}", seconds)
    run("tuning/runs", "shakespeare_char_24comm-w64_ladder_lr0.01-s500", 100, dict(amd, cpu_capability="AVX512"))
    run("runs", "shakespeare_char_24comm-w64h_drop5-s600", 9999, dict(amd, cpu_capability="AVX512"))  # H5, other class
    (tmp_path / "chosen_rates.json").write_text('{"64": null, "128": null}')
    (tmp_path / "sessions.md").write_text("# Sessions\n\n- 2026-12-02 | ...\n- 2026-12-03 | ...\n")
    label = "cpu AMD EPYC AVX2, float32"
    monkeypatch.setattr(sys, "argv", ["budget", "--study", str(tmp_path), "--class", label])
    budget.main()
    out = capsys.readouterr().out
    lines = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
    s128 = 650 * 784 / 309
    assert lines["T64"] == f"| T64 | 4 | 65 | 650 | {65 * 650 / 3600:.1f} | {65 * 650 / 3600 / 5:.1f} |"  # 4 done: 3 + 1 of another class
    assert lines["S128"] == f"| S128 | 0 | 56 | {s128:.0f} | {56 * s128 / 3600:.1f} | {56 * s128 / 3600 / 5:.1f} |"
    assert lines["H5"] == f"| H5 | 1 | 7 | 2600 | {7 * 2600 / 3600:.1f} | {7 * 2600 / 3600 / 5:.1f} |"
    assert "18 of the plan's 20 CPU sessions left (2 used)" in out
    total = (65 * 650 + 57 * s128 + 70 * 650 + 56 * s128 + 32 * 2600 + 7 * 2600 + 56 * 650 + 42 * s128) / 3600 / 5
    assert f"all arms: {total:.1f} sessions" in out
    primary = (65 * 650 + 57 * s128 + 70 * 650 + 56 * s128) / 3600 / 5
    assert f"cut, in the plan's order: A128, A64, H5, H -> {primary:.1f} sessions" in out and "amended" not in out
    rows, cuts, fits, need, left = budget.project(budget.committed_runs(str(tmp_path)), label, {}, 16)  # 4 sessions left
    assert cuts == ["A128", "A64", "H5", "H", "seeds 612-613"] and not fits  # the primary arms stay: amend the plan
    assert need == pytest.approx((65 * 650 + 57 * s128 + (70 * 650 + 56 * s128) * 12 / 14) / 3600 / 5)
    monkeypatch.setattr(sys, "argv", ["budget", "--study", str(tmp_path), "--class", "cpu Intel AVX512, float32"])
    with pytest.raises(SystemExit, match="no committed run of class 'cpu Intel AVX512, float32'"):
        budget.main()
