"""bench/gpu_compute.py times what one TP rank computes; its stand-in model must hold exactly a rank's
parameters: at one shard all of model.GPT's, at two the sharded matrices and column biases halved."""

import json
import sys

from bench.gpu_compute import SCALES, RankModel
from conftest import run
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
    result = run([sys.executable, "-m", "bench.gpu_compute", "--scale", "tiny", "--device", "cpu", "--dtype", "float32",
                  "--compile", "off", "--rounds", "1", "--steps", "1", "--warmup", "0", "--out", str(out)], timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    times = json.loads(out.read_text())["ms"]
    assert len(times) == 6 and all(t["median"] > 0 for t in times.values())
    assert "| micro-step fwd+bwd, one TP=2 rank |" in result.stdout
