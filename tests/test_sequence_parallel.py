"""Sequence parallelism (DESIGN section 10): a sync as a reduce-scatter and an all-gather, against the model
without it (lossless), a per-rank float64 reference (lossy, both passes), `dist`, and its counts (its exact resume: test_lossy.py)."""

import math

import pytest
import torch

import configurator
from bench.harness import records, run_train, torchrun
from comms import DistComm, SimComm
from conftest import SMALL as SMALL_ARGS
from links import BWD, FWD, LosslessLink, LossyLink, link_from
from loss_models import BernoulliLoss
from model import GPT, GPTConfig

SMALL = dict(block_size=16, vocab_size=37, n_head=4, n_embd=32, n_layer=4)


def loss_and_grads(sequence_parallel, block_types, tp_size, link=None, sync_fraction=1.0):
    torch.manual_seed(0)
    model = GPT(GPTConfig(**SMALL, tp_size=tp_size, block_types=block_types),
                SimComm(tp_size, link, sequence_parallel=sequence_parallel, sync_fraction=sync_fraction)).double()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # non-zero biases: GPT-2's init would hide a bias added on the wrong tokens
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.1)
    idx = torch.randint(SMALL["vocab_size"], (3, SMALL["block_size"]), generator=g)
    _, loss = model(idx, idx)
    loss.backward()
    return loss, {n: p.grad for n, p in model.named_parameters()}, model.comm


@pytest.mark.parametrize("block_types, tp_size, sync_fraction", [("tp", 2, 1.0), ("spd", 2, 1.0), ("parallel", 2, 1.0),
                                                                  ("tp,spd,parallel,parallel", 4, 1.0),
                                                                  ("tp,spd,parallel,parallel", 4, 0.5)])
def test_lossless_sequence_parallelism_is_the_model_without_it(block_types, tp_size, sync_fraction):
    """sync_fraction < 1: the shared channels reduce-scattered and all-gathered, the rest each rank's own."""
    loss, grads, comm = loss_and_grads(False, block_types, tp_size, sync_fraction=sync_fraction)
    sp_loss, sp_grads, sp_comm = loss_and_grads(True, block_types, tp_size, sync_fraction=sync_fraction)
    assert torch.allclose(sp_loss, loss, rtol=1e-12, atol=0)
    for name, grad in grads.items():
        assert torch.allclose(sp_grads[name], grad, rtol=1e-10, atol=1e-14), name
    # the same syncs and bytes: one reduce-scatter + one all-gather is one sync
    assert sp_comm.counter.totals()[:5] == comm.counter.totals()[:5]


def tokens(x, rank, T):
    n = x.shape[-2] // T
    return x[..., rank * n:(rank + 1) * n, :]


def mask(link, src, dst, direction, point, like):
    """A fresh link's draw for one message like `like` on src -> dst: arrived elements (True)."""
    n_packets, per = link.packets(like.numel(), like.element_size())
    return link.arrived(src, dst, direction, point, n_packets, "cpu").repeat_interleave(per)[:like.numel()].view_as(like)


