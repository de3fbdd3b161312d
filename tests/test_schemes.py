"""Hide and shrink, not only drop (DESIGN section 8): the ladder block, partial syncs (sync_fraction)
and low-precision syncs (sync_dtype), each against a per-rank float64 reference written out from
DESIGN's words (not the model's code); their counts, exposed syncs and bytes; their one-line errors."""

import random

import pytest
import torch

from comms import SimComm
from conftest import TINY, assert_one_line_error
from model import GPT, GPTConfig
from patterns import count_sync_points, exposed_sync_points, parse_block_types
from test_model import SMALL, batch, ln, randomize, ref_attn, ref_mlp, rel_err
from bench.harness import records, run_train

LIMIT = {"int8": 127.0, "float8_e4m3fn": 448.0}


def sent_as(x, sync_dtype):
    """What another rank receives of x (float64) sent in sync_dtype, written plainly: bfloat16 rounds each
    value; int8 / float8 scale each token (row) by its absmax / the largest value (a float32 on the wire,
    DESIGN section 8), round, scale back."""
    if not sync_dtype:
        return x
    if sync_dtype == "bfloat16":
        return x.to(torch.bfloat16).double()
    limit = LIMIT[sync_dtype]
    scale = (x.abs().amax(-1, keepdim=True).clamp(min=1e-30) / limit).float().double()  # sent as a float32
    if sync_dtype == "int8":
        return torch.clamp(torch.round(x / scale), -limit, limit) * scale
    return (x / scale).clamp(-limit, limit).to(torch.float8_e4m3fn).double() * scale


def reference(sd, kinds, T, idx, fraction=1.0, sync_dtype=""):
    """DESIGN sections 3 and 8 rank by rank: each rank r holds b[r] and d[r]; a sync sends the first
    round(fraction * C) channels of every d[j] in sync_dtype and r keeps its own exact and its other
    channels to itself; a ladder sublayer's message lands in b one sublayer later."""
    L = idx.shape[1]
    emb = sd["transformer.wte.weight"][idx] + sd["transformer.wpe.weight"][:L]
    C = emb.shape[-1]
    k = round(fraction * C)
    b, d, pending, flight = [emb] * T, [torch.zeros_like(emb)] * T, False, []

    def received(parts):  # what each rank r gets of every rank's parts[j]
        out = []
        for r in range(T):
            shared = parts[r][..., :k] + sum(sent_as(parts[j][..., :k], sync_dtype) for j in range(T) if j != r)
            out.append(torch.cat([shared, parts[r][..., k:]], -1))
        return out

    def sync(b, d):
        return [b[r] + m for r, m in enumerate(received(d))], [torch.zeros_like(emb)] * T

    def land(b):  # the oldest message in flight lands in every rank's b
        message = flight.pop(0)
        return [b[r] + message[r] for r in range(T)]

    for i, kind in enumerate(kinds):
        blk = {n[len(f"transformer.h.{i}."):]: v for n, v in sd.items() if n.startswith(f"transformer.h.{i}.")}
        attn = lambda x, r: ref_attn(ln(x, blk, "ln_1"), blk, r, T, SMALL["n_head"])  # noqa: E731
        mlp = lambda x, r: ref_mlp(ln(x, blk, "ln_2"), blk, r, T)  # noqa: E731
        if kind == "ladder":
            if pending:
                (b, d), pending = sync(b, d), False
            for sub in (attn, mlp):
                if len(flight) == 2:  # the message of the sublayer two back lands
                    b = land(b)
                flight.append(received([sub(b[r], r) for r in range(T)]))  # read b without the one just before
            continue
        while flight:  # everything in flight lands before a non-ladder sublayer reads
            b = land(b)
        d = [d[r] + attn(b[r] + d[r], r) for r in range(T)]
        if kind == "tp":
            b, d = sync(b, d)
        d = [d[r] + mlp(b[r] + d[r], r) for r in range(T)]
        if kind in ("tp", "spd"):
            (b, d), pending = sync(b, d), False
        else:
            pending = True
    while flight:
        b = land(b)
    if pending:
        b, d = sync(b, d)
    x = ln(b[0], {"w.weight": sd["transformer.ln_f.weight"], "w.bias": sd["transformer.ln_f.bias"]}, "w")
    return x @ sd["transformer.wte.weight"].T  # TP rank 0's logits


def model_for(kinds, tp_size, **sync):
    torch.manual_seed(0)
    config = GPTConfig(**{**SMALL, "n_layer": len(kinds)}, tp_size=tp_size, block_types=",".join(kinds))
    return GPT(config, SimComm(tp_size, sync_fraction=sync.get("fraction", 1.0), sync_dtype=sync.get("dtype", "")))


