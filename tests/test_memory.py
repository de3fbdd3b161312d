"""The memory features of train.py: ZeRO-1 (zero_stage=1: AdamW's state sharded over the
data-parallel ranks) and activation checkpointing (activation_checkpointing='block'). Each
changes where memory goes, never the run: the same losses, counts and packets as the plain run
of the same seed, and checkpoints any layout can resume."""

import sys

import pytest
import torch

from bench.harness import LINKS, link_args, records, run, run_train, torchrun
from conftest import SMALL, assert_one_line_error


def train(char_data, out_dir, *extra, procs=1, pattern="spd", link="bernoulli"):
    args = [*SMALL, f"--data_dir={char_data}", f"--block_types={pattern}", "--tp_size=2",
            *link_args(LINKS[link]), f"--out_dir={out_dir}", *extra]
    result = run_train(*args) if procs == 1 else torchrun(procs, *args)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def assert_identical(a, b, moved_more=False):
    """Two runs' records agree exactly: the feature moved memory, not numbers. moved_more: b's collectives
    were handed more bytes than a's (a `dist` recompute repeats its syncs' traffic), everything else equal."""
    ra, rb = records(a), records(b)
    assert len(ra) == len(rb) and len([r for r in ra if "val_loss" not in r]) >= 5
    skip = {"ms_per_iter", "tokens_per_s", "time_s", "mfu"} | ({"sync_bytes_moved_per_token"} if moved_more else set())
    if moved_more:
        steps = [(x, y) for x, y in zip(ra, rb) if "val_loss" not in x]
        assert all(y["sync_bytes_moved_per_token"] > x["sync_bytes_moved_per_token"] == x["sync_bytes_per_token"]
                   for x, y in steps)
    for x, y in zip(ra, rb):
        assert {k: v for k, v in x.items() if k not in skip} == {k: v for k, v in y.items() if k not in skip}


def test_zero1_equals_adamw_dp2(char_data, tmp_path):
    plain, zero = tmp_path / "plain", tmp_path / "zero"
    train(char_data, plain, "--gradient_accumulation_steps=2", procs=2)
    result = train(char_data, zero, "--gradient_accumulation_steps=2", "--zero_stage=1", procs=2)
    assert "zero_stage: 1" in result.stdout
    assert_identical(plain, zero)


@pytest.mark.slow
def test_zero1_checkpoint_is_plain_adamw_and_resumes_in_any_layout(char_data, tmp_path):
    """A ZeRO-1 checkpoint holds the consolidated AdamW state: equal to the plain run's, and a run
    with another zero_stage and another number of data-parallel ranks resumes from it."""
    common = ["--gradient_accumulation_steps=2", "--always_save_checkpoint=True", "--lr_decay_iters=9"]
    plain, zero, hop = tmp_path / "plain", tmp_path / "zero", tmp_path / "hop"
    train(char_data, plain, *common, "--max_iters=9", procs=2)
    train(char_data, zero, *common, "--max_iters=3", "--zero_stage=1", procs=2)
    train(char_data, hop, *common, "--max_iters=3", procs=2)
    saved_zero, saved_plain = (torch.load(d / "ckpt.pt", weights_only=False) for d in (zero, hop))
    assert saved_zero["optimizer"]["param_groups"] == saved_plain["optimizer"]["param_groups"]
    for index, state in saved_plain["optimizer"]["state"].items():
        for key, value in state.items():
            assert torch.equal(value, saved_zero["optimizer"]["state"][index][key]), (index, key)
    # ZeRO-1 -> plain, same dp: the unbroken plain run's numbers
    train(char_data, zero, *common, "--max_iters=9", "--init_from=resume", procs=2)
    assert_identical(plain, zero)
    # plain dp=2 -> ZeRO-1 dp=2 -> plain dp=1: resumes (dp=1 draws other batches, so not equal)
    train(char_data, hop, *common, "--max_iters=6", "--init_from=resume", "--zero_stage=1", procs=2)
    straight = records(plain)[:len(records(hop))]
    assert [r["train_loss"] for r in records(hop)] == [r["train_loss"] for r in straight]
    result = train(char_data, hop, *common, "--max_iters=9", "--init_from=resume")
    assert "resumed at iter 6" in result.stdout