def test_a_lossy_sequence_parallel_sync_against_a_per_rank_reference():
    T, B, L, C = 3, 2, 6, 5
    g = torch.Generator().manual_seed(0)
    b, d, grad_out = (torch.randn(T, B, L, C, generator=g, dtype=torch.float64) for _ in range(3))
    make = lambda: LossyLink(BernoulliLoss(0.3), seed=4, packet_bytes=24)  # 3 float64 per packet
    comm = SimComm(T, make(), sequence_parallel=True)
    b_, d_ = b.clone().requires_grad_(), d.clone().requires_grad_()
    out = comm.sync(b_, d_, "p")
    out.backward(grad_out)

    # the reference: each stream draws its reduce-scatter message first, then its all-gather one
    ref = make()
    rs = {(j, r): mask(ref, j, r, FWD, "p", tokens(d[j], r, T)) for r in range(T) for j in range(T) if j != r}
    ag = {(s, r): mask(ref, s, r, FWD, "p/gather", tokens(d[s], s, T)) for r in range(T) for s in range(T) if s != r}
    shard = [tokens(b[r] + d[r], r, T) + sum(torch.where(rs[j, r], tokens(d[j], r, T), 0) for j in range(T) if j != r)
             for r in range(T)]
    for r in range(T):
        for s in range(T):
            kept = tokens(b[r] + d[r], s, T)  # a lost element keeps the receiver's own state before the sync
            expected = shard[r] if s == r else torch.where(ag[s, r], shard[s], kept)
            assert torch.allclose(tokens(out[r], s, T), expected, rtol=0, atol=1e-12), (r, s)

    # backward: the all-gather's mirror is a reduce-scatter of the gradients, then the reduce-scatter's an
    # all-gather of the shards' gradients (zeros where lost); a kept element's gradient stays local: its
    # value never came from the shard's owner, so rank r sends the owner s nothing for it
    bwd_rs = {(r, s): mask(ref, r, s, BWD, "p", tokens(d[r], s, T)) for s in range(T) for r in range(T) if r != s}
    bwd_ag = {(s, j): mask(ref, s, j, BWD, "p/gather", tokens(d[s], s, T)) for j in range(T) for s in range(T) if s != j}
    grad_shard = [tokens(grad_out[s], s, T) + sum(torch.where(bwd_rs[r, s] & ag[s, r], tokens(grad_out[r], s, T), 0)
                                                  for r in range(T) if r != s) for s in range(T)]
    for r in range(T):
        for s in range(T):
            lost = torch.zeros_like(ag[0, 1]) if s == r else ~ag[s, r]
            kept_grad = torch.where(lost, tokens(grad_out[r], s, T), 0)
            through = grad_shard[s] if s == r else torch.where(bwd_ag[s, r], grad_shard[s], 0)
            assert torch.allclose(tokens(d_.grad[r], s, T), through + kept_grad, rtol=0, atol=1e-12), (r, s)
            own = grad_shard[r] if s == r else 0
            assert torch.allclose(tokens(b_.grad[r], s, T), own + kept_grad, rtol=0, atol=1e-12), (r, s)


def int8_codec(x):
    """int8 as the wire carries it, written out: a float32 scale per token (absmax / 127), values rounded."""
    scale = (x.abs().amax(-1, keepdim=True).clamp(min=1e-30) / 127).float().double()
    return (x / scale).round().clamp(-127, 127) * scale


