"""The mixture-of-experts MLP (moe.py): against a plain per-rank loop in float64, every TP layout
against the dense model, `sim` against `dist` (with Muon, optim.py), the syncs unchanged."""

import math

import pytest
import torch
from torch.nn import functional as F

from bench.harness import records, run_train, torchrun
from comms import SimComm
from conftest import SMALL, assert_one_line_error
from model import GPT, GPTConfig
from moe import MoEMLP
from pipeline import check_config


def tiny(tp_size, block_types="tp", n_experts=4, top_k=2, dtype=torch.float32):
    torch.manual_seed(0)
    config = GPTConfig(block_size=16, vocab_size=50, n_layer=2, n_head=4, n_embd=16, tp_size=tp_size,
                       block_types=block_types, n_experts=n_experts, experts_top_k=top_k)
    return GPT(config).to(dtype)


def reference_partials(dense, x, top_k, T):
    """Rank r's partial output, by hand in float64: route each token of x[r] (its own input) to its
    top_k experts, weigh them by the router probabilities (renormalised over the top_k when top_k > 1:
    Mixtral; the probability itself at top_k = 1: Switch Transformer), and apply rank r's hidden
    units of each chosen expert (rows r*4C/T.. of c_fc, the same columns of c_proj) plus bias/T."""
    R, N, C = x.shape
    H = 4 * C // T
    out = torch.zeros(R, N, C, dtype=torch.float64)
    for r in range(R):
        for n in range(N):
            probs = torch.softmax(dense["router"] @ x[r, n], dim=0)
            top = torch.topk(probs, top_k).indices.tolist()
            total = sum(probs[e] for e in top) if top_k > 1 else 1.0
            for e in top:
                w1, b1 = dense[f"{e}.c_fc.weight"][r * H:(r + 1) * H], dense[f"{e}.c_fc.bias"][r * H:(r + 1) * H]
                w2, b2 = dense[f"{e}.c_proj.weight"][:, r * H:(r + 1) * H], dense[f"{e}.c_proj.bias"]
                h = F.gelu(w1 @ x[r, n] + b1)
                out[r, n] += probs[e] / total * (w2 @ h + b2 / T)
    return out


@pytest.mark.parametrize("T, top_k", [(1, 2), (2, 2), (4, 2), (2, 1)])
def test_each_rank_routes_its_own_state_and_runs_its_units(T, top_k):
    """Ranks whose inputs differ (after an unsynchronised attention) choose their own experts."""
    torch.manual_seed(1)
    model = tiny(T, top_k=top_k, dtype=torch.float64)
    moe = model.transformer.h[0].mlp
    assert isinstance(moe, MoEMLP)
    dense = {"router": moe.router.weight}
    for e, expert in enumerate(moe.experts):
        for name in ("c_fc", "c_proj"):
            layer = getattr(expert, name)
            dense[f"{e}.{name}.weight"] = layer.unshard(layer.weight)
            dense[f"{e}.{name}.bias"] = layer.unshard(layer.bias)
    x = torch.randn(T, 2, 5, 16, dtype=torch.float64)  # (R, B, L, C): every rank its own state
    with torch.no_grad():
        out = moe(x)
        want = reference_partials(dense, x.view(T, 10, 16), top_k, T).view(T, 2, 5, 16)
        assert torch.allclose(out, want, atol=1e-12, rtol=1e-10)
        shared = moe(x[:1])  # one state every rank shares: the partials sum to the dense MoE's output
        assert torch.allclose(moe(x[:1], summed=True)[0], shared.sum(0), atol=1e-12)
        assert torch.allclose(shared.sum(0), reference_partials(dense, x[:1].view(1, 10, 16).expand(T, 10, 16), top_k, T)
                              .sum(0).view(2, 5, 16), atol=1e-12)


def test_dispatch_syncs_with_the_host_once_per_layer_not_once_per_expert(monkeypatch):
    """On a GPU every op whose output size depends on the data (`nonzero`, `.tolist()`, `.item()`) waits
    for the device: the expert dispatch makes one such wait per MoE layer whatever the expert count."""
    from torch.utils._python_dispatch import TorchDispatchMode
    waits = []

    class DataDependent(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func._overloadpacket in (torch.ops.aten.nonzero, torch.ops.aten.masked_select,
                                        torch.ops.aten._local_scalar_dense, torch.ops.aten.unique_dim):
                waits.append(str(func))
            return func(*args, **(kwargs or {}))

    for name in ("tolist", "item"):  # host reads that do not go through the dispatcher
        method = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *a, _m=method, _n=name: waits.append(_n) or _m(self, *a))
    for n_experts in (2, 8):
        moe = tiny(2, n_experts=n_experts).transformer.h[0].mlp
        waits.clear()
        with DataDependent():
            moe(torch.randn(2, 2, 8, 16))
        assert waits == ["tolist"], (n_experts, waits)


