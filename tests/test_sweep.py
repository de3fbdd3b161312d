"""bench/sweep.py and bench/summarize.py on tiny runs: CSV rows, plots, skipping, resuming."""

import csv
import glob
import json
import os
import sys

import pytest

from bench.harness import run, run_tool, run_train
from conftest import ROOT, TINY

SWEEP = ["-m", "bench.sweep"]
COMMITTED_SWEEPS = sorted(glob.glob(os.path.join(ROOT, "bench", "studies", "*", "sweep.py")))


def study(path):
    return os.path.basename(os.path.dirname(path))


def test_every_study_folder_has_its_plan_sweep_and_findings():
    """bench/studies/<name>/: the plan, the sweep file, the findings; runs/ where its logs are committed."""
    folders = sorted(glob.glob(os.path.join(ROOT, "bench", "studies", "*", "")))
    assert len(COMMITTED_SWEEPS) >= 8 and len(folders) >= len(COMMITTED_SWEEPS)
    for folder in folders:
        assert os.path.isfile(os.path.join(folder, "plan.md")), folder
        assert os.path.isfile(os.path.join(folder, "findings.md")), folder


def test_every_rerun_command_in_the_findings_finds_its_sweep_file_at_its_commit():
    """A findings.md command that retrains a study from a worktree at the runs' commit must find the sweep file
    there: in that commit's tree, or fetched by `git show <commit>:<path> > <path>` first (a sweep file added after
    the runs' commit). Read from git, so it needs the repository's history (a clone has it)."""
    import re
    import subprocess
    if subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("no git history here")
    commands = []
    for path in glob.glob(os.path.join(ROOT, "bench", "studies", "*", "findings.md")):
        commands += [(path, line) for line in open(path) if "git worktree add" in line]
    assert len(commands) >= 6
    for path, line in commands:
        commit = re.search(r"git worktree add \S+ ([0-9a-f]{7,40})", line).group(1)
        sweep = re.search(r"python (?:-m )?bench[/.]sweep(?:\.py)? (\S+)", line).group(1)
        fetched = {file: source for source, file in re.findall(r"git show ([0-9a-f]{7,40}):(\S+) > \S+", line)}
        source = f"{fetched[sweep]}:{sweep}" if sweep in fetched else f"{commit}:{sweep}"
        found = subprocess.run(["git", "-C", ROOT, "cat-file", "-e", source], capture_output=True)
        assert found.returncode == 0, f"{os.path.relpath(path, ROOT)}: {source} is not in git: {line.strip()}"


@pytest.mark.parametrize("path", COMMITTED_SWEEPS, ids=study)
def test_every_committed_sweep_file_still_plans(path, tmp_path, monkeypatch):
    """A committed sweep file is the record of a study and the command that reruns it: its keys, its
    config files and every override must still pass train.py's validation, so that a renamed config
    key fails here instead of after the first hours of a rerun."""
    from bench import sweep as sweeps
    monkeypatch.chdir(ROOT)  # sweep files name configs relative to the repo, as the README runs them
    try:
        study = sweeps.load_sweep(path)
        runs = sweeps.plan(study, str(tmp_path))
    except SystemExit as e:  # sweep.py's one-line errors
        pytest.fail(f"{study(path)}: {e}")
    assert len(runs) == len(study["configs"]) * len(study["settings"]) * len(study["seeds"])
    assert not os.listdir(tmp_path)  # planning creates nothing


def test_a_sweep_file_with_a_stale_override_fails_to_plan(tmp_path, monkeypatch):
    """The check above can fail: an override that train.py no longer knows is sweep.py's one-line error."""
    from bench import sweep as sweeps
    monkeypatch.chdir(ROOT)
    stale = tmp_path / "stale.py"
    stale.write_text('name = "stale"\nconfigs = ["config/train_shakespeare_char_24comm.py"]\n'
                     'settings = {"bern": {"loss_model": "bernoulli", "drop_rate": 0.01}}\n')
    with pytest.raises(SystemExit, match="unknown config key 'drop_rate'"):
        sweeps.plan(sweeps.load_sweep(str(stale)), str(tmp_path / "runs"))
    # a value train.py would refuse at startup, and a block pattern it cannot parse: refused while planning too
    for setting, message in (('{"loss_model": "bernouli"}', "loss_model='bernouli'"),
                             ('{"loss_rate": 0.01}', "loss_rate"),
                             ('{"block_types": "tp,foo"}', "foo")):
        stale.write_text(f'name = "stale"\nconfigs = ["config/train_shakespeare_char_24comm.py"]\nsettings = {{"x": {setting}}}\n')
        with pytest.raises(SystemExit, match=message):
            sweeps.plan(sweeps.load_sweep(str(stale)), str(tmp_path / "runs"))


