"""bench/gpu_compute.py times what one TP rank computes; its stand-in model must hold exactly a rank's
parameters: at one shard all of model.GPT's, at two the sharded matrices and column biases halved."""

import json

from bench.gpu_compute import SCALES, RankModel
from bench.harness import run_tool
from model import GPT, GPTConfig


def count(module):
    return sum(p.numel() for p in module.parameters())


def test_rank_model_holds_a_ranks_parameters():
    n_layer, n_head, d, T, vocab, _ = SCALES["tiny"]
    whole = count(GPT(GPTConfig(block_size=T, vocab_size=vocab, n_layer=n_layer, n_head=n_head, n_embd=d)))
    assert count(RankModel(n_layer, n_head, d, T, vocab, shards=1)) == whole
    sharded = n_layer * ((3 * d * d + 3 * d) + d * d + (4 * d * d + 4 * d) + 4 * d * d)  # qkv, proj, fc, proj: all but row biases
    assert count(RankModel(n_layer, n_head, d, T, vocab, shards=2)) == whole - sharded // 2


def test_runs_on_the_cpu_and_writes_every_time(tmp_path):
    out = tmp_path / "times.json"
    result = run_tool("bench.gpu_compute", "--scale", "tiny", "--device", "cpu", "--dtype", "float32",
                      "--compile", "off", "--rounds", "1", "--steps", "1", "--warmup", "0", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    times = json.loads(out.read_text())["ms"]
    assert len(times) == 6 and all(t["median"] > 0 for t in times.values())
    assert "| micro-step fwd+bwd, one TP=2 rank |" in result.stdout


def test_overlap_tool_runs_on_the_cpu_and_writes_every_row(tmp_path):
    """bench/gpu_overlap.py at a tiny size on the CPU (no streams there: it only has to run and record): every
    sublayer and pass, its three times, the hidden share with its interval, the message's bytes."""
    from bench.harness import run_tool
    from conftest import assert_one_line_error
    out = tmp_path / "overlap.json"
    result = run_tool("bench.gpu_overlap", "--scale", "tiny", "--device", "cpu", "--dtype", "float32", "--rounds", "2",
                      "--steps", "1", "--warmup", "0", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(out.read_text())
    _, _, d, T, _, B = SCALES["tiny"]
    assert found["message_bytes"] == B * T * d * 4 and "a CPU has no streams" in result.stdout
    assert [(r["sublayer"], r["passes"]) for r in found["rows"]] == [
        (s, p) for s in ("attention", "MLP") for p in ("forward", "forward + backward")]
    for r in found["rows"]:
        assert min(r["sublayer_ms"], r["transfer_ms"], r["together_ms"]) > 0 and len(r["hidden_ci"]) == 2
    assert_one_line_error(run_tool("bench.gpu_overlap", "--device", "cpu", "--rounds", "1"), "--rounds=1")