CASES = [  # (pattern, tp_size, sync_fraction, sync_dtype)
    ("ladder,ladder,ladder", 2, 1.0, ""), ("parallel,ladder,tp,ladder", 2, 1.0, ""), ("ladder,spd,parallel", 4, 1.0, ""),
    ("tp,spd", 2, 0.5, ""), ("spd,parallel,tp", 4, 0.25, ""),
    ("tp,spd", 2, 1.0, "bfloat16"), ("tp,parallel,spd", 2, 1.0, "int8"), ("ladder,tp", 4, 1.0, "float8_e4m3fn"),
    ("ladder,parallel,ladder", 2, 0.5, "int8"),
]


@pytest.mark.parametrize("pattern,tp_size,fraction,sync_dtype", CASES)
def test_schemes_match_the_per_rank_reference(pattern, tp_size, fraction, sync_dtype):
    kinds = pattern.split(",")
    dense = model_for(kinds, 1).double()
    randomize(dense, seed=3)
    model = model_for(kinds, tp_size, fraction=fraction, dtype=sync_dtype).double()
    model.load_dense_state_dict(dense.state_dict())
    idx, _ = batch()
    with torch.no_grad():
        expected = reference({k: v.double() for k, v in dense.state_dict().items()}, kinds, tp_size, idx,
                             fraction, sync_dtype)
        logits, _ = model(idx, idx)
    assert rel_err(logits, expected) < 1e-10
    plain = model_for(kinds, tp_size).double()  # and the scheme matters: whole-d syncs in full precision differ
    plain.load_dense_state_dict(dense.state_dict())
    with torch.no_grad():
        assert rel_err(plain(idx, idx)[0], expected) > 1e-6 or (fraction, sync_dtype) == (1.0, "")


