"""The width-alone study's tools (bench/studies/width_alone/): the tuning rule and the rates it writes, the sweep
files over the chosen rates, the best-against-best family with its provenance rule, and the GPU call's tree check
and flow (its sweeps faked). Every test takes seconds: no training run."""

import json
import math
import os
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
    floor = load("sweep_floor.py")  # amendment 2: dense at 24comm's rate, each width
    assert floor["settings"] == {f"w{w}_dense": {"tp_size": 1, "n_embd": w, "n_head": w // 16, "learning_rate": lr,
                                                 "min_lr": lr / 10} for w, lr in ((64, 0.02), (128, 0.01))}
    assert floor["seeds"] == list(range(600, 614)) and floor["common"] == study["common"]


def test_the_floor_sweep_plans_under_the_plans_own_code(tmp_path):
    """Amendment 2: sweep_floor.py came after P and runs from P's worktree, so P's bench.sweep and design.py (its
    .py files from `git archive`) must plan it, at 24comm's chosen rates."""
    from bench.studies.width_alone import land
    tree, state = tmp_path / "p", tmp_path / "state"
    tree.mkdir(), state.mkdir()
    (state / "chosen_rates.json").write_text(json.dumps(RATES))
    archive = subprocess.run(["git", "archive", land.plan_commit(), "--", "*.py"], cwd=ROOT, capture_output=True, check=True)
    tarfile.open(fileobj=__import__("io").BytesIO(archive.stdout)).extractall(tree, filter="data")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(WIDTH_ALONE_STATE=str(state), WIDTH_ALONE_UNCOMMITTED="1")
    code = ("import json, sys; from bench import sweep; from bench.studies.width_alone import design; "
            "s = sweep.load_sweep(sys.argv[1]); runs = sweep.plan(s, 'out'); "  # plan: P's configurator checks each run
            "print(json.dumps(dict(settings=s['settings'], ids=[r['id'] for r in runs[:2]], design=design.__file__)))")
    done = subprocess.run([sys.executable, "-c", code, os.path.join(STUDY, "sweep_floor.py")], cwd=tree, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    planned = json.loads(done.stdout)
    assert planned["design"].startswith(str(tree))  # P's design.py, not this checkout's
    assert planned["ids"] == ["shakespeare_char_24comm-w64_dense-s600", "shakespeare_char_24comm-w128_dense-s600"]
    assert planned["settings"] == {f"w{w}_dense": {"tp_size": 1, "n_embd": w, "n_head": w // 16, "learning_rate": lr,
                                                   "min_lr": lr / 10} for w, lr in ((64, 0.02), (128, 0.01))}


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
    # the noise floor (amendment 2): dense pairs with 24comm at one rate, differing only in tp_size
    floor = scale_runs(tmp_path, "shakespeare_char_24comm-w64_dense-s300", "shakespeare_char_24comm-w64_ref24-s300")
    (f,) = family.family(aggregate(read_runs(floor)[0]), [("cost", ("f64", "w64_dense", "w64_ref24"))], [], same_rate=True)
    assert f["per_seed"] == {300: pytest.approx(final(floor[0]) - final(floor[1]))}
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
