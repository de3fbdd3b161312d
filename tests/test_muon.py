"""optimizer='muon' (optim.py): torch's Muon on the blocks' matrices, AdamW on the rest, and an
update that does not depend on how the matrices are sharded."""

import pytest
import torch

from model import GPT, GPTConfig
from optim import MuonAdamW, muon_params

pytestmark = pytest.mark.skipif(not hasattr(torch.optim, "Muon"), reason="torch.optim.Muon needs torch >= 2.9")


def tiny(tp_size, n_experts=0):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=16, vocab_size=50, n_layer=2, n_head=4, n_embd=16, tp_size=tp_size,
                         block_types="tp", n_experts=n_experts))


def muon(model):
    return model.configure_optimizers(0.1, 1e-2, (0.9, 0.99), "cpu", optimizer="muon")


def test_dense_model_steps_as_torch_muon_and_adamw():
    """At TP=1 the matrices step exactly as torch.optim.Muon (match_rms_adamw) steps them, and the
    rest as torch.optim.AdamW: the same numbers, bit for bit, over three steps."""
    model = tiny(1, n_experts=2)
    optimizer = muon(model)
    assert isinstance(optimizer, MuonAdamW)
    matrices = {id(p) for p in muon_params(model)}
    assert len(matrices) == 2 * (2 + 2 * 2 + 1)  # per block: attention's 2, 2 experts x 2, the router
    assert all(id(p) in matrices for g in optimizer.param_groups if g.get("muon") for p in g["params"])
    # the references: each matrix as a 2-D leaf for torch.optim.Muon, the rest for torch.optim.AdamW
    params = [p for p in model.parameters()]
    copies = [p.detach().clone().reshape(p.shape[-2:]) if id(p) in matrices else p.detach().clone() for p in params]
    for c in copies:
        c.requires_grad_(True)
    decay = {id(p) for g in optimizer.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    ref_muon = torch.optim.Muon([c for p, c in zip(params, copies) if id(p) in matrices], lr=1e-2,
                                weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    ref_adamw = torch.optim.AdamW([
        {"params": [c for p, c in zip(params, copies) if id(p) not in matrices and id(p) in decay], "weight_decay": 0.1},
        {"params": [c for p, c in zip(params, copies) if id(p) not in matrices and id(p) not in decay],
         "weight_decay": 0.0}], lr=1e-2, betas=(0.9, 0.99))
    generator = torch.Generator().manual_seed(3)
    for _ in range(3):
        for p, c in zip(params, copies):
            grad = torch.randn(p.shape, generator=generator)
            p.grad, c.grad = grad.clone(), grad.clone().reshape(c.shape)
        optimizer.step()
        ref_muon.step()
        ref_adamw.step()
    for p, c in zip(params, copies):
        assert torch.equal(p.detach().reshape(c.shape), c.detach())


@pytest.mark.parametrize("T", [2, 4])
def test_the_update_does_not_depend_on_the_layout(T):
    """The same dense gradients, cut into T shards: after two steps the weights are the TP=1 model's,
    bit for bit (the momentum is elementwise; the orthogonalization sees the whole matrix)."""
    models = {1: tiny(1, n_experts=2), T: tiny(T, n_experts=2)}
    optimizers = {t: muon(m) for t, m in models.items()}
    generator = torch.Generator().manual_seed(4)
    for _ in range(2):
        dense_grads = {n: torch.randn(p.shape, generator=generator) for n, p in models[1].named_parameters()}
        for t, model in models.items():
            sharded = model._sharded_modules()
            for name, p in model.named_parameters():
                module = name.rpartition(".")[0]
                g = dense_grads[name]
                p.grad = sharded[module].shard(g[0]) if module in sharded and g.dim() >= 2 else g.clone()
            optimizers[t].step()
    dense, cut = models[1].dense_state_dict(), models[T].dense_state_dict()
    for name in dense:
        assert torch.equal(dense[name], cut[name]), name


def test_orthogonalizing_each_shard_alone_would_differ():
    """Why the shards are gathered: Newton-Schulz on each half of a matrix is not the whole's."""
    from torch.optim._muon import _zeropower_via_newtonschulz as newton_schulz
    settings = ((3.4445, -4.775, 2.0315), 5, 1e-7)
    g = torch.randn(64, 16, generator=torch.Generator().manual_seed(5))
    whole = newton_schulz(g, *settings)
    halves = torch.cat([newton_schulz(h, *settings) for h in g.chunk(2)])
    assert (whole - halves).abs().max() > 0.05


@pytest.mark.parametrize("unscaled", [True, False])
def test_an_overflow_step_under_float16_changes_nothing(unscaled):
    """dtype='float16': with a fused AdamW (a GPU's) the GradScaler calls the step even after an
    overflow and leaves the skipping to the optimizer (found_inf). An all-inf gradient must leave every
    weight and every state (AdamW's moments, Muon's momentum) as it was; a finite one must step."""
    model = tiny(2)
    optimizer = model.configure_optimizers(0.1, 1e-2, (0.9, 0.99), "cuda", optimizer="muon")  # fused on this CPU
    assert optimizer.defaults.get("fused") and optimizer._step_supports_amp_scaling
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    generator = torch.Generator().manual_seed(6)

    def step(grad):
        scaler.scale(torch.ones(()))  # the scaler's scale is made at its first use
        for p in model.parameters():
            p.grad = grad(p) * scaler.get_scale()  # as scaler.scale(loss).backward() leaves them
        if unscaled:  # step.py unscales before clipping; otherwise the optimizer gets grad_scale too
            scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
    step(lambda p: torch.randn(p.shape, generator=generator))  # a finite step: momentum buffers exist
    before = ({n: p.detach().clone() for n, p in model.named_parameters()},
              {id(p): {k: v.clone() for k, v in s.items()} for p, s in optimizer.state.items()})
    assert any("momentum_buffer" in s for s in before[1].values())
    step(lambda p: torch.full(p.shape, float("inf")))
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), before[0][name]), name
    for p, state in optimizer.state.items():
        for key, value in state.items():
            assert torch.equal(value, before[1][id(p)][key]), key
    assert scaler.get_scale() == 2.0 ** 9  # the scaler saw the overflow and backed off
    step(lambda p: torch.randn(p.shape, generator=generator))
    assert all(torch.isfinite(p).all() for p in model.parameters())
    matrices = {id(p) for p in muon_params(model)}
    assert all(not torch.equal(p.detach(), before[0][n]) for n, p in model.named_parameters() if id(p) in matrices)


def test_every_rank_skips_when_any_rank_overflowed():
    """`dist` float16: this process's gradients are finite, another TP rank's shard overflowed, so the
    whole model's norm (the same on every rank) is inf; this rank must skip the step too and back off
    its loss scale with the others (step.agree_on_overflow), for AdamW and for Muon."""
    from step import agree_on_overflow
    for optimizer_name in ("adamw", "muon"):
        model = tiny(2)
        optimizer = model.configure_optimizers(0.1, 1e-2, (0.9, 0.99), "cpu", optimizer=optimizer_name)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
        scaler.scale(torch.ones(()))
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        for p in model.parameters():
            p.grad = torch.ones_like(p)  # finite here
        scaler.unscale_(optimizer)
        agree_on_overflow(scaler, optimizer, torch.tensor(float("inf")))  # the norm over every rank
        scaler.step(optimizer)
        scaler.update()
        assert all(torch.equal(p.detach(), before[n]) for n, p in model.named_parameters()), optimizer_name
        assert scaler.get_scale() == 2.0 ** 9