def test_an_int8_sequence_parallel_sync_against_a_per_rank_reference():
    """sync_dtype='int8' under SP (two-shot): each half sends its message quantized per token, a rank's own
    contribution exact; over a lossy forward link a packet carries whole rows with their scales. The backward
    mirrors (lossless here) are quantized too: a reduce-scatter of the gradients, then an all-gather."""
    T, B, L, C = 3, 2, 6, 5
    g = torch.Generator().manual_seed(0)
    b, d, grad_out = (torch.randn(T, B, L, C, generator=g, dtype=torch.float64) for _ in range(3))
    make = lambda: LossyLink(BernoulliLoss(0.3), seed=4, packet_bytes=24, directions=(FWD,))  # 2 rows of 5 + 4 bytes
    comm = SimComm(T, make(), sequence_parallel=True, sync_dtype="int8")
    b_, d_ = b.clone().requires_grad_(), d.clone().requires_grad_()
    out = comm.sync(b_, d_, "p")
    out.backward(grad_out)

    ref = make()  # per stream: the reduce-scatter's 2 packets (4 rows), then the all-gather's
    rows = lambda j, r, point: ref.arrived(j, r, FWD, point, 2, "cpu").repeat_interleave(2).view(B, L // T, 1)
    rs = {(j, r): rows(j, r, "p") for r in range(T) for j in range(T) if j != r}
    ag = {(s, r): rows(s, r, "p/gather") for r in range(T) for s in range(T) if s != r}
    shard = [tokens(b[r] + d[r], r, T) + sum(torch.where(rs[j, r], int8_codec(tokens(d[j], r, T)), 0)
                                             for j in range(T) if j != r) for r in range(T)]
    for r in range(T):
        for s in range(T):
            kept = tokens(b[r] + d[r], s, T)
            expected = shard[r] if s == r else torch.where(ag[s, r], int8_codec(shard[s]), kept)
            assert torch.allclose(tokens(out[r], s, T), expected, rtol=0, atol=1e-12), (r, s)
    grad_shard = [tokens(grad_out[s], s, T) + sum(int8_codec(torch.where(ag[s, r], tokens(grad_out[r], s, T), 0))
                                                  for r in range(T) if r != s) for s in range(T)]
    for r in range(T):
        for s in range(T):
            kept_grad = 0 if s == r else torch.where(ag[s, r], 0, tokens(grad_out[r], s, T))
            through = grad_shard[r] if s == r else int8_codec(grad_shard[s])
            assert torch.allclose(tokens(d_.grad[r], s, T), through + kept_grad, rtol=0, atol=1e-12), (r, s)
            own = grad_shard[r] if s == r else 0
            assert torch.allclose(tokens(b_.grad[r], s, T), own + kept_grad, rtol=0, atol=1e-12), (r, s)


@pytest.mark.parametrize("directions", [(FWD, BWD), (FWD,)])
def test_each_half_counts_its_packets(directions):
    """Measured == analytic: per sync point and direction, each half sends T(T-1) messages of a 1/T of the
    message (a lossless direction of a lossy link counts them too); syncs and bytes as without SP."""
    link = link_from(dict(loss_model="bernoulli", loss_rate=0.1, packet_bytes=64, loss_bwd=BWD in directions))
    _, _, comm = loss_and_grads(True, "tp,spd,parallel,parallel", 4, link)
    B, T = 3, 4
    per_message = math.ceil(B * SMALL["block_size"] // T * SMALL["n_embd"] * 8 / 64)  # float64
    points = comm.link.stats()["points"]
    assert list(points) == ["h0.attn", "h0.attn/gather", "h0.mlp", "h0.mlp/gather", "h1.mlp", "h1.mlp/gather",
                            "exit", "exit/gather"]
    for point, stats in points.items():
        for direction in ("fwd", "bwd"):
            assert stats[direction]["packets_sent"] == T * (T - 1) * per_message, (point, direction)
        assert (stats["bwd"]["packets_lost"] > 0) == (BWD in directions)
    forward, backward, _, _, nbytes, _ = comm.counter.totals()
    assert (forward, backward) == (4, 4) and nbytes == 8 * B * SMALL["block_size"] * SMALL["n_embd"] * 8
    record = LossyLink.record(comm.link.stats())  # metrics.jsonl: the all-gather half's packets beside the totals
    assert 2 * record["packets_sent_gather"] == record["packets_sent"] == 8 * 2 * T * (T - 1) * per_message
    assert record["packets_lost_gather"] == sum(stats[d]["packets_lost"] for p, stats in points.items()
                                                if p.endswith("/gather") for d in ("fwd", "bwd"))


def test_a_reliable_link_under_sequence_parallelism_resends_each_half():
    """transport='reliable': the lossless SP run bit for bit; each half of each sync is a message on every link,
    in both passes, whose packets (1/T of the sync's) and resend rounds are counted under its own name."""
    link = link_from(dict(loss_model="bernoulli", loss_rate=0.1, packet_bytes=64, transport="reliable"))
    loss, grads, _ = loss_and_grads(True, "tp,spd,parallel,parallel", 4)
    reliable_loss, reliable_grads, comm = loss_and_grads(True, "tp,spd,parallel,parallel", 4, link)
    assert torch.equal(reliable_loss, loss) and all(torch.equal(reliable_grads[n], g) for n, g in grads.items())
    T, per_message = 4, math.ceil(3 * SMALL["block_size"] // 4 * SMALL["n_embd"] * 8 / 64)  # float64
    points = comm.link.stats()["points"]
    assert list(points) == ["h0.attn", "h0.attn/gather", "h0.mlp", "h0.mlp/gather", "h1.mlp", "h1.mlp/gather",
                            "exit", "exit/gather"]
    for point, stats in points.items():
        for direction in ("fwd", "bwd"):
            row = stats[direction]
            assert row["messages"] == sum(row["rounds_histogram"]) == T * (T - 1), (point, direction)
            assert row["packets_sent"] == row["messages"] * per_message + row["retransmissions"]
    assert comm.link.stats()["total"]["retransmissions"] > 0


def test_sequence_parallel_config_errors():
    base = {**configurator.train_defaults(), "sequence_parallel": True}
    for overrides, needle in [({"block_types": "tp,ladder"}, "ladder blocks"),
                              ({"block_schedule": "0:tp;5:ladder"}, "ladder blocks"),
                              ({"tp_size": 1}, "needs tp_size > 1"), ({"block_size": 33}, "block_size=33")]:
        with pytest.raises(configurator.ConfigError, match=needle):
            configurator.check_train_config({**base, **overrides})
    configurator.check_train_config(base)  # the defaults with SP: allowed, and around megatron-core's layers
    configurator.check_train_config({**base, "tp_mode": "dist", "tp_backend": "megatron"})
    with pytest.raises(ValueError, match="ladder"):  # the model refuses it too, to a caller outside train.py
        GPT(GPTConfig(**SMALL, tp_size=2, block_types="ladder"), SimComm(2, sequence_parallel=True))


@pytest.mark.parametrize("extra", [[], ["--sync_dtype=int8"], *(pytest.param(e, marks=pytest.mark.slow) for e in (
    ["--sync_fraction=0.5"], ["--sync_dtype=int8", "--sync_rotation=hadamard"], ["--sync_dtype=bfloat16"],
    ["--sync_dtype=int8", "--loss_model=none"]))])
def test_dist_equals_sim_under_sequence_parallelism_lossy(char_data, tmp_path, extra):
    """Lossy SP: `dist` (reduce_scatter/all_to_all, all_gather) draws and computes what `sim` does; its
    collectives are handed the message (reduce-scatter) and a 1/T shard (all-gather), quantized: their wire
    bytes, payload and scales. A partial sync, int8 rotated, bfloat16, and int8 over a lossless network too."""
    args = [*SMALL_ARGS, f"--data_dir={char_data}", "--n_layer=4", "--max_iters=4", "--tp_size=2",
            "--block_types=tp,spd,parallel,spd", "--sequence_parallel=True",
            *([] if "--loss_model=none" in extra else ["--loss_model=bernoulli", "--loss_rate=0.05", "--packet_bytes=64"]),
            *extra]
    sim_dir, dist_dir = str(tmp_path / "sim"), str(tmp_path / "dist")
    assert run_train(*args, f"--out_dir={sim_dir}").returncode == 0
    result = torchrun(2, *args, "--tp_mode=dist", f"--out_dir={dist_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "syncs: reduce-scatter + all-gather (sequence parallel)" + (" of int8 |" if "--sync_dtype=int8" in extra else "") \
        in result.stdout.splitlines()[0]  # the layout line says how a sync crosses
    sim, dst = records(sim_dir), records(dist_dir)
    assert [r["iter"] for r in sim] == [r["iter"] for r in dst]
    for a, b in zip(sim, dst):
        for key in ("train_loss", "val_loss"):
            if key in a:
                assert abs(a[key] - b[key]) < 5e-5, (a["iter"], key, a[key], b[key])
        for key in ("packets_sent", "packets_lost", "packets_lost_bwd", "syncs_measured", "sync_bytes_per_token"):
            assert a.get(key) == b.get(key), (a["iter"], key)
        if "val_loss" not in b:
            assert b["syncs_measured"] == b["sync_points"] and (b.get("packets_lost", 0) > 0) == ("--loss_model=none" not in extra)
            if "--sync_rotation=hadamard" not in extra:  # rotated, the counted message is padded as one, the chunks each
                assert b["sync_bytes_moved_per_token"] == b["sync_bytes_per_token"] * (1 + 1 / 2)


@pytest.mark.parametrize("extra", [[], *(pytest.param(e, marks=pytest.mark.slow) for e in
                                         (["--activation_checkpointing=block"], ["--sync_fraction=0.5"]))])
def test_lossless_sequence_parallel_dist_is_the_all_reduce_run(char_data, tmp_path, extra):
    """A reduce-scatter and an all-gather (gloo) train as the all-reduce does, with what autograd saves of a
    gathered state kept as this rank's shard and gathered again in the backward pass; checkpointed too; a
    partial sync (its state differs between ranks: nothing kept as shards)."""
    args = [*SMALL_ARGS, f"--data_dir={char_data}", "--tp_size=2", "--block_types=tp,spd,parallel", *extra]
    plain, sp = str(tmp_path / "plain"), str(tmp_path / "sp")
    assert run_train(*args, f"--out_dir={plain}").returncode == 0
    result = torchrun(2, *args, "--tp_mode=dist", "--sequence_parallel=True", f"--out_dir={sp}")
    assert result.returncode == 0, result.stderr[-2000:]
    kept = "--sync_fraction=0.5" not in extra  # a partial sync's states differ between ranks: no shards
    assert ("(sequence parallel, saved states kept as shards)" in result.stdout.splitlines()[0]) == kept
    for a, b in zip(records(plain), records(sp)):
        for key in ("train_loss", "val_loss"):
            if key in a:
                assert abs(a[key] - b[key]) < 5e-5, (a["iter"], key, a[key], b[key])


def test_a_kept_shard_is_only_the_live_state_it_was_kept_for():
    """A freed gathered state's id taken by a rank's own state (CPython reuses it at once, and how soon differs
    between ranks): that state is not kept as a shard, else one rank gathers it in the backward pass where the
    other does not, and both hang (seen: --sync_fraction=0.5 under SP hung 7 runs in 11). A partial sync keeps none."""
    comm, norm = DistComm(2, LosslessLink(), sequence_parallel=True), torch.nn.LayerNorm(8)
    with comm.saving_shards():
        kept = torch.randn(1, 2, 4, 8, requires_grad=True) * 1.0
        comm.keep_shard(kept)
        normed = comm.normed(norm, kept)
        assert comm._pack(normed) is not normed  # what autograd saves of a LayerNorm of a kept state: its shard
        del normed
        entry = comm.shards.pop(id(kept))
        del kept
        # CPython gives a freed id to the next object that fits, but how soon depends on the allocator's state (a
        # search for the reuse failed in the full suite), so the stale entry is put under the new state's id by hand.
        own = torch.randn(1, 2, 4, 8, requires_grad=True) * 1.0
        comm.shards[id(own)] = entry
        assert entry[0]() is None  # its state is gone: only the weak reference tells the entry is stale
        normed = comm.normed(norm, own)
        assert comm._pack(own) is own and comm._pack(normed) is normed  # saved whole, as they are
    partial = DistComm(2, LosslessLink(), sequence_parallel=True, sync_fraction=0.5)
    with partial.saving_shards():
        assert partial.shards is None


def test_a_checkpoint_is_rebuilt_with_its_sequence_parallelism():
    """checkpoint.model_as_run (eval_noise, sensitivity): a run that quantized its syncs under SP computed the
    two-shot sync, another function than one-shot, so the rebuilt model must keep SP; sample.py asks for it off
    (a growing sample does not split into shards) and says so."""
    import checkpoint as ckpt
    args = dict(SMALL, tp_size=2, block_types="tp")
    run = GPT(GPTConfig(**args), SimComm(2, sync_dtype="int8", sequence_parallel=True))
    saved = {"model_args": args, "model": run.state_dict(), "iter_num": 0,
             "config": {"sync_dtype": "int8", "sequence_parallel": True}}
    idx = torch.randint(SMALL["vocab_size"], (2, SMALL["block_size"]), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logged = run.eval()(idx, idx)[1]
        rebuilt = ckpt.model_as_run(saved, "cpu").eval()
        assert rebuilt.comm.sequence_parallel and torch.equal(rebuilt(idx, idx)[1], logged)
        one_shot = ckpt.model_as_run(saved, "cpu", sequence_parallel=False).eval()
        assert not one_shot.comm.sequence_parallel and not torch.equal(one_shot(idx, idx)[1], logged)