def test_load_balancing_loss_is_switch_transformers():
    moe = tiny(1).transformer.h[0].mlp
    with torch.no_grad():
        moe.router.weight.zero_()  # uniform probabilities: every expert's share is the same
        moe(torch.randn(1, 2, 8, 16))
        assert math.isclose(moe.aux_loss.item(), 1.0, rel_tol=1e-6)
        x = torch.randn(1, 2, 8, 16)
        moe.router.weight.normal_()
        moe(x)
        probs = torch.softmax(x.view(16, 16) @ moe.router.weight.T, dim=-1)  # (N, E)
        chosen = torch.zeros_like(probs).scatter(-1, probs.topk(2, dim=-1).indices, 1.0)
        want = 4 * (chosen.mean(0) / 2 * probs.mean(0)).sum()
        assert math.isclose(moe.aux_loss.item(), want.item(), rel_tol=1e-5)


@pytest.mark.parametrize("top_k", [1, 2])
def test_the_router_learns_from_the_language_model_loss(top_k):
    """With the balancing loss off, the router's gradient comes from the cross-entropy alone: non-zero
    at every k (at k=1 a gate renormalised over one expert would be 1, a constant, and give none)."""
    model = tiny(2, top_k=top_k)
    model.moe_aux_loss_coef = 0.0
    x, y = torch.randint(0, 50, (3, 16)), torch.randint(0, 50, (3, 16))
    model(x, y)[1].backward()
    for block in model.transformer.h:
        assert block.mlp.router.weight.grad.abs().max() > 1e-6


def test_each_block_balancing_loss_is_added_to_the_training_loss():
    """Megatron's convention: moe_aux_loss_coef weighs every block's balancing loss, summed over the
    blocks (not their mean); the logged moe_aux_loss is their mean, 1 when balanced."""
    model = tiny(2)
    x, y = torch.randint(0, 50, (3, 16)), torch.randint(0, 50, (3, 16))
    model.moe_aux_loss_coef = 0.0
    torch.manual_seed(2)
    plain = model(x, y)[1].item()
    model.moe_aux_loss_coef = 0.5
    torch.manual_seed(2)
    with_aux = model(x, y)[1].item()
    per_block = [block.mlp.aux_loss.item() for block in model.transformer.h]
    assert len(per_block) == 2 and math.isclose(with_aux - plain, 0.5 * sum(per_block), rel_tol=1e-5)
    assert math.isclose(model.moe_aux_loss().item(), sum(per_block) / 2, rel_tol=1e-6)


@pytest.mark.parametrize("T", [2, 4])
def test_every_tp_layout_is_the_dense_moe(T):
    """All-tp blocks on a lossless network: TP=T computes the TP=1 model (loss, logits, gradients)."""
    x, y = torch.randint(0, 50, (3, 16)), torch.randint(0, 50, (3, 16))
    dense, sharded = tiny(1), tiny(T)
    (logits1, loss1), (logitsT, lossT) = dense(x, y), sharded(x, y)
    assert torch.allclose(logits1, logitsT, atol=1e-5) and abs(loss1.item() - lossT.item()) < 1e-6
    loss1.backward()
    lossT.backward()
    for name, grad in _dense_grads(dense).items():
        assert torch.allclose(grad, _dense_grads(sharded)[name], atol=1e-6), name


def _dense_grads(model):
    grads = {n: p.grad for n, p in model.named_parameters()}
    sharded = model._sharded_modules()
    return {n: sharded[n.rpartition(".")[0]].unshard(g) if n.rpartition(".")[0] in sharded and g.dim() >= 2 else g
            for n, g in grads.items()}


def test_moe_settings_are_checked():
    with pytest.raises(ValueError, match="experts_top_k"):
        GPTConfig(n_layer=2, n_head=4, n_embd=16, n_experts=2, experts_top_k=3)
    with pytest.raises(ValueError, match="n_experts"):  # the load-balancing loss lives in every stage
        check_config(2, 4, "", "gpipe", 2, n_experts=4)


