"""train.py end to end on tiny models: training, logging, resume, DDP, wandb, user errors."""

import glob
import json
import os
import shutil

import pytest

from bench.harness import records, run_train, torchrun
from conftest import TINY, assert_one_line_error


def train_losses(out_dir):
    return {r["iter"]: r["train_loss"] for r in records(out_dir) if "val_loss" not in r}


def test_short_run_trains_and_logs(char_data, tmp_path):
    out = str(tmp_path / "out")
    result = run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={out}", "--max_iters=40",
                       "--tp_size=2", "--block_types=parallel,spd")
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    for part in ("dp=1 x tp=2 (sim, 1 process)", "blocks: [parallel,spd] x2", "sync points: 2 per pass",
                 "loss model: none", "params:", "tokens/iter: 256"):
        assert part in first, first
    recs = records(out)
    evals = [r for r in recs if "val_loss" in r]
    steps = [r for r in recs if "val_loss" not in r]
    assert [r["iter"] for r in evals] == [0, 10, 20, 30, 40]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"] - 0.5  # it learns
    for r in steps:
        assert {"iter", "train_loss", "lr", "ms_per_iter", "tokens_per_s", "mfu", "sync_points"} <= set(r)
        assert r["sync_points"] == 2 and r["syncs_measured"] == 2
    for r in evals:
        assert {"iter", "train_loss", "val_loss", "val_perplexity", "val_accuracy", "lr"} <= set(r)
    config = json.load(open(os.path.join(out, "config.json")))
    assert config["lr_decay_iters"] == 40  # follows max_iters when not set
    assert os.path.exists(os.path.join(out, "ckpt.pt"))


def test_a_run_in_the_test_process_is_the_run_in_its_own(char_data, tmp_path):
    """The tests run train.py in their own process (bench.harness.train_here); it must be the run a
    fresh process makes: the same records bit for bit but timing, the same stdout lines but timing."""
    from bench.harness import run, train_here
    import sys
    args = [*TINY, f"--data_dir={char_data}", "--max_iters=6", "--tp_size=2", "--block_types=spd",
            "--loss_model=bernoulli", "--loss_rate=0.05", "--packet_bytes=64"]
    here, alone = str(tmp_path / "here"), str(tmp_path / "alone")
    a = train_here(*args, f"--out_dir={here}")
    b = run([sys.executable, "train.py", *args, f"--out_dir={alone}"])
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    timing = {"ms_per_iter", "tokens_per_s", "mfu", "time_s"}
    assert [{k: v for k, v in r.items() if k not in timing} for r in records(here)] == \
           [{k: v for k, v in r.items() if k not in timing} for r in records(alone)]
    assert a.stdout.splitlines()[0] == b.stdout.splitlines()[0].replace(alone, here)
    bad = train_here(*args, "--max_iters=-1", f"--out_dir={here}")  # a user mistake: status 1, one line, no traceback
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1 and "max_iters" in bad.stderr


# (slow) the hide-and-shrink schemes over a lossy link (DESIGN section 8), and MoE with Muon; the plain
# resume of the fast tier is test_lossy.py's (a lossy parallel,spd run, whose link streams go on too)
@pytest.mark.slow
@pytest.mark.parametrize("extra", [["--block_types=ladder,parallel", "--sync_fraction=0.5", "--sync_dtype=int8",
                                    "--loss_model=bernoulli", "--loss_rate=0.05", "--packet_bytes=64"],
                                   ["--n_experts=4", "--optimizer=muon"]],
                         ids=["ladder-partial-int8-bernoulli", "moe-muon"])
def test_resume_continues_the_same_run(char_data, tmp_path, extra):
    common = [*TINY, f"--data_dir={char_data}", "--always_save_checkpoint=True", *extra, "--max_iters=20"]
    straight, broken = str(tmp_path / "straight"), str(tmp_path / "broken")
    assert run_train(*common, f"--out_dir={straight}").returncode == 0
    first = run_train(*common[:-1], "--max_iters=10", "--lr_decay_iters=20", f"--out_dir={broken}")
    assert first.returncode == 0, first.stderr
    second = run_train(*common, "--init_from=resume", f"--out_dir={broken}")
    assert second.returncode == 0, second.stderr
    assert "step 10:" in second.stdout and "iter 11:" in second.stdout and "iter 1:" not in second.stdout
    # same data, same schedule, same state: the same log, losses bit for bit (CPU, fp32)
    strip = [{k: v for k, v in r.items() if k not in ("ms_per_iter", "tokens_per_s", "mfu", "time_s")}
             for r in records(broken)]
    assert strip == [{k: v for k, v in r.items() if k not in ("ms_per_iter", "tokens_per_s", "mfu", "time_s")}
                     for r in records(straight)]


def test_24comm_control_follows_the_dense_loss_curve(char_data, tmp_path):
    curves = {}
    for name, args in {"dense": ["--tp_size=1"], "24comm": ["--tp_size=2", "--block_types=tp"]}.items():
        out = str(tmp_path / name)
        result = run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={out}", "--max_iters=15", *args)
        assert result.returncode == 0, result.stderr
        curves[name] = train_losses(out)
    assert curves["dense"].keys() == curves["24comm"].keys()
    for it, loss in curves["dense"].items():
        assert abs(curves["24comm"][it] - loss) < 1e-4, (it, loss, curves["24comm"][it])


