"""The model's semantics: dense equivalence, the spd and parallel formulas, sync counts."""

import math
import random

import pytest
import torch
import torch.nn.functional as F

from mfu import estimate_mfu, flops_per_token, peak_flops_per_device
from model import (GPT, GPTConfig, RowParallelLinear, describe_pattern,
                   parse_block_types)

SMALL = dict(block_size=16, vocab_size=37, n_head=4, n_embd=32, bias=True, dropout=0.0)


def make(seed=0, **kw):
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**SMALL, **kw}))


def randomize(model, seed=1):
    """Non-zero values everywhere (GPT-2 init zeroes the biases, which would hide bias bugs)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)


def batch(seed=2, B=3, L=12):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(SMALL["vocab_size"], (B, L), generator=g),
            torch.randint(SMALL["vocab_size"], (B, L), generator=g))


def rel_err(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("tp_size", [2, 4])
def test_same_seed_tp_model_holds_the_dense_weights(tp_size):
    dense = make(seed=7, n_layer=3)
    tp = make(seed=7, n_layer=3, tp_size=tp_size, block_types="tp")
    tp_weights = tp.dense_state_dict()
    dense_weights = dense.state_dict()
    assert tp_weights.keys() == dense_weights.keys()
    for name, tensor in dense_weights.items():
        assert torch.equal(tp_weights[name], tensor), name


@pytest.mark.parametrize("tp_size", [2, 4])
def test_tp_blocks_compute_the_dense_model(tp_size):
    dense = make(n_layer=3)
    randomize(dense)
    tp = make(n_layer=3, tp_size=tp_size, block_types="tp")
    tp.load_dense_state_dict(dense.state_dict())
    idx, targets = batch()
    logits_d, loss_d = dense(idx, targets)
    logits_t, loss_t = tp(idx, targets)
    assert rel_err(logits_t, logits_d) < 1e-5
    assert abs(loss_t.item() - loss_d.item()) < 1e-5 * abs(loss_d.item())
    loss_d.backward()
    loss_t.backward()
    dense_grads = {n: p.grad for n, p in dense.named_parameters()}
    # map every TP gradient back to the dense layout, shard by shard
    sharded = tp._sharded_modules()
    for name, p in tp.named_parameters():
        module = name.rpartition(".")[0]
        grad = sharded[module].unshard(p.grad).unsqueeze(0) if module in sharded and p.dim() >= 2 else p.grad
        assert rel_err(grad, dense_grads[name]) < 1e-5, name
    assert tp.comm.counter.forward == tp.comm.counter.backward == 2 * 3


def test_row_parallel_bias_is_added_once():
    T, C_in, C_out = 4, 8, 5
    layer = RowParallelLinear(C_in, C_out, T, range(T), bias=True)
    full_w, bias = torch.randn(C_out, C_in), torch.randn(C_out)
    with torch.no_grad():
        layer.weight.copy_(layer.shard(full_w))
        layer.bias.copy_(bias)
    x = torch.randn(6, C_in)
    partials = layer(x.view(6, T, C_in // T).transpose(0, 1).contiguous())  # (T, 6, C_out)
    assert torch.allclose(partials.sum(0), x @ full_w.T + bias, atol=1e-6)


# --- hand-written references of DESIGN's formulas, on the dense weights, rank by rank ---

def ref_attn(x, blk, r, T, n_head):
    """Rank r's partial attention output from its heads (dense weights sliced by hand)."""
    B, L, C = x.shape
    hs, hr = C // n_head, n_head // T
    w, b = blk["attn.c_attn.weight"][0], blk["attn.c_attn.bias"][0]  # (3C, C), (3C,)
    cols = slice(r * hr * hs, (r + 1) * hr * hs)
    q, k, v = [(x @ w[i * C:(i + 1) * C][cols].T + b[i * C:(i + 1) * C][cols]) for i in range(3)]
    q, k, v = [t.view(B, L, hr, hs).transpose(1, 2) for t in (q, k, v)]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    att = att.masked_fill(torch.triu(torch.ones(L, L, dtype=torch.bool), 1), float("-inf")).softmax(-1)
    y = (att @ v).transpose(1, 2).reshape(B, L, hr * hs)
    return y @ blk["attn.c_proj.weight"][0][:, cols].T + blk["attn.c_proj.bias"] / T


