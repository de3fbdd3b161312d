"""bench/op_count.py: the kernels a training step launches, counted (a launch-bound GPU step pays
for each). Counts are exact, not timings: the dense step must launch no kernel beyond the plain
GPT-2's, and the fused 24comm step only the reassembly of its sharded weights."""

import os

import pytest

from conftest import ROOT

NANOGPT = os.path.expanduser(os.path.join("~", ".cache", "tp-sync", "nanoGPT"))


def load():
    from bench import op_count
    return op_count


def kernels(op_count, pattern, tp_size):
    from bench.harness import build, random_batch
    args = dict(n_layer=4, n_head=4, n_embd=32, block_size=16, vocab_size=65, bias=True, dropout=0.0,
                tp_size=tp_size, block_types=pattern)
    x, y = random_batch(65, 4, 16)
    return op_count.kernel_calls(op_count.count_calls(build(args)[0], x, y))


def test_dense_launches_no_copies_of_its_weights_and_fused_tp_only_their_reassembly():
    op_count = load()
    dense, tp = kernels(op_count, "tp", 1), kernels(op_count, "tp", 2)
    # weight[0] once made two kernels per weight in the backward (a zero fill, a copy), and a
    # bias / tp_size at one rank a division in each pass
    assert not {"aten.select_backward", "aten.div", "aten.mul"} & set(dense), dense
    # the fused sum launches the dense step's kernels (the gradients of q, k, v joined by a cat
    # of split views there, a stack of unbound ones here: one kernel per layer either way) and
    # copies of the reassembled weights (c_attn and both row-parallel layers), nothing else
    assert dense - tp == {"aten.stack": 4}, dense - tp
    extra = tp - dense
    assert extra.pop("aten.cat") == 4 and set(extra) <= {"aten.clone", "aten.new_empty_strided", "aten.copy_"}, extra


@pytest.mark.skipif(not os.path.isfile(os.path.join(NANOGPT, "model.py")), reason="no nanoGPT checkout")
def test_dense_launches_the_kernels_of_nanogpts_model():
    op_count = load()
    config = dict(n_layer=12, n_head=4, n_embd=64, block_size=128, bias=True, dropout=0.0)
    from bench.harness import build, random_batch
    x, y = random_batch(65, 8, 128)
    mine = op_count.kernel_calls(op_count.count_calls(build(dict(config, vocab_size=65, tp_size=1))[0], x, y))
    theirs = op_count.kernel_calls(op_count.count_calls(op_count.nanogpt_model(NANOGPT, config, 65), x, y))
    # the one difference: q, k, v split from one tensor by stack-free views there, cat'd heads here
    assert mine - theirs == {"aten.stack": 12} and theirs - mine == {"aten.cat": 12}, (mine - theirs, theirs - mine)
