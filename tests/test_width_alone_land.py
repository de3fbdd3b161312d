"""bench/studies/width_alone/land.py: a seed of an arm lands whole, in its study runs' class, from P's clean tree,
as its sweep plans it, over nothing, without ckpt.pt; anything else is refused in one line and copies nothing.
Fake runs built from the sweep's own plan: no training run."""

import json
import os
import subprocess
import sys

import pytest

from bench import sweep as sweeps
from bench.studies.width_alone import design, land
from conftest import ROOT

STUDY = os.path.join(ROOT, "bench", "studies", "width_alone")
P = land.plan_commit()
RATES = {"64": {"ref24": 0.02, "drop1": 0.02, "drop5": 0.02, "half": 0.02, "ladder": 0.01},
         "128": {"ref24": 0.01, "drop1": 0.01, "half": 0.01, "ladder": 0.005}}
INTEL = {"device": "cpu", "host": "Intel(R) Xeon(R) Processor", "cpu_capability": "AVX512", "dtype": "float32",
         "tf32": False, "deterministic": False}
AMD = {**INTEL, "host": "AMD EPYC", "cpu_capability": "AVX2"}


@pytest.fixture
def arm(tmp_path, monkeypatch):
    """The horizon sweep at fake chosen rates; a worktree's runs/ and the study's runs/ under tmp_path."""
    (tmp_path / "chosen_rates.json").write_text(json.dumps(RATES))
    monkeypatch.setattr(design, "STATE", str(tmp_path))
    monkeypatch.setenv("WIDTH_ALONE_UNCOMMITTED", "1")
    sweep = sweeps.load_sweep(os.path.join(STUDY, "sweep_horizon_w64.py"))
    (tmp_path / "runs").mkdir()
    return sweep, tmp_path / "wt" / "runs", tmp_path / "runs"


def finish(sweep, source, seed, numerics=INTEL, commit=P, dirty=False, keys=None):
    """Every run the sweep plans for the seed, as bench.sweep leaves it (ckpt.pt too); keys override the config."""
    planned = [r for r in sweeps.plan(sweep, str(source)) if r["seed"] == seed]
    for run in planned:
        d = source / sweep["name"] / run["id"]
        d.mkdir(parents=True)
        config = {"n_layer": 12, **sweep["common"], **sweep["settings"][run["setting"]], "seed": seed, **(keys or {})}
        (d / "config.json").write_text(json.dumps(config))
        (d / "run_info.json").write_text(json.dumps({"git_commit": commit, "git_dirty": dirty, "numerics": numerics}))
        (d / "metrics.jsonl").write_text("".join(json.dumps({"iter": i, "val_loss": 2.0, "time_s": float(i)}) + "\n"
                                                 for i in (0, 300, 2400)))
        (d / "result.json").write_text(json.dumps({"final": {"val_loss": 2.0, "time_s": 2400.0}}))
        (d / "train.log").write_text("log\n")
        (d / "ckpt.pt").write_bytes(b"weights")
    return planned


def study_run(runs, seed, numerics=INTEL, setting="w64_ref24"):
    d = runs / f"shakespeare_char_24comm-{setting}-s{seed}"
    d.mkdir()
    (d / "run_info.json").write_text(json.dumps({"numerics": numerics}))


def test_a_whole_seed_lands_in_its_study_runs_class_without_its_checkpoints(arm):
    sweep, source, runs = arm
    planned = finish(sweep, source, 604)
    study_run(runs, 604), study_run(runs, 604, setting="w128_half")
    study_run(runs, 604, AMD, setting="w64_ladder_at24")  # another arm's run of the seed: not what the class is read from
    landing = land.check(sweep, planned, str(source), str(runs), [P])
    written = land.land(landing, str(runs))
    assert [os.path.basename(w) for w in written] == [r["id"] for r in planned] and len(written) == len(design.HORIZON)
    for path in written:
        assert sorted(os.listdir(path)) == sorted(land.KEPT)  # ckpt.pt stayed behind
    with pytest.raises(land.LandError, match="exists already: nothing is overwritten"):
        land.check(sweep, planned, str(source), str(runs), [P])


