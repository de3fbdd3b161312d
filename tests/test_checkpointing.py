"""Activation checkpointing (train.py's activation_checkpointing='block'): each block's
activations are recomputed in the backward pass. The recompute computes the function the
forward computed: the same loss and gradients, no sync counted twice, and a lossy link hands
back the packets the forward saw instead of drawing new ones (its streams and statistics end
exactly where a run without checkpointing leaves them)."""

import contextlib

import pytest
import torch

from comms import SimComm
from links import link_from
from masks import Drawn
from model import GPT, GPTConfig

PATTERNS = {"24comm": "tp", "7comm": "spd,parallel", "2comm": "parallel*5,spd"}  # n_layer=6: 12, 3+1, 1 syncs
LINKS = {"lossless": {},
         "bernoulli": {"loss_model": "bernoulli", "loss_rate": 0.05, "packet_bytes": 64},
         "bursty_fwd": {"loss_model": "gilbert_elliott", "ge_preset": "heavy", "loss_bwd": False, "packet_bytes": 64}}


def build(pattern, link, checkpointing, dropout=0.0, n_experts=0, sequence_parallel=False):
    torch.manual_seed(0)
    config = GPTConfig(block_size=16, vocab_size=37, n_layer=6, n_head=4, n_embd=32, tp_size=2,
                       block_types=pattern, dropout=dropout, n_experts=n_experts)
    model = GPT(config, SimComm(2, link_from(dict(LINKS[link], seed=5)), sequence_parallel=sequence_parallel))
    model.activation_checkpointing = checkpointing
    return model


def steps(model, n=2):
    """n forward/backward passes (gradients accumulate); the losses, gradients and what was counted."""
    losses = []
    model.comm.counter.reset()
    for k in range(n):
        idx = torch.randint(37, (3, 16), generator=torch.Generator().manual_seed(k))
        _, loss = model(idx, idx)
        loss.backward()
        losses.append(loss.detach())
    counter, link = model.comm.counter, model.comm.link
    counts = (counter.forward, counter.backward, counter.points, counter.sync_bytes)
    stats = link.stats() if link.lossy else None
    return torch.stack(losses), {name: p.grad for name, p in model.named_parameters()}, counts, stats


@pytest.mark.parametrize("sequence_parallel", [False, True])  # SP: each half's masks taped and replayed
@pytest.mark.parametrize("link", sorted(LINKS))
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_checkpointing_computes_the_same_function(pattern, link, sequence_parallel):
    plain, checkpointed = (build(PATTERNS[pattern], link, flag, sequence_parallel=sequence_parallel) for flag in (False, True))
    loss, grads, counts, stats = steps(plain)
    loss_c, grads_c, counts_c, stats_c = steps(checkpointed)
    assert torch.equal(loss, loss_c)
    for name in grads:  # the recompute repeats the forward's operations: the same numbers
        assert torch.allclose(grads[name], grads_c[name], rtol=0, atol=1e-7), name
    assert counts == counts_c  # nothing counted twice
    assert counts[0] == counts[1] == 2 * plain.sync_points
    # recomputed, uncounted: the attention sync of each tp block (its MLP needs the synced state);
    # the recompute stops early, after the last op whose saved tensors the backward needs, so a
    # block's closing sync (it saves nothing) is not run again
    assert checkpointed.comm.counter.recomputed == 2 * plain.config.block_types.count("tp")
    assert stats == stats_c  # the same packets sent and lost: the recompute drew nothing
    if plain.comm.link.lossy:
        assert type(checkpointed.comm.link.source) is Drawn  # each block's tape lives with its graph, not on the link
        for key, stream in plain.comm.link.streams.items():  # the streams stand where the plain run left them
            assert torch.equal(stream.generator.get_state(), checkpointed.comm.link.streams[key].generator.get_state())


def test_checkpointing_recomputes_the_experts_routing():
    """MoE blocks (moe.py) whose ranks route different states, over a lossy link: the recompute
    chooses the experts the forward chose (the same loss, load-balancing term and gradients)."""
    plain, checkpointed = (build(PATTERNS["7comm"], "bernoulli", flag, n_experts=4) for flag in (False, True))
    loss, grads, counts, stats = steps(plain)
    loss_c, grads_c, counts_c, stats_c = steps(checkpointed)
    assert torch.equal(loss, loss_c) and counts == counts_c and stats == stats_c
    for name in grads:
        assert torch.allclose(grads[name], grads_c[name], rtol=0, atol=1e-7), name


def test_a_recompute_that_drew_new_masks_would_be_caught():
    """The comparison above can fail: a recompute with its own masks gives other gradients."""
    plain, checkpointed = build("tp", "bernoulli", False), build("tp", "bernoulli", True)
    checkpointed.comm.checkpoint_contexts = lambda: (contextlib.nullcontext(), contextlib.nullcontext())
    _, grads, counts, _ = steps(plain)
    _, grads_c, counts_c, _ = steps(checkpointed)
    assert counts != counts_c  # the recompute counted its syncs again
    assert any(not torch.allclose(grads[n], grads_c[n], rtol=0, atol=1e-7) for n in grads)


def test_checkpointing_keeps_the_dropout_masks():
    """torch.utils.checkpoint restores the RNG state for the recompute: dropout draws the same."""
    plain, checkpointed = build("spd", "lossless", False, 0.2), build("spd", "lossless", True, 0.2)
    torch.manual_seed(3)
    loss, grads, _, _ = steps(plain)
    torch.manual_seed(3)
    loss_c, grads_c, _, _ = steps(checkpointed)
    assert torch.equal(loss, loss_c)
    for name in grads:
        assert torch.allclose(grads[name], grads_c[name], rtol=0, atol=1e-7), name


def test_evaluation_does_not_checkpoint():
    """Without gradients there is nothing to recompute: no recording, nothing left on the tape."""
    model = build("tp", "bernoulli", True)
    with torch.no_grad():
        model(torch.zeros(2, 16, dtype=torch.long))
    assert model.comm.counter.recomputed == 0 and type(model.comm.link.source) is Drawn


@pytest.mark.parametrize("link", ["lossless", "bernoulli"])
def test_checkpointing_under_torch_compile(link):
    """Compiled with checkpointing: the eager run's loss, gradients, counts and packets."""
    torch._dynamo.reset()
    plain, checkpointed = build("tp", link, False), build("tp", link, True)
    loss, grads, counts, stats = steps(plain)
    checkpointed.forward = torch.compile(checkpointed.forward, backend="aot_eager")
    loss_c, grads_c, counts_c, stats_c = steps(checkpointed)
    torch._dynamo.reset()
    assert torch.allclose(loss, loss_c, rtol=0, atol=1e-6)
    for name in grads:
        assert torch.allclose(grads[name], grads_c[name], rtol=1e-4, atol=1e-7), name
    assert counts == counts_c and stats == stats_c