def write_sweep(tmp_path, char_data):
    common = {a[2:].split("=")[0]: a.split("=", 1)[1] for a in TINY}
    common.update(data_dir=char_data, max_iters="20", n_layer="12", eval_interval="10")
    text = f"""
name = "tiny"
configs = ["config/train_shakespeare_char_24comm.py", "config/train_shakespeare_char_2comm.py"]
seeds = [1, 2]
settings = {{"": {{}}, "bern": {{"loss_model": "bernoulli", "loss_rate": 0.05, "packet_bytes": 64}}}}
common = {{{", ".join(f"{k!r}: {v!r}" for k, v in common.items())}}}
"""
    path = tmp_path / "tiny_sweep.py"
    path.write_text(text)
    return str(path)


@pytest.mark.slow
@pytest.mark.timeout(480)  # 157 s with the cores shared four ways
def test_sweep_runs_summarizes_skips_and_resumes(char_data, tmp_path):
    sweep = write_sweep(tmp_path, char_data)
    out = tmp_path / "runs"
    run_dir = out / "tiny" / "shakespeare_char_2comm-bern-s2"
    # an interrupted run: the same arguments, stopped at iteration 10 with its checkpoint
    first_half = run_train("config/train_shakespeare_char_2comm.py",
                           *TINY, f"--data_dir={char_data}", "--n_layer=12", "--eval_interval=10",
                           "--loss_model=bernoulli", "--loss_rate=0.05", "--packet_bytes=64", "--seed=2",
                           "--max_iters=10", "--lr_decay_iters=20", "--always_save_checkpoint=True",
                           f"--out_dir={run_dir}")
    assert first_half.returncode == 0, first_half.stderr
    result = run([sys.executable, *SWEEP, sweep, "--out", str(out), "--threads", "1"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8 runs, 0 done, 8 to run (1 to resume)" in result.stdout
    assert "[8/8]" in result.stdout and "ETA" in result.stdout
    log = (run_dir / "train.log").read_text()
    assert "step 10:" in log and "iter 11:" in log and "iter 1:" not in log  # resumed, not restarted

    with open(out / "tiny" / "experiment_summary.csv") as f:
        rows = list(csv.DictReader(f))
    runs = [r for r in rows if r["kind"] == "run"]
    aggregates = [r for r in rows if r["kind"] == "aggregate"]
    assert len(runs) == 8 and len(aggregates) == 4
    assert all(r["status"] == "done" and r["iters"] == "20" for r in runs)
    assert {r["sync_points"] for r in runs} == {"24", "2"}
    assert {r["n"] for r in aggregates} == {"2"}
    bern = [r for r in runs if r["loss_model"] == "bernoulli"]
    assert all(abs(float(r["observed_loss_rate"]) - 0.05) < 0.01 for r in bern)
    for a in aggregates:  # an aggregate is the mean of its seeds
        members = [float(r["final_val_loss"]) for r in runs if r["config"] == a["config"] and r["setting"] == a["setting"]]
        assert abs(float(a["final_val_loss"]) - sum(members) / 2) < 1e-5
    for png in ("val_loss_vs_syncs.png", "val_loss_curves.png", "val_loss_vs_loss_rate.png"):
        assert (out / "tiny" / png).stat().st_size > 10_000

    # the resumed run is the same run an unbroken sweep run would have been
    straight = tmp_path / "straight"
    assert run_train("config/train_shakespeare_char_2comm.py", *TINY, f"--data_dir={char_data}", "--n_layer=12",
                     "--eval_interval=10", "--loss_model=bernoulli", "--loss_rate=0.05", "--packet_bytes=64",
                     "--seed=2", "--max_iters=20", f"--out_dir={straight}").returncode == 0
    losses = lambda d: [r.get("val_loss", r["train_loss"]) for r in map(json.loads, open(d / "metrics.jsonl"))]  # noqa
    assert losses(run_dir) == losses(straight)

    # a second sweep finds everything done: nothing runs, nothing is overwritten
    stamp = os.path.getmtime(run_dir / "result.json")
    again = run([sys.executable, *SWEEP, sweep, "--out", str(out), "--no_summary"])
    assert again.returncode == 0 and "8 done, 0 to run" in again.stdout and "[1/" not in again.stdout
    assert os.path.getmtime(run_dir / "result.json") == stamp


@pytest.mark.slow
def test_sweep_reports_failures_and_bad_files(char_data, tmp_path):
    sweep = tmp_path / "bad.py"
    sweep.write_text('name = "bad"\nconfigs = ["config/train_shakespeare_char_24comm.py"]\n'
                     f'common = {{"data_dir": "{tmp_path}/missing", "max_iters": 2}}\n')
    result = run([sys.executable, *SWEEP, str(sweep), "--out", str(tmp_path / "runs"), "--no_summary"])
    assert result.returncode != 0 and "FAILED shakespeare_char_24comm-s1337" in result.stdout
    assert "train.bin not found" in result.stdout and "1 of 1 runs failed" in result.stderr
    typo = tmp_path / "typo.py"
    typo.write_text('name = "typo"\nconfigs = ["config/train_shakespeare_char_24comm.py"]\ncommon = {"max_iter": 2}\n')
    result = run([sys.executable, *SWEEP, str(typo), "--out", str(tmp_path / "runs")])
    assert result.returncode != 0 and "unknown config key 'max_iter'" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "runs" / "typo").exists()


@pytest.mark.slow
def test_summary_averages_seeds_of_one_setting_only(tmp_path):
    """Runs of one config file but another max_iters (two sweeps summarized together) are two
    settings, each averaged over its own seeds."""
    import configurator
    defaults = configurator.train_defaults()
    for iters, losses in ((600, (2.0, 2.2)), (3000, (1.5, 1.7))):
        for seed, loss in zip((1, 2), losses):
            run_dir = tmp_path / f"sweep{iters}" / f"shakespeare_char_24comm-s{seed}"
            run_dir.mkdir(parents=True)
            cfg = dict(defaults, seed=seed, max_iters=iters, out_dir=str(run_dir), block_types="tp")
            (run_dir / "config.json").write_text(json.dumps(cfg))
            records = [{"iter": 0, "val_loss": 4.0, "val_perplexity": 54.6, "val_accuracy": 0.1},
                       {"iter": 1, "train_loss": 3.0, "tokens_per_s": 100.0},
                       {"iter": 2, "train_loss": 2.9, "tokens_per_s": 100.0},
                       {"iter": iters, "val_loss": loss, "val_perplexity": 7.0, "val_accuracy": 0.4}]
            (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            (run_dir / "result.json").write_text(json.dumps(
                {"config": "config/train_shakespeare_char_24comm.py", "setting": ""}))
    out = tmp_path / "summary"
    result = run([sys.executable, "-m", "bench.summarize", str(tmp_path / "sweep600"),
                  str(tmp_path / "sweep3000"), "--out", str(out)])
    assert result.returncode == 0, result.stderr
    with open(out / "experiment_summary.csv") as f:
        aggregates = {r["iters"]: r for r in csv.DictReader(f) if r["kind"] == "aggregate"}
    assert set(aggregates) == {"600", "3000"}
    assert [aggregates[k]["n"] for k in ("600", "3000")] == ["2", "2"]
    assert abs(float(aggregates["600"]["final_val_loss"]) - 2.1) < 1e-9
    assert abs(float(aggregates["3000"]["final_val_loss"]) - 1.6) < 1e-9


@pytest.mark.slow
def test_sweep_through_submitits_local_executor(char_data, tmp_path):
    """--executor local: each run a submitit job on this machine, the same path a SLURM job takes;
    the same progress line, result.json per run, and a second sweep finds everything done."""
    pytest.importorskip("submitit")
    sweep = tmp_path / "tiny_local.py"
    common = {a[2:].split("=")[0]: a.split("=", 1)[1] for a in TINY}
    common.update(data_dir=char_data, max_iters="10", eval_interval="10", n_layer="12")
    sweep.write_text(f'name = "tiny_local"\nconfigs = ["config/train_shakespeare_char_24comm.py", '
                     f'"config/train_shakespeare_char_2comm.py"]\nseeds = [1]\ncommon = {common!r}\n')
    out = tmp_path / "runs"
    result = run([sys.executable, *SWEEP, str(sweep), "--out", str(out), "--executor", "local", "--slots", "2",
                  "--threads", "1", "--no_summary"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[2/2]" in result.stdout and "ETA" in result.stdout and "FAILED" not in result.stdout
    for stem in ("shakespeare_char_24comm", "shakespeare_char_2comm"):
        done = json.loads((out / "tiny_local" / f"{stem}-s1" / "result.json").read_text())
        assert done["final"]["iter"] == 10
        assert "step 10:" in (out / "tiny_local" / f"{stem}-s1" / "train.log").read_text()
    assert list((out / "tiny_local" / ".submitit").iterdir())  # submitit's own job folders
    again = run([sys.executable, *SWEEP, str(sweep), "--out", str(out), "--executor", "local", "--no_summary"])
    assert again.returncode == 0 and "2 done, 0 to run" in again.stdout


def test_a_missing_submitit_is_a_one_line_error(monkeypatch, tmp_path):
    """submitit is imported only for --executor local/slurm; without it, one line says how to get it."""
    from bench import sweep as sweeps
    monkeypatch.setitem(sys.modules, "submitit", None)  # `import submitit` now raises ImportError
    with pytest.raises(SystemExit, match="--executor slurm needs submitit, which is not installed: pip install submitit"):
        sweeps.SubmititExecutor("slurm", str(tmp_path))
    assert sweeps.ProcessExecutor()  # the default executor needs nothing more


def test_seeds_option_runs_only_those_seeds_of_the_sweep(tmp_path):
    """--seeds splits a study over machines by whole seeds: the dry run lists exactly their runs; a seed
    the sweep does not have, or a malformed list, is a one-line error."""
    from conftest import assert_one_line_error
    path = os.path.join(ROOT, "bench", "studies", "schemes", "sweep.py")
    result = run_tool("bench.sweep", path, "--seeds", "29,31-32", "--dry_run", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    listed = [line.split()[-1] for line in result.stdout.splitlines() if line.startswith("  new")]
    assert len(listed) == 3 * 16 and {r.rsplit("-s", 1)[1] for r in listed} == {"29", "31", "32"}
    assert_one_line_error(run_tool("bench.sweep", path, "--seeds", "5", "--dry_run"), "seed 5", "28, 29")
    assert_one_line_error(run_tool("bench.sweep", path, "--seeds", "abc", "--dry_run"), "'abc'")


@pytest.mark.slow
@pytest.mark.timeout(300)  # 74 s with the cores shared four ways
def test_device_sweep_packs_only_whole_seeds_and_two_sweeps_share_a_call(char_data, tmp_path):
    """bench/device_sweep.sh, as a lent GPU machine runs it (here on the CPU): each sweep packs its own
    finished seeds' logs without checkpoints, and a call cut off by its limit packs nothing."""
    import tarfile
    first = write_sweep(tmp_path, char_data)
    text = open(first).read().replace('"config/train_shakespeare_char_2comm.py"]', "]").replace(', "bern": {', ', "_b": {')
    for name in ("tiny_a", "tiny_b"):
        (tmp_path / f"{name}.py").write_text(text.replace('name = "tiny"', f'name = "{name}"'))
    for name in ("tiny_a", "tiny_b"):  # one after the other, as in one device call
        out = tmp_path / "out" / name
        result = run(["bash", os.path.join(ROOT, "bench", "device_sweep.sh"), str(tmp_path / f"{name}.py"), "1-2",
                      "abc123", "300"], env={"OUT": str(out)})  # run() adds the environment
        assert result.returncode == 0, result.stdout + result.stderr
        host = (out / "host.txt").read_text()
        assert "repo commit abc123" in host and "seeds kept (every run finished): 1 2; dropped (cut off): none" in host
        with tarfile.open(out / "runs.tgz") as tar:
            names = tar.getnames()
        runs = {n.split("/")[1] for n in names}
        assert runs == {f"shakespeare_char_24comm{s}-s{seed}" for s in ("", "-_b") for seed in (1, 2)}, names
        assert not any(n.endswith("ckpt.pt") for n in names) and any(n.endswith("result.json") for n in names)
    cut = tmp_path / "out" / "cut"
    result = run(["bash", os.path.join(ROOT, "bench", "device_sweep.sh"), str(tmp_path / "tiny_a.py"), "1-2",
                  "abc123", "1"], env={"OUT": str(cut)})
    assert "seeds kept (every run finished): none" in (cut / "host.txt").read_text(), result.stdout
    assert not (cut / "runs.tgz").exists()