def test_zero_stage_must_be_0_or_1(char_data, tmp_path):
    assert_one_line_error(run_train(*SMALL, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--zero_stage=2"),
                          "zero_stage=2", "allowed values are 0, 1")


@pytest.mark.parametrize("link", [pytest.param("lossless", marks=pytest.mark.slow), "bernoulli"])
def test_activation_checkpointing_changes_no_number(char_data, tmp_path, link):
    plain, recomputed = tmp_path / "plain", tmp_path / "recomputed"
    train(char_data, plain, pattern="tp,parallel", link=link)
    result = train(char_data, recomputed, "--activation_checkpointing=block", pattern="tp,parallel", link=link)
    assert "activation checkpointing: block" in result.stdout
    assert_identical(plain, recomputed)


@pytest.mark.slow
def test_activation_checkpointing_in_dist_mode(char_data, tmp_path):
    """One process per TP rank: the recompute repeats the collective, with the forward's packets."""
    plain, recomputed = tmp_path / "plain", tmp_path / "recomputed"
    train(char_data, plain, "--tp_mode=dist", procs=2, pattern="tp,parallel", link="gilbert_elliott")
    train(char_data, recomputed, "--tp_mode=dist", "--activation_checkpointing=block", procs=2,
          pattern="tp,parallel", link="gilbert_elliott")
    assert_identical(plain, recomputed, moved_more=True)
    # ladder, lossless: its syncs in flight (forward and, without the recompute, backward) give the same numbers
    plain, recomputed = tmp_path / "ladder", tmp_path / "ladder_recomputed"
    train(char_data, plain, "--tp_mode=dist", procs=2, pattern="ladder", link="lossless")
    train(char_data, recomputed, "--tp_mode=dist", "--activation_checkpointing=block", procs=2, pattern="ladder", link="lossless")
    assert_identical(plain, recomputed, moved_more=True)


@pytest.mark.slow
def test_zero1_in_dist_mode_dp2_tp2(char_data, tmp_path):
    plain, zero = tmp_path / "plain", tmp_path / "zero"
    train(char_data, plain, "--tp_mode=dist", "--gradient_accumulation_steps=2", procs=4)
    train(char_data, zero, "--tp_mode=dist", "--gradient_accumulation_steps=2", "--zero_stage=1", procs=4)
    assert_identical(plain, zero)


# a measurement of bench/memory.py, not an identity: the slow tier
@pytest.mark.slow
@pytest.mark.timeout(480)  # 161 s with the cores shared four ways
def test_the_features_save_the_memory_they_promise():
    """bench/memory.py's char rows (fake tensors, MemTracker): ZeRO-1 at dp=2 holds at most about
    half of AdamW's state per rank, and checkpointing keeps a fraction of the activations."""
    result = run([sys.executable, "-m", "bench.memory", "--shapes", "char", "--sequence_parallel"])
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {}
    for line in result.stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].startswith("char"):
            rows[int(cells[1]), cells[2], cells[3]] = [float(c.replace(",", "")) for c in cells[4:10]]
    params, _, activations, optimizer, _, total = rows[0, "none", "no"]
    assert optimizer == pytest.approx(2 * params, rel=0.01)  # AdamW: two moments per parameter
    assert rows[1, "none", "no"][3] <= 0.6 * optimizer  # ZeRO-1: this rank's share (partitions by whole tensors)
    assert rows[0, "block", "no"][2] < 0.25 * activations  # 12 blocks: about one block's activations at a time
    assert rows[1, "block", "no"][5] < rows[0, "block", "no"][5] < rows[0, "none", "no"][5]
    # sequence parallelism at T=2: each tp block's two LayerNorm inputs and two outputs (the linear layers'
    # inputs), B*L*C float32 each, kept as half; at least half of that analytic saving is measured
    saving = 12 * 4 * 32 * 128 * 64 * 4 / 2 / 2 ** 20
    assert rows[0, "none", "yes"][2] < activations - saving / 2
    assert rows[0, "block", "yes"][2] < rows[0, "block", "no"][2]


@pytest.mark.slow
def test_a_new_run_takes_a_checkpoints_adamw_state_under_zero1(char_data, tmp_path):
    """init_from=<ckpt> with init_optimizer=True: ZeRO-1 ranks take their shares of the saved
    moments. The run then equals the plain run's (same weights, same moments, same batches)."""
    source = tmp_path / "source"
    train(char_data, source, "--gradient_accumulation_steps=2", "--always_save_checkpoint=True", "--max_iters=3",
          procs=2)
    runs = {}
    for name, extra in (("plain", ()), ("zero", ("--zero_stage=1",))):
        runs[name] = tmp_path / name
        result = train(char_data, runs[name], "--gradient_accumulation_steps=2", f"--init_from={source / 'ckpt.pt'}",
                       "--init_optimizer=True", "--max_iters=6", *extra, procs=2)
        assert "optimizer state loaded" in result.stdout
    assert_identical(runs["plain"], runs["zero"])