@pytest.mark.parametrize("sync_dtype", ["int8", "float8_e4m3fn"])
def test_a_non_finite_value_in_a_quantized_message_stays_where_it_was(sync_dtype):
    """An overflow upstream puts an inf or a NaN in a message: it arrives as itself (as a bfloat16 cast
    keeps it) and the rest of its row as the codec sends the row's finite values (an inf scale made the
    whole row NaN); a model whose partials hold an inf ends in a non-finite loss, for the NaN guard."""
    from quantize import SYNC_DTYPES, quantized
    x = torch.randn(3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x[0, 3], x[1, 5] = float("inf"), float("nan")
    got = quantized(x, SYNC_DTYPES[sync_dtype])
    finite = torch.isfinite(x)
    assert torch.equal(got[finite], sent_as(torch.where(finite, x, 0), sync_dtype)[finite])
    assert got[0, 3] == float("inf") and got[1, 5].isnan()
    model = model_for(["tp", "spd"], 2, dtype=sync_dtype)
    with torch.no_grad():
        model.transformer.h[0].attn.c_proj.weight[0, 0, 0] = float("inf")  # rank 0's partial: an inf channel
    idx, targets = batch()
    assert not torch.isfinite(model(idx, targets)[1])


def test_lossless_ladder_at_tp2_is_the_ladder_transformer_at_tp1():
    """A ladder model is an architecture (the Ladder Transformer) at tp_size=1, with no syncs; TP=2 on a
    lossless network computes it: the same loss and gradients (up to summation order)."""
    kinds = ["ladder"] * 4
    one, two = model_for(kinds, 1).double(), model_for(kinds, 2).double()
    randomize(one, seed=7)
    two.load_dense_state_dict(one.state_dict())
    idx, targets = batch()
    loss1, loss2 = one(idx, targets)[1], two(idx, targets)[1]
    loss1.backward()
    loss2.backward()
    assert abs(loss1.item() - loss2.item()) < 1e-12 and one.sync_points == 0 and two.sync_points == 8
    dense_grads = dict(one.named_parameters())
    for name, p in two.named_parameters():  # every gradient, shards put back in the dense layout
        module, grad = two.get_submodule(name.rpartition(".")[0]), p.grad
        if getattr(p, "tp_sharded", False) and grad.dim() >= 2:
            grad = module.unshard(grad).unsqueeze(0)
        assert torch.allclose(grad, dense_grads[name].grad, rtol=1e-9, atol=1e-12), name
    tp = model_for(kinds, 2)  # and ladder is not tp: the same weights as a tp model give another loss
    tp.set_block_types("tp")
    tp.load_dense_state_dict(one.float().state_dict())
    assert abs(tp(idx, targets)[1].item() - loss1.item()) > 1e-4


def expected_bytes(kinds, tp_size, fraction, sync_dtype, B, L, C, element_size=4):
    """Payload of one step's syncs and mirror exchanges: one rank's message each (DESIGN section 8)."""
    k = round(fraction * C)
    per_value = {"": element_size, "bfloat16": 2, "int8": 1, "float8_e4m3fn": 1}[sync_dtype]
    scales = 4 * B * L if sync_dtype in ("int8", "float8_e4m3fn") else 0
    return 2 * count_sync_points(kinds, tp_size) * (B * L * k * per_value + scales)


def counted_by_hand(kinds):
    """DESIGN section 8's count, written out apart from patterns.py: (syncs, exposed syncs) of a forward pass."""
    syncs = exposed = 0
    pending = False  # partials a `parallel` block left for the next sync
    for i, kind in enumerate(kinds):
        following = kinds[i + 1] if i + 1 < len(kinds) else None
        if kind == "parallel":
            pending = True
            continue
        if kind == "ladder" and pending:  # synced (and waited for) before a ladder block reads
            syncs, exposed = syncs + 1, exposed + 1
        pending = False
        if kind == "spd":
            syncs, exposed = syncs + 1, exposed + 1
        elif kind == "tp":
            syncs, exposed = syncs + 2, exposed + 2
        else:  # ladder: its attention's sync lands behind its MLP, its MLP's behind a following ladder block
            syncs, exposed = syncs + 2, exposed + (following != "ladder")
    return syncs + pending, exposed + pending  # partials pending at the exit: one more sync


def test_measured_syncs_exposed_syncs_and_bytes_equal_the_analytic_counts():
    rng = random.Random(1)
    patterns = [["ladder"] * 4, ["parallel", "ladder"], ["ladder", "parallel"], ["ladder", "spd", "ladder", "tp"]]
    patterns += [[rng.choice(["tp", "spd", "parallel", "ladder"]) for _ in range(5)] for _ in range(10)]
    for n, kinds in enumerate(patterns):
        fraction, sync_dtype = [(1.0, ""), (0.5, ""), (1.0, "int8"), (0.25, "bfloat16")][n % 4]
        model = model_for(kinds, 2, fraction=fraction, dtype=sync_dtype)
        syncs, exposed = counted_by_hand(kinds)
        assert (model.sync_points, model.exposed_syncs) == (syncs, exposed), kinds
        idx, targets = batch()
        model.comm.counter.reset()
        model(idx, targets)[1].backward()
        counter = model.comm.counter
        assert (counter.forward, counter.backward) == (model.sync_points,) * 2, kinds
        assert counter.forward - counter.hidden == exposed, kinds
        B, L = idx.shape
        assert counter.sync_bytes == expected_bytes(kinds, 2, fraction, sync_dtype, B, L, SMALL["n_embd"]), kinds
    # the counting rule for a ladder run, written out: 12 ladder blocks sync 24 times, only the last exposed
    kinds = parse_block_types("ladder", 12)
    assert (count_sync_points(kinds, 2), len(exposed_sync_points(kinds, 2))) == (24, 1)
    assert (count_sync_points(kinds, 1), len(exposed_sync_points(kinds, 1))) == (0, 0)


def test_a_ladder_run_logs_syncs_exposed_syncs_and_bytes(char_data, tmp_path):
    result = run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--max_iters=4",
                       "--block_types=ladder", "--sync_dtype=int8", "--log_interval=1")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "sync points: 8 per pass, 1 exposed" in result.stdout.splitlines()[0]
    steps = [r for r in records(str(tmp_path)) if "val_loss" not in r]
    B, L, C = 2, 16, 32  # TINY's batch_size, block_size, n_embd
    per_token = expected_bytes(["ladder"] * 4, 2, 1.0, "int8", B, L, C) / (B * L)
    assert all((r["syncs_measured"], r["exposed_measured"], r["exposed_syncs"]) == (8, 1, 1) for r in steps)
    assert all(r["sync_bytes_per_token"] == per_token for r in steps)