def ref_mlp(x, blk, r, T):
    H = blk["mlp.c_fc.weight"].shape[1]
    cols = slice(r * H // T, (r + 1) * H // T)
    h = F.gelu(x @ blk["mlp.c_fc.weight"][0][cols].T + blk["mlp.c_fc.bias"][0][cols])
    return h @ blk["mlp.c_proj.weight"][0][:, cols].T + blk["mlp.c_proj.bias"] / T


def ln(x, blk, which):
    C = x.shape[-1]
    return F.layer_norm(x, (C,), blk[f"{which}.weight"], blk[f"{which}.bias"])


def reference_forward(sd, kinds, T, n_head, idx):
    """DESIGN section 3 written out with explicit per-rank states x_r = b + d_r."""
    L = idx.shape[1]
    b = sd["transformer.wte.weight"][idx] + sd["transformer.wpe.weight"][:L]
    d, pending = [torch.zeros_like(b) for _ in range(T)], False
    for i, kind in enumerate(kinds):
        blk = {k[len(f"transformer.h.{i}."):]: v for k, v in sd.items() if k.startswith(f"transformer.h.{i}.")}
        for r in range(T):  # each rank's attention reads its own state b + d_r
            d[r] = d[r] + ref_attn(ln(b + d[r], blk, "ln_1"), blk, r, T, n_head)
        if kind == "tp":
            b, d = b + sum(d), [torch.zeros_like(b) for _ in range(T)]
        for r in range(T):
            d[r] = d[r] + ref_mlp(ln(b + d[r], blk, "ln_2"), blk, r, T)
        if kind in ("tp", "spd"):
            b, d, pending = b + sum(d), [torch.zeros_like(b) for _ in range(T)], False
        else:
            pending = True
    if pending:
        b = b + sum(d)  # the final sync
    x = F.layer_norm(b, (b.shape[-1],), sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"])
    return x @ sd["transformer.wte.weight"].T


def test_spd_block_is_the_spd_paper_formula():
    """Kim et al. (ICML 2025): MLP_r takes X + O_r; the block output is X + AllReduce(O_r + M_r)."""
    T = 2
    dense = make(n_layer=1)
    randomize(dense, seed=4)
    model = make(n_layer=1, tp_size=T, block_types="spd")
    model.load_dense_state_dict(dense.state_dict())
    idx, _ = batch()
    sd = dense.state_dict()
    blk = {k[len("transformer.h.0."):]: v for k, v in sd.items() if k.startswith("transformer.h.0.")}
    X = sd["transformer.wte.weight"][idx] + sd["transformer.wpe.weight"][:idx.shape[1]]
    O = [ref_attn(ln(X, blk, "ln_1"), blk, r, T, SMALL["n_head"]) for r in range(T)]
    M = [ref_mlp(ln(X + O[r], blk, "ln_2"), blk, r, T) for r in range(T)]
    out = X + sum(O[r] + M[r] for r in range(T))
    out = F.layer_norm(out, (out.shape[-1],), sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"])
    with torch.no_grad():
        assert rel_err(model(idx, idx)[0], out @ sd["transformer.wte.weight"].T) < 1e-5


@pytest.mark.parametrize("pattern", ["spd", "parallel,spd", "spd,parallel", "parallel", "parallel,parallel,spd,parallel"])
@pytest.mark.parametrize("tp_size", [2, 4])
def test_spd_and_parallel_match_the_reference(pattern, tp_size):
    n_layer = len(parse_block_types(pattern, 4))
    dense = make(n_layer=n_layer)
    randomize(dense, seed=3)
    model = make(n_layer=n_layer, tp_size=tp_size, block_types=pattern)
    model.load_dense_state_dict(dense.state_dict())
    idx, _ = batch()
    with torch.no_grad():
        expected = reference_forward(dense.state_dict(), model.config.block_types, tp_size, SMALL["n_head"], idx)
        logits, _ = model(idx, idx)
    assert rel_err(logits, expected) < 1e-5
    # and the block types matter: the same weights as a tp model give other logits
    tp_model = make(n_layer=n_layer, tp_size=tp_size, block_types="tp")
    tp_model.load_dense_state_dict(dense.state_dict())
    with torch.no_grad():
        assert rel_err(tp_model(idx, idx)[0], expected) > 1e-3


def expected_syncs(kinds):
    """DESIGN's counting rule, written independently of the model."""
    n = 2 * kinds.count("tp") + kinds.count("spd")
    last_sync = max([i for i, k in enumerate(kinds) if k != "parallel"], default=-1)
    return n + (1 if "parallel" in kinds[last_sync + 1:] else 0)


def test_measured_sync_counts_equal_the_analytic_count():
    rng = random.Random(0)
    patterns = [["tp", "spd", "parallel"], ["parallel"] * 3, ["spd", "parallel", "tp"]]
    patterns += [[rng.choice(["tp", "spd", "parallel"]) for _ in range(6)] for _ in range(12)]
    for kinds in patterns:
        model = make(n_layer=len(kinds), tp_size=2, block_types=",".join(kinds))
        assert model.sync_points == expected_syncs(kinds), kinds
        idx, targets = batch()
        model.comm.counter.reset()
        _, loss = model(idx, targets)
        assert model.comm.counter.forward == model.sync_points, kinds
        loss.backward()
        assert model.comm.counter.backward == model.sync_points, kinds


def test_tp_size_1_is_plain_gpt2():
    reference = make(seed=5, n_layer=3)
    idx, targets = batch()
    ref_logits, ref_loss = reference(idx, targets)
    # a minimal GPT-2 written out here: x += attn(ln_1(x)); x += mlp(ln_2(x))
    sd = reference.state_dict()
    L = idx.shape[1]
    x = sd["transformer.wte.weight"][idx] + sd["transformer.wpe.weight"][:L]
    for i in range(3):
        blk = {k[len(f"transformer.h.{i}."):]: v for k, v in sd.items() if k.startswith(f"transformer.h.{i}.")}
        x = x + ref_attn(ln(x, blk, "ln_1"), blk, 0, 1, SMALL["n_head"])
        x = x + ref_mlp(ln(x, blk, "ln_2"), blk, 0, 1)
    x = F.layer_norm(x, (x.shape[-1],), sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"])
    assert rel_err(ref_logits, x @ sd["transformer.wte.weight"].T) < 1e-5
    for pattern in ["spd", "parallel", "parallel,spd,tp"]:  # block types do nothing with one rank
        model = make(seed=5, n_layer=3, block_types=pattern)
        logits, loss = model(idx, targets)
        assert torch.equal(logits, ref_logits) and torch.equal(loss, ref_loss)
        assert model.sync_points == 0 and model.comm.counter.forward == 0


def test_block_type_parsing():
    assert parse_block_types("parallel,spd", 6) == ("parallel", "spd") * 3
    assert parse_block_types(" TP , spd ", 4) == ("tp", "spd") * 2
    assert parse_block_types("parallel*5,spd", 12) == (("parallel",) * 5 + ("spd",)) * 2
    assert parse_block_types(["tp", "spd"], 2) == ("tp", "spd")
    assert describe_pattern(parse_block_types("parallel*5,spd", 12)) == "[parallel*5,spd] x2"
    assert describe_pattern(("spd",) * 12) == "spd x12"
    for bad, message in [("tp,spd,sdp", "unknown block type 'sdp'"), ("tp,spd", "does not tile n_layer=3"),
                         ("tp*0", "bad repeat"), ("", "unknown block type")]:
        with pytest.raises(ValueError, match=message):
            parse_block_types(bad, 3)


@pytest.mark.parametrize("kw, message", [
    (dict(tp_size=3), "n_head=4 is not divisible by tp_size=3"),
    (dict(n_embd=30), "n_embd=30 is not divisible by n_head=4"),
    (dict(dropout=1.0), "dropout=1.0"),
])
def test_config_errors(kw, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**{**SMALL, "n_layer": 2, **kw})


def test_parameter_count_and_weight_decay_groups():
    counts = {T: make(n_layer=2, tp_size=T).get_num_params() for T in (1, 2, 4)}
    assert counts[1] == counts[2] == counts[4]
    dense = make(n_layer=2)
    assert counts[1] == sum(p.numel() for p in dense.parameters()) - dense.transformer.wpe.weight.numel()
    model = make(n_layer=2, tp_size=2)
    decay, no_decay = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu").param_groups
    decayed = {id(p) for p in decay["params"]}
    for name, p in model.named_parameters():
        should_decay = name.endswith("weight") and "ln" not in name
        assert (id(p) in decayed) == should_decay, name  # column biases are 2-D and still not decayed
    assert no_decay["weight_decay"] == 0.0


def test_generate_and_mfu():
    model = make(n_layer=2, tp_size=2, block_types="parallel")
    model.eval()
    out = model.generate(torch.zeros(2, 1, dtype=torch.long), max_new_tokens=20, top_k=5)
    assert out.shape == (2, 21)
    torch.manual_seed(0)  # vocab: a padded vocabulary's extra ids are never drawn (sample.py: GPT-2's 50257)
    assert model.generate(torch.zeros(4, 1, dtype=torch.long), max_new_tokens=50, vocab=3).max() < 3
    assert peak_flops_per_device("cpu", "float32") > 0
    mfu = estimate_mfu(model, tokens_per_iter=1000, dt=1.0, peak_flops=1e12)
    assert mfu == pytest.approx(flops_per_token(model) * 1000 / 1e12)
    # PaLM's 6N + 12 L H Q T, N counted by hand: tied embedding, per layer attention 4C^2+4C, two LayerNorms
    # 4C, MLP 8C^2+5C; the final LayerNorm 2C. A mixture: the router's C E and top_k experts' MLPs per token
    V, C, L, H, T = 37, 32, 2, 4, 16
    attention = 12 * L * H * (C // H) * T
    assert flops_per_token(model) == 6 * (V * C + L * (12 * C * C + 13 * C) + 2 * C) + attention == 172_224
    moe = make(n_layer=2, tp_size=2, block_types="parallel", n_experts=4, experts_top_k=2)
    active = V * C + L * (4 * C * C + 4 * C + 4 * C + C * 4 + 2 * (8 * C * C + 5 * C)) + 2 * C
    assert flops_per_token(moe) == 6 * active + attention


def test_gpu_peak_follows_the_tf32_setting(monkeypatch):
    """A float32 run divides by TF32's peak only where torch lets matmuls use TF32 (tf32=False: full float32)."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    # allow_tf32 is a property of torch's cuBLAS module object, not an attribute monkeypatch can undo
    # (pytest 9.2 restores it with delattr, which that object refuses): set it, and put it back by hand
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        assert peak_flops_per_device("cuda", "float32") == 494e12
        torch.backends.cuda.matmul.allow_tf32 = False
        assert peak_flops_per_device("cuda", "float32") == 67e12
        assert peak_flops_per_device("cuda", "bfloat16") == 989e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def test_the_startup_line_names_ladder_at_one_rank_as_its_own_architecture():
    from patterns import describe_schedule, parse_block_schedule
    assert describe_schedule(parse_block_schedule("0:spd", 12), 1).endswith("every block is the dense block)")
    ladder = describe_schedule(parse_block_schedule("0:ladder", 12), 1)
    assert "Ladder Transformer" in ladder and "every block is the dense block" not in ladder


def test_the_embedding_dropout_is_one_mask_for_every_tp_rank():
    """The embedding is the state every TP rank starts from, so its dropout mask comes from the generator
    train.py seeds alike on every rank (replicated_rng), not from the per-rank global one that the blocks'
    dropout (on each rank's own partials) draws from: two processes whose global generators differ, as a
    `dist` run's ranks' do, embed alike. Scaled as inverted dropout; off in eval."""
    model = make(tp_size=2, dropout=0.5).train()
    idx, _ = batch()
    embedded = []
    for global_seed in (11, 12):  # what two TP ranks' per-rank seeds do to the global generator
        torch.manual_seed(global_seed)
        model.replicated_rng = torch.Generator().manual_seed(7)
        embedded.append(model.embed(idx))
    assert torch.equal(embedded[0], embedded[1])
    whole = (model.transformer.wte(idx) + model.transformer.wpe(torch.arange(idx.shape[1]))).unsqueeze(0)
    kept = embedded[0] != 0
    assert 0.3 < kept.float().mean() < 0.7 and torch.allclose(embedded[0][kept], 2 * whole[kept])
    model.replicated_rng = torch.Generator().manual_seed(8)
    assert not torch.equal(model.embed(idx), embedded[0])  # the generator, not a fixed mask
    assert torch.equal(model.eval().embed(idx), whole)


def test_a_partial_sync_is_checked_against_the_final_width():
    """model_args_from runs once init_from's weights have set the shape: a share of GPT-2's 768 channels that
    a 64-wide default would round to none passes, one that sends none of the final width is refused, and a
    width that is itself wrong is left to GPTConfig's own message."""
    from model import MODEL_KEYS, model_args_from
    config = {key: value for key, value in GPTConfig(**SMALL).__dict__.items() if key in MODEL_KEYS}
    assert model_args_from(dict(config, n_embd=768, sync_fraction=0.005), 50)["n_embd"] == 768
    with pytest.raises(ValueError, match=r"sync_fraction=0.005 sends no channel of n_embd=64"):
        model_args_from(dict(config, n_embd=64, sync_fraction=0.005), 50)
    model_args_from(dict(config, n_embd=0, sync_fraction=1.0), 50)  # GPTConfig names n_embd
    with pytest.raises(ValueError, match=r"n_embd=0"):
        GPTConfig(**model_args_from(dict(config, n_embd=0), 50))