@pytest.mark.slow
def test_user_mistakes_are_one_line_errors(char_data, tmp_path):
    base = [f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--max_iters=1"]
    assert_one_line_error(run_train(*base, "--n_layr=4"), "unknown config key 'n_layr'", "n_layer")
    assert_one_line_error(run_train(*base, "--max_iters=ten"), "max_iters")
    assert_one_line_error(run_train(*base, "--block_types=tp,spd,sdp"), "block_types", "sdp")
    assert_one_line_error(run_train(*base, "--block_types=tp,spd,spd,spd,spd"), "does not tile n_layer=12")
    assert_one_line_error(run_train(*base, "--tp_size=3"), "n_head=4 is not divisible by tp_size=3")
    assert_one_line_error(run_train(*base, "--init_from=resume"), "does not exist")
    assert_one_line_error(run_train(*base, "--dtype=fp8"), "dtype", "float32")
    assert_one_line_error(run_train(f"--data_dir={tmp_path}/nowhere", "--dataset=owt2", "--max_iters=1"),
                          "train.bin not found", "holds no prepared data (train.bin, val.bin)")
    assert_one_line_error(run_train("config/no_such_config.py"), "no_such_config.py", "does not exist")


@pytest.mark.slow
def test_a_new_run_never_overwrites_a_checkpoint(char_data, tmp_path):
    args = [*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--max_iters=10"]
    assert run_train(*args).returncode == 0
    before = os.path.getmtime(os.path.join(tmp_path, "ckpt.pt"))
    assert_one_line_error(run_train(*args), "ckpt.pt exists", "--init_from=resume")
    assert os.path.getmtime(os.path.join(tmp_path, "ckpt.pt")) == before
    # evaluating alone is allowed and leaves the run's files alone
    log = open(os.path.join(tmp_path, "metrics.jsonl")).read()
    assert run_train(*args, "--eval_only=True", "--init_from=resume").returncode == 0
    assert open(os.path.join(tmp_path, "metrics.jsonl")).read() == log
    assert json.loads(open(os.path.join(tmp_path, "eval.jsonl")).readline())["iter"] == 10


@pytest.mark.slow
def test_two_process_data_parallel_run(char_data, tmp_path):
    out = str(tmp_path / "ddp")
    result = torchrun(2, *TINY, f"--data_dir={char_data}", f"--out_dir={out}", "--max_iters=20",
                      "--gradient_accumulation_steps=2", "--tp_size=2", "--block_types=spd")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dp=2 x tp=2 (sim, 2 processes)" in result.stdout
    assert "tokens/iter: 512" in result.stdout  # 2 micro-batches in all, one per process
    evals = [r for r in records(out) if "val_loss" in r]
    assert len(evals) == 3 and evals[-1]["val_loss"] < evals[0]["val_loss"]
    bad = torchrun(2, *TINY, f"--data_dir={char_data}", f"--out_dir={out}", "--gradient_accumulation_steps=3")
    assert bad.returncode != 0 and "gradient_accumulation_steps=3 is not divisible" in bad.stderr


def test_a_config_mistake_under_torchrun_is_said_once(tmp_path):
    """A bad key value is found before the process group starts (train.py's config checks), by every rank:
    rank 0 says it and exits, the others wait (faults.fail) for torchrun to end them, not each saying it."""
    result = torchrun(2, *TINY, f"--out_dir={tmp_path}", "--sync_fraction=0")
    assert_one_line_error(result, "error: sync_fraction=0.0 must be in (0, 1]")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wandb") is None, reason="wandb not installed")
def test_wandb_offline(char_data, tmp_path):
    out = str(tmp_path / "wb")
    result = run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={out}", "--max_iters=3",
                       "--wandb_log=True", env={"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert glob.glob(os.path.join(tmp_path, "wandb", "offline-run-*"))


def test_a_wandb_that_cannot_start_is_one_line(char_data, tmp_path, monkeypatch):
    """A GPU node without a wandb login (config/train_gpt2.py sets wandb_log=True): wandb.init raises, and the
    user gets one line naming the ways out, not wandb's traceback (a stand-in wandb whose init raises)."""
    import sys
    import types

    def refuse(**kwargs):
        raise RuntimeError("api_key not configured (no-tty)\ncall wandb.login(key=[your_api_key])")
    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=refuse))
    result = run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path / 'wb'}", "--max_iters=1", "--wandb_log=True")
    assert_one_line_error(result, "wandb.init failed (RuntimeError)", "wandb login", "--wandb_log=False")


@pytest.mark.slow
def test_a_resume_keeps_its_run_and_takes_this_configs_optimizer_settings(char_data, tmp_path):
    """Resuming with another seed or sync_fraction would splice two runs into one log: refused in one line.
    A changed weight decay is this config's from the resume on (config.json says so), not the checkpoint's."""
    import torch
    args = [*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--always_save_checkpoint=True",
            "--eval_interval=2", "--eval_iters=1"]
    assert run_train(*args, "--max_iters=2", "--weight_decay=0.1").returncode == 0
    assert_one_line_error(run_train(*args, "--max_iters=4", "--init_from=resume", "--seed=7"),
                          "resume:", "has seed=1337, this config has seed=7")
    assert_one_line_error(run_train(*args, "--max_iters=4", "--init_from=resume", "--sync_fraction=0.5"),
                          "has sync_fraction=1.0, this config has sync_fraction=0.5")
    assert run_train(*args, "--max_iters=4", "--init_from=resume", "--weight_decay=0.3").returncode == 0
    saved = torch.load(os.path.join(tmp_path, "ckpt.pt"), weights_only=False)
    assert saved["config"]["weight_decay"] == 0.3
    assert [g["weight_decay"] for g in saved["optimizer"]["param_groups"]] == [0.3, 0.0]