@pytest.mark.parametrize("args,message", [
    (["--sync_fraction=0"], "sync_fraction=0.0 must be in (0, 1]"),
    (["--sync_fraction=1.5"], "sync_fraction=1.5 must be in (0, 1]"),
    (["--sync_fraction=0.01"], "sync_fraction=0.01 sends no channel of n_embd=32"),  # an empty message
    (["--sync_dtype=fp4"], "sync_dtype='fp4': allowed values are"),
    (["--block_types=ladder,lader"], "unknown block type 'lader'"),
])
def test_bad_scheme_settings_are_one_line_errors(char_data, tmp_path, args, message):
    assert_one_line_error(run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", *args), message)


@pytest.mark.parametrize("sync_dtype", ["bfloat16", "int8", "float8_e4m3fn"])
def test_the_wire_bytes_are_the_counted_bytes_and_carry_what_sim_delivers(sync_dtype):
    """quantize.pack, what `dist` hands its all-gather: exactly the bytes counted for the message (the
    payload in sync_dtype, a float32 scale per row for int8 / float8); unpack gives a receiver what
    `sim` delivers, bit for bit; a row with a non-finite value arrives non-finite (its scale sent as
    NaN: an int8 payload cannot carry it) and the other rows as before."""
    from quantize import SYNC_DTYPES, pack, quantized, unpack
    dtype = SYNC_DTYPES[sync_dtype]
    x = torch.randn(2, 3, 4, 16, generator=torch.Generator().manual_seed(3))  # (R, B, L, C)
    comm = SimComm(2, sync_dtype=sync_dtype)
    wire = pack(x[0], dtype)
    assert wire.dtype == torch.uint8 and wire.numel() == comm.message_bytes(x)
    assert torch.equal(unpack(wire, dtype, x[0]), quantized(x[0], dtype))
    assert torch.equal(quantized(x[0], dtype), sent_as(x[0].double(), sync_dtype).float())
    if sync_dtype != "bfloat16":  # a bfloat16 model's message: its scale and quotient in float32, not bfloat16
        y = x[0].to(torch.bfloat16)
        assert torch.equal(quantized(y, dtype), sent_as(y.double(), sync_dtype).to(torch.bfloat16))
    x[0, 1, 2, 5] = float("inf")
    got = unpack(pack(x[0], dtype), dtype, x[0])
    bad = torch.zeros(3, 4, dtype=torch.bool)
    bad[1, 2] = True
    assert not torch.isfinite(got[bad]).any() if sync_dtype != "bfloat16" else got[1, 2, 5] == float("inf")
    assert torch.equal(got[~bad], quantized(x[0], dtype)[~bad])


@pytest.mark.parametrize("sync_dtype", ["int8", "float8_e4m3fn"])
@pytest.mark.parametrize("magnitude", [1e-31, 1e-35, 1e-40, 1e-44])  # 1e-40, 1e-44: float32 subnormals
def test_a_tiny_row_arrives_within_the_codecs_own_error(sync_dtype, magnitude):
    """A row's scale is a float32 (DESIGN section 8): below float32's normal range its rounding step is coarse.
    A tiny row still arrives within the codec's own error (a row of 1e-31 once arrived 2.4% off, one of 1e-35
    as 0), an all-zero row exactly, and `sim` (quantized) and `dist` (pack, unpack) deliver the same values."""
    from quantize import SYNC_DTYPES, pack, quantized, unpack
    dtype, limit = SYNC_DTYPES[sync_dtype], LIMIT[sync_dtype]
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(6)) * magnitude  # float32
    x[3] = 0
    got = quantized(x, dtype)
    assert torch.equal(got, unpack(pack(x, dtype), dtype, x)) and torch.equal(got[3], x[3])
    error, absmax = (got.double() - x.double()).abs(), x.double().abs().amax(-1, keepdim=True)
    scale = absmax / limit + 2.0 ** -149  # the largest scale sent: absmax / limit rounded up on float32's grid
    # int8: half a scale; float8_e4m3fn: 1/16 of a value (3 mantissa bits), or half its step of 2**-9 scales
    # under 2**-6 scales (its subnormals); and the float32 product's rounding, 2**-150 among subnormals
    bound = scale / 2 if sync_dtype == "int8" else x.double().abs() / 16 + scale * 2.0 ** -10 + 2.0 ** -150
    assert (error <= bound * (1 + 1e-6)).all(), (error / absmax).max()
    assert (error[:3] / absmax[:3]).max() < (0.004 if sync_dtype == "int8" else 0.07)  # the codec's relative error


@pytest.mark.parametrize("sync_dtype", ["int8", "float8_e4m3fn"])
def test_a_float64_row_past_a_float32_scale_is_a_clear_error(sync_dtype):
    """A float64 run's row of 1e41 needs an int8 scale of 7.9e38, past float32's largest (3.4e38): it decoded
    to NaN; now a one-line OverflowError naming sync_dtype and the magnitude. float8's scale (1e41 / 448) holds."""
    from quantize import SYNC_DTYPES, pack, quantized, unpack
    dtype = SYNC_DTYPES[sync_dtype]
    x = torch.randn(2, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    x[0] *= 1e41 / x[0].abs().max()
    if sync_dtype == "int8":
        for send in (lambda: quantized(x, dtype), lambda: pack(x, dtype)):
            with pytest.raises(OverflowError, match=r"^sync_dtype=int8: a message row's largest value 1e\+41 .* "
                                                    r"must stay below 4.32e\+40$"):
                send()
        return
    got = quantized(x, dtype)
    assert torch.equal(got, unpack(pack(x, dtype), dtype, x))
    assert ((got - x).abs() <= x.abs() / 16 * (1 + 1e-6)).all()