def test_moe_and_muon_dist_equals_sim(char_data, tmp_path):
    """spd blocks (the ranks route different states), MoE, Muon: `dist` runs what `sim` runs, the
    syncs are the dense block's count, and the load-balancing loss is logged."""
    args = [*SMALL, f"--data_dir={char_data}", "--block_types=spd", "--tp_size=2", "--n_experts=4",
            "--optimizer=muon"]
    sim_dir, dist_dir = str(tmp_path / "sim"), str(tmp_path / "dist")
    assert run_train(*args, f"--out_dir={sim_dir}").returncode == 0
    dst = torchrun(2, *args, "--tp_mode=dist", f"--out_dir={dist_dir}")
    assert dst.returncode == 0, "\n".join(l for l in dst.stderr.splitlines() if not l.startswith("W1"))[:3000]
    sim, dist = records(sim_dir), records(dist_dir)
    assert [r["iter"] for r in sim] == [r["iter"] for r in dist] and len(sim) >= 8
    for a, b in zip(sim, dist):
        # the first steps agree to summation order; later, a token near a tie between two experts may be
        # routed apart by that order (a discrete choice), moving the loss by up to ~7e-4 here
        tol = 1e-5 if a["iter"] <= 1 else 1e-3
        for key in ("train_loss", "val_loss", "moe_aux_loss"):
            if key in a:
                assert abs(a[key] - b[key]) < tol, (a["iter"], key, a[key], b[key])
        if "val_loss" not in a:
            assert a["syncs_measured"] == a["sync_points"] == 12 and 0.9 < a["moe_aux_loss"] < 4


def test_moe_user_mistakes_are_one_line_errors(char_data, tmp_path):
    base = [*SMALL, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--max_iters=1"]
    assert_one_line_error(run_train(*base, "--n_experts=2", "--experts_top_k=3"), "experts_top_k=3")
    assert_one_line_error(run_train(*base, "--optimizer=sgd"), "optimizer", "muon")
    assert_one_line_error(run_train(*base, "--optimizer=muon", "--zero_stage=1"), "zero_stage")
    assert run_train(*base, "--optimizer=muon", "--always_save_checkpoint=True").returncode == 0
    assert_one_line_error(run_train(*base, "--init_from=resume", "--max_iters=2"), "optimizer")  # resumed as AdamW


def test_the_summed_moe_path_is_taken_and_equals_summing_partials(monkeypatch):
    """A lossless `sim` tp block asks the MoE for the sum of its partials (summed=True): the same loss and
    gradients, in float64, as a comm that sums per-rank partials at the sync, and the same sync count."""
    class Unfused(SimComm):
        sums_in_gemm = False
    asked, forward = [], MoEMLP.forward
    monkeypatch.setattr(MoEMLP, "forward", lambda self, x, summed=False: asked.append(summed) or forward(self, x, summed))
    x, y = torch.randint(0, 50, (2, 16)), torch.randint(0, 50, (2, 16))
    results = []
    for comm in (None, Unfused(2)):
        torch.manual_seed(0)
        config = GPTConfig(block_size=16, vocab_size=50, n_layer=2, n_head=4, n_embd=16, tp_size=2, block_types="tp",
                           n_experts=4, experts_top_k=2)
        model = (GPT(config) if comm is None else GPT(config, comm)).double()
        model.comm.counter.reset()
        _, loss = model(x, y)
        loss.backward()
        results.append((loss, {n: p.grad for n, p in model.named_parameters()}, model.comm.counter.totals()[0]))
    assert asked == [True, True, False, False]  # two MoE blocks, fused then unfused
    (loss, grads, syncs), (loss_u, grads_u, syncs_u) = results
    assert syncs == syncs_u == 4
    assert torch.allclose(loss, loss_u, rtol=0, atol=1e-12)
    for name in grads:
        assert torch.allclose(grads[name], grads_u[name], rtol=1e-9, atol=1e-12), name


@pytest.mark.slow
def test_dispatch_benchmark_times_the_same_function_both_ways():
    """bench/moe_dispatch.py at a tiny size: the old per-expert loop and the one-sort dispatch start from
    the same draw and give the same first loss; each has a rate, the loop's ratio is 1."""
    import sys
    from bench.harness import run
    result = run([sys.executable, "-m", "bench.moe_dispatch", "--rounds=2", "--steps=1", "--experts=3",
                  "--set", "n_layer=2", "n_embd=32", "n_head=2", "batch_size=2", "block_size=16"])
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in result.stdout.splitlines() if line.startswith("| loop") or line.startswith("| dispatch")}
    assert set(rows) == {"loop", "dispatch"}
    assert rows["loop"][0] == rows["dispatch"][0] and float(rows["loop"][0]) > 0
    assert rows["loop"][2] == "1" and float(rows["dispatch"][1]) > 0
