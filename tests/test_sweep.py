"""bench/sweep.py and bench/summarize.py on tiny runs: CSV rows, plots, skipping, resuming."""

import csv
import json
import os
import sys

from conftest import ROOT, TINY, run, run_train

SWEEP = os.path.join(ROOT, "bench", "sweep.py")


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
    result = run([sys.executable, SWEEP, sweep, "--out", str(out), "--threads", "1"])
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
    again = run([sys.executable, SWEEP, sweep, "--out", str(out), "--no_summary"])
    assert again.returncode == 0 and "8 done, 0 to run" in again.stdout and "[1/" not in again.stdout
    assert os.path.getmtime(run_dir / "result.json") == stamp


def test_sweep_reports_failures_and_bad_files(char_data, tmp_path):
    sweep = tmp_path / "bad.py"
    sweep.write_text('name = "bad"\nconfigs = ["config/train_shakespeare_char_24comm.py"]\n'
                     f'common = {{"data_dir": "{tmp_path}/missing", "max_iters": 2}}\n')
    result = run([sys.executable, SWEEP, str(sweep), "--out", str(tmp_path / "runs"), "--no_summary"])
    assert result.returncode != 0 and "FAILED shakespeare_char_24comm-s1337" in result.stdout
    assert "train.bin not found" in result.stdout and "1 of 1 runs failed" in result.stderr
    typo = tmp_path / "typo.py"
    typo.write_text('name = "typo"\nconfigs = ["config/train_shakespeare_char_24comm.py"]\ncommon = {"max_iter": 2}\n')
    result = run([sys.executable, SWEEP, str(typo), "--out", str(tmp_path / "runs")])
    assert result.returncode != 0 and "unknown config key 'max_iter'" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "runs" / "typo").exists()