@pytest.mark.parametrize("case, match", [
    ("unfinished", "seed 604 is not whole: .*w64h_half-s604 has no result.json"),
    ("other class", r"ran in cpu AMD EPYC AVX2, float32, not the class of seed 604's study runs \(cpu Intel"),
    ("dirty", r"its checkout was not recorded clean \(git_dirty True\) .*delete it and rerun it"),
    ("another commit", "commit 8d2508d00000 is not the plan's"),
    ("another rate", r"config.json's learning_rate, min_lr not what width_alone_horizon_w64 plans now \(learning_rate=0.02"),
])
def test_a_seed_that_may_not_land_is_refused_in_one_line_and_nothing_is_copied(arm, case, match):
    sweep, source, runs = arm
    study_run(runs, 604)
    planned = finish(sweep, source, 604, numerics=AMD if case == "other class" else INTEL, dirty=case == "dirty",
                     commit="8d2508d" + "0" * 33 if case == "another commit" else P,
                     keys={"learning_rate": 0.04, "min_lr": 0.004} if case == "another rate" else None)
    if case == "unfinished":
        os.remove(source / sweep["name"] / "shakespeare_char_24comm-w64h_half-s604" / "result.json")
    with pytest.raises(land.LandError, match=match):
        land.check(sweep, planned, str(source), str(runs), [P])
    assert sorted(os.listdir(runs)) == ["shakespeare_char_24comm-w64_ref24-s604"]


def test_the_study_arm_lands_against_nothing_but_its_own_runs_agree_on_one_class(arm):
    sweep, source, runs = arm
    sweep = {**sweep, "name": "width_alone_study"}  # a seed's first arm: no study run of it is in runs/ yet
    planned = finish(sweep, source, 606)
    (source / sweep["name"] / planned[-1]["id"] / "run_info.json").write_text(
        json.dumps({"git_commit": P, "git_dirty": False, "numerics": AMD}))
    with pytest.raises(land.LandError, match=r"seed 606's runs ran in 2 classes"):
        land.check(sweep, planned, str(source), str(runs), [P])


def test_the_command_lands_the_seeds_it_names_and_says_what_to_commit(arm, tmp_path):
    sweep, source, runs = arm
    finish(sweep, source, 604), finish(sweep, source, 605)
    study_run(runs, 604), study_run(runs, 605)
    env = {**os.environ, "WIDTH_ALONE_STATE": str(tmp_path)}
    command = [sys.executable, "-m", "bench.studies.width_alone.land", os.path.join(STUDY, "sweep_horizon_w64.py"),
               "--from", str(source), "--runs", str(runs), "--seeds"]
    done = subprocess.run(command + ["604"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(runs)) == sorted([f"shakespeare_char_24comm-w64_ref24-s{s}" for s in (604, 605)]
                                              + [f"shakespeare_char_24comm-w64h_{s}-s604" for s in design.HORIZON])
    waited = subprocess.run(command + ["605", "--wait"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert waited.returncode == 0 and "w64h_ladder-s605" in waited.stdout  # whole already: it waits for nothing
    refused = subprocess.run(command + ["604-605"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and refused.stderr.strip().count("\n") == 0 and "exists already" in refused.stderr
    # --commit: runs landed outside a git checkout are said to be uncommitted, in one line
    finish(sweep, source, 606), study_run(runs, 606)
    outside = subprocess.run(command + ["606", "--commit"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert outside.returncode == 1 and outside.stderr.startswith("error: landed but not committed: `git add --` failed")
    assert outside.stderr.strip().count("\n") == 0 and os.path.isdir(runs / "shakespeare_char_24comm-w64h_ref24-s606")


def test_the_floor_lands_by_its_path_and_commits_only_its_own_folders_in_the_checkout_that_holds_them(arm, tmp_path):
    """Amendment 2's sweep (run by its main-checkout path): a seed's two floor runs land in its study runs' class,
    the seed's other dense or arm runs not counted as its study runs; --commit makes one commit of the two folders in
    the runs' own checkout, leaving what else is staged; an arm whose seed has no study run landed is refused."""
    _, source, runs = arm
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=runs,  # noqa: E731
                                    check=True, capture_output=True, text=True).stdout
    git("init", "-q"), git("config", "user.name", "t"), git("config", "user.email", "t@t")
    study_run(runs, 604), study_run(runs, 604, AMD, setting="w64h_ref24")
    (runs / "staged.txt").write_text("x"), git("add", "staged.txt")
    floor = sweeps.load_sweep(os.path.join(STUDY, "sweep_floor.py"))
    finish(floor, source, 604)
    command = [sys.executable, "-m", "bench.studies.width_alone.land", os.path.join(STUDY, "sweep_floor.py"),
               "--from", str(source), "--runs", str(runs), "--seeds"]
    env = {**os.environ, "WIDTH_ALONE_STATE": str(tmp_path)}
    done = subprocess.run(command + ["604", "--commit"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert git("log", "--format=%s").strip() == (f"width_alone width_alone_floor: seed 604 whole, 2 runs (w64_dense, "
                                                 f"w128_dense), from the worktree at P={P[:7]}, cpu Intel(R) Xeon(R) "
                                                 "Processor AVX512, float32, the class of each seed's study runs")
    assert sorted(git("show", "--name-only", "--format=", "HEAD").split()) == sorted(
        f"shakespeare_char_24comm-w{w}_dense-s604/{name}" for w in (64, 128) for name in land.KEPT)
    assert git("diff", "--cached", "--name-only").split() == ["staged.txt"]  # staged before: still only staged
    finish(floor, source, 605)
    alone = subprocess.run(command + ["605"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert alone.returncode == 1 and "seed 605 has no study run in" in alone.stderr


def test_wait_stops_in_one_line_when_the_sweep_has_logged_nothing_for_too_long(arm, monkeypatch):
    sweep, source, runs = arm
    finish(sweep, source, 604), study_run(runs, 604)
    os.remove(source / sweep["name"] / "shakespeare_char_24comm-w64h_half-s604" / "result.json")  # never ends
    monkeypatch.setattr(land, "STALLED_S", -1)  # every log is older than that: the sweep is taken for stopped
    monkeypatch.setattr(land.time, "sleep", lambda s: pytest.fail("waited although the sweep had stopped"))
    monkeypatch.setattr(sys, "argv", ["land", os.path.join(STUDY, "sweep_horizon_w64.py"), "--from", str(source),
                                      "--runs", str(runs), "--seeds", "604", "--wait"])
    with pytest.raises(SystemExit, match=r"no run of width_alone_horizon_w64 has written its train.log for .* minutes"):
        land.main()
    assert sorted(os.listdir(runs)) == ["shakespeare_char_24comm-w64_ref24-s604"]  # nothing landed


def test_runs_recorded_below_the_hosts_own_kernels_land_only_with_a_committed_repro_record(arm, tmp_path):
    """Amendment 3, through the command: a run whose CPU kernel ISA is below what this host reaches ran under ISA
    ceilings; without --repro it is refused, and a record not committed as it is does not let it land either."""
    sweep, source, runs = arm
    ceiled = {**AMD, "cpu_capability": "DEFAULT"}  # below any x86 host's own: ceilings, wherever this test runs
    finish(sweep, source, 604, numerics=ceiled), study_run(runs, 604, ceiled)
    (tmp_path / "r.json").write_text(json.dumps({"P": P, "variables": "", "runs": {}}))
    command = [sys.executable, "-m", "bench.studies.width_alone.land", os.path.join(STUDY, "sweep_horizon_w64.py"),
               "--from", str(source), "--runs", str(runs), "--seeds", "604"]
    env = {**os.environ, "WIDTH_ALONE_STATE": str(tmp_path)}
    bare = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert bare.returncode == 1 and bare.stderr.strip().count("\n") == 0
    assert "recorded DEFAULT kernels on a host whose kernels reach AVX" in bare.stderr and "only with --repro" in bare.stderr
    loose = subprocess.run(command + ["--repro", str(tmp_path / "r.json")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert loose.returncode == 1 and "r.json: not committed as it is" in loose.stderr
    assert sorted(os.listdir(runs)) == ["shakespeare_char_24comm-w64_ref24-s604"]  # nothing landed
