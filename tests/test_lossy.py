"""Lossy links: loss statistics against theory, reproducibility, and what a lost packet does."""

import json
import math
import os

import numpy as np
import pytest
import torch

from bench.harness import draw, records, run_train, runs, standard_error
from comms import SimComm
from conftest import TINY, assert_one_line_error
from links import BWD, FWD, GE_PRESETS, BernoulliLoss, GilbertElliottLoss, LosslessLink, LossyLink, link_from
from model import GPT, GPTConfig

N = 2_000_000  # packets per statistical check
# Every threshold below is 4 standard errors of the sample at hand, so the fast tier's
# smaller sample checks the same claims, only less tightly; the full size is `slow`.
SIZES = [pytest.param(N // 10, id="fast"), pytest.param(N, id="full", marks=pytest.mark.slow)]


def burst_tolerance(mean_burst, n_bursts):
    """4 standard errors of the mean of n_bursts geometric run lengths of mean mean_burst."""
    return 4 * math.sqrt(1 - 1 / mean_burst) * mean_burst / math.sqrt(n_bursts)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("rate", [0.001, 0.01, 0.1, 0.5])
def test_bernoulli_loss_rate_and_bursts_match_theory(rate, n):
    link = LossyLink(BernoulliLoss(rate), seed=11)
    lost = draw(link, n)
    assert abs(lost.mean() - rate) < 4 * standard_error(link.model, len(lost))
    bursts, _ = runs(lost)
    # loss bursts of independent packets are geometric with mean 1/(1-q)
    assert abs(bursts.mean() - 1 / (1 - rate)) < burst_tolerance(1 / (1 - rate), len(bursts))
    stats = link.stats()["fwd"]
    assert stats["packets_sent"] == len(lost) and stats["packets_lost"] == lost.sum()
    # bursts are counted across message boundaries, as one packet stream
    assert stats["loss_bursts"] == int(lost[0]) + int((lost[1:] & ~lost[:-1]).sum())


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("preset", ["light", "moderate", "heavy", "bursty", "noisy"])
def test_gilbert_elliott_loss_rate_matches_theory(preset, n):
    model = GilbertElliottLoss(*GE_PRESETS[preset])
    lost = draw(LossyLink(model, seed=12), n)
    assert abs(lost.mean() - model.stationary_loss) < 4 * standard_error(model, len(lost))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("preset", ["moderate", "bursty", "noisy"])
def test_gilbert_elliott_state_runs_are_geometric(preset, n):
    model = GilbertElliottLoss(*GE_PRESETS[preset])
    link = LossyLink(model, seed=13)
    stream = link.stream(0, 1, FWD, "cpu")
    bad = np.concatenate([model.bad_states(n // 20, stream).numpy() for _ in range(20)])
    bad_runs, good_runs = runs(bad)
    for observed, q in ((bad_runs, model.r), (good_runs, model.p)):
        assert abs(observed.mean() - 1 / q) < 4 * math.sqrt(1 - q) / q / math.sqrt(len(observed))
    assert int(stream.overflow) == 0


@pytest.mark.parametrize("n", SIZES)
def test_gilbert_elliott_bursts_differ_from_bernoulli_at_the_same_rate(n):
    ge = GilbertElliottLoss(*GE_PRESETS["bursty"])
    ge_lost = draw(LossyLink(ge, seed=14), n)
    be_lost = draw(LossyLink(BernoulliLoss(ge.stationary_loss), seed=14), n)
    ge_bursts, be_bursts = runs(ge_lost)[0], runs(be_lost)[0]
    bernoulli_burst = 1 / (1 - ge.stationary_loss)
    assert abs(be_bursts.mean() - bernoulli_burst) < burst_tolerance(bernoulli_burst, len(be_bursts))
    assert ge_bursts.mean() / bernoulli_burst > 5  # the burst ratio: ~10 for this preset
    # bursty has k=1, h=0: a loss burst is a bad-state run, geometric with mean 1/r
    assert abs(ge_bursts.mean() - ge.mean_burst) < burst_tolerance(ge.mean_burst, len(ge_bursts))
    # noisy (k < 1, h > 0: losses in both states, arrivals in the bad one): the general formula against the
    # measured mean burst, within 4 empirical standard errors
    noisy = GilbertElliottLoss(*GE_PRESETS["noisy"])
    bursts = runs(draw(LossyLink(noisy, seed=15), n))[0]
    assert abs(bursts.mean() - noisy.mean_burst) < 4 * bursts.std() / math.sqrt(len(bursts))


def test_a_tiny_bernoulli_rate_is_drawn_at_float64_resolution():
    """float32 uniforms step by 2^-24 = 6e-8: a rate of 2e-8 drawn in float32 loses 3x as often (u == 0 counts).
    Below 1e-4 the draw is float64; at the studies' rates it is the float32 draw it always was."""
    for rate, dtype in ((2e-8, torch.float64), (0.01, torch.float32)):
        lost = BernoulliLoss(rate).sample(100_000, LossyLink(BernoulliLoss(rate), seed=4).stream(0, 1, FWD, "cpu"))
        generator = LossyLink(BernoulliLoss(rate), seed=4).stream(0, 1, FWD, "cpu").generator
        assert torch.equal(lost, torch.rand(100_000, generator=generator, dtype=dtype) < rate)


def test_a_chain_that_never_leaves_a_state_takes_integer_probabilities():
    """p = 0 written as an int (a direct caller's GilbertElliottLoss(0, ...)): the good state is never left,
    as with 0.0 (an int 0 made log1p(-p) +0.0, and the run lengths came out negative)."""
    stream = LossyLink(GilbertElliottLoss(0.0, 0.5, 0.9, 0.0), seed=3).stream(0, 1, FWD, "cpu")
    assert not GilbertElliottLoss(0, 0.5, 0.9, 0).draw_states(1000, stream).any()


@pytest.mark.parametrize("messages", [pytest.param(2_000, id="fast"),
                                      pytest.param(100_000, id="full", marks=[pytest.mark.slow, pytest.mark.timeout(300)])])
@pytest.mark.parametrize("draw_name", ["draw_states", "bad_states"])
def test_chain_state_carries_over_between_messages(draw_name, messages):
    """n-packet messages have the statistics of one long message: boundaries are not resets.

    draw_states is the sampler itself (each call a fresh set of runs); bad_states serves
    messages from states drawn a block ahead.
    """
    model = GilbertElliottLoss(0.02, 0.2, 1.0, 0.0)
    stream = LossyLink(model, seed=15).stream(0, 1, FWD, "cpu")
    n = 10  # 10 * messages packets in tiny messages
    draw = getattr(model, draw_name)
    bad = np.stack([draw(n, stream).numpy() for _ in range(messages)])  # (messages, n)
    last, first_next = bad[:-1, -1], bad[1:, 0]  # pairs across message boundaries
    for prev_bad, p_next_bad in ((True, 1 - model.r), (False, model.p)):
        sel = last == prev_bad
        observed = first_next[sel].mean()
        assert abs(observed - p_next_bad) < 4 * math.sqrt(p_next_bad * (1 - p_next_bad) / sel.sum())
    bad_runs, good_runs = runs(bad.reshape(-1))
    assert abs(bad_runs.mean() - 1 / model.r) < 4 * math.sqrt(1 - model.r) / model.r / math.sqrt(len(bad_runs))
    assert abs(good_runs.mean() - 1 / model.p) < 4 * math.sqrt(1 - model.p) / model.p / math.sqrt(len(good_runs))


def test_same_seed_same_masks_and_independent_streams():
    model = GilbertElliottLoss(*GE_PRESETS["noisy"])
    a = draw(LossyLink(model, seed=3), 200_000)
    assert np.array_equal(a, draw(LossyLink(model, seed=3), 200_000))
    others = [draw(LossyLink(model, seed=4), 200_000), draw(LossyLink(model, seed=3), 200_000, src=1, dst=0),
              draw(LossyLink(model, seed=3), 200_000, direction=BWD),
              draw(LossyLink(model, seed=3, tp_group=1), 200_000)]
    for b in others:
        assert not np.array_equal(a, b)
        # independent streams: the loss indicators are uncorrelated (|r| < 4/sqrt(n))
        assert abs(np.corrcoef(a, b)[0, 1]) < 4 / math.sqrt(len(a))


def sync_with(link, b, d, direction_grads=None):
    comm = SimComm(d.shape[0], link)
    b = b.clone().requires_grad_()
    d = d.clone().requires_grad_()
    out = comm.sync(b, d, "p")
    if direction_grads is not None:
        out.backward(direction_grads if out.shape[0] == direction_grads.shape[0] else direction_grads.sum(0, keepdim=True))
    return out, b.grad, d.grad


def test_own_contribution_never_lost_and_total_loss_keeps_only_it():
    R = 3
    b, d = torch.randn(1, 2, 8, 4), torch.randn(R, 2, 8, 4)
    out, _, _ = sync_with(LossyLink(BernoulliLoss(1.0), seed=0, packet_bytes=16), b, d)
    assert torch.equal(out, b + d)  # each rank: its own b + its own d_r, nothing else
    link = LossyLink(BernoulliLoss(0.3), seed=0, packet_bytes=16)
    out, _, _ = sync_with(link, b, d)
    # recompute the masks with a fresh link of the same seed, in the same order
    replay = LossyLink(BernoulliLoss(0.3), seed=0, packet_bytes=16)
    n_packets, per = replay.packets(d[0].numel(), d.element_size())
    for r in range(R):
        expected = b[0] + d[r]
        for j in range(R):
            if j != r:
                keep = replay.arrived(j, r, FWD, "p", n_packets, "cpu").repeat_interleave(per)[:d[0].numel()]
                expected = expected + torch.where(keep.view_as(d[j]), d[j], 0)
        assert torch.allclose(out[r], expected, atol=1e-6)
    assert 0 < link.stats()["fwd"]["packets_lost"] < link.stats()["fwd"]["packets_sent"]


def test_loss_direction_is_respected():
    R = 2
    b, d, g = torch.randn(1, 4, 300), torch.randn(R, 4, 300), torch.randn(R, 4, 300)
    clean_out, clean_b, clean_d = sync_with(LosslessLink(), b, d, g)
    fwd_out, fwd_b, fwd_d = sync_with(LossyLink(BernoulliLoss(0.5), 1, directions=(FWD,), packet_bytes=64), b, d, g)
    bwd_out, bwd_b, bwd_d = sync_with(LossyLink(BernoulliLoss(0.5), 1, directions=(BWD,), packet_bytes=64), b, d, g)
    # forward-only loss: different forward values, the backward exchange untouched
    assert not torch.allclose(fwd_out, clean_out.expand_as(fwd_out))
    assert torch.allclose(fwd_d, g.sum(0, keepdim=True).expand(R, -1, -1))
    # backward-only loss: the forward values untouched, the gradients of d changed
    assert torch.equal(bwd_out, clean_out.expand_as(bwd_out))
    assert torch.allclose(bwd_b, clean_b)
    assert not torch.allclose(bwd_d, clean_d)


def test_zero_preset_is_bit_identical_to_lossless():
    results = []
    for link in (LosslessLink(), link_from({"loss_model": "gilbert_elliott", "ge_preset": "zero", "seed": 0})):
        torch.manual_seed(0)
        model = GPT(GPTConfig(block_size=16, vocab_size=37, n_layer=4, n_head=4, n_embd=32,
                              tp_size=2, block_types="parallel,spd"), SimComm(2, link))
        idx = torch.randint(37, (2, 16), generator=torch.Generator().manual_seed(1))
        logits, loss = model(idx, idx)
        loss.backward()
        results.append((logits, loss, [p.grad for p in model.parameters()], link))
    (l0, loss0, g0, _), (l1, loss1, g1, link) = results
    assert torch.equal(l0, l1) and torch.equal(loss0, loss1)
    assert all(torch.equal(a, b) for a, b in zip(g0, g1))
    stats = link.stats()
    assert stats["total"]["packets_sent"] > 0 and stats["total"]["packets_lost"] == 0


@pytest.mark.parametrize("kwargs, message", [
    (dict(loss_model="bernoulli", loss_rate=1.5), "loss_rate=1.5 must be in [0, 1]"),
    (dict(loss_model="gilbert_elliott", ge_preset="stormy"), "ge_preset='stormy' is not a preset"),
    (dict(loss_model="gilbert_elliott", ge_p=0.0, ge_r=0.0, ge_k=1.0, ge_h=0.0), "ge_p + ge_r = 0"),
    (dict(loss_model="gilbert_elliott", ge_p=2.0), "ge_p=2.0 must be in [0, 1]"),
    (dict(loss_model="bernoulli", loss_fwd=False, loss_bwd=False), "drops nothing"),
    (dict(loss_model="erasure"), "loss_model='erasure'"),
    (dict(loss_model="bernoulli", packet_bytes=2), "packet_bytes=2 must be at least 4"),
])
def test_link_from_errors(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]").replace("+", r"\+")):
        link_from(kwargs)


def test_preset_overrides_key_by_key():
    link = link_from({"loss_model": "gilbert_elliott", "ge_preset": "bursty", "ge_r": 0.2})
    assert (link.model.p, link.model.r) == (GE_PRESETS["bursty"][0], 0.2)


def test_lossy_training_run_logs_statistics(char_data, tmp_path):
    out = str(tmp_path / "lossy")
    result = run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={out}", "--max_iters=20",
                       "--tp_size=2", "--block_types=spd", "--loss_model=bernoulli", "--loss_rate=0.01",
                       "--packet_bytes=64")
    assert result.returncode == 0, result.stderr
    assert "loss model: bernoulli(loss_rate=0.01) on fwd+bwd, stationary loss 1.0000%" in result.stdout
    logged = records(out)
    steps = [r for r in logged if "val_loss" not in r]
    evals = [r for r in logged if "val_loss" in r]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"] - 0.3
    last = steps[-1]
    for key in ("packets_sent", "packets_lost", "observed_loss_rate", "packets_sent_fwd", "packets_lost_bwd",
                "observed_loss_rate_fwd", "observed_loss_rate_bwd", "loss_bursts", "mean_burst_length"):
        assert key in last, key
    # 20 steps x 4 sync points x 2 directions x 2 links x 512 packets (8x32x32 fp32 in 64-byte packets)
    assert last["packets_sent"] == 20 * 4 * 2 * 2 * 512
    assert abs(last["observed_loss_rate"] - 0.01) < 4 * math.sqrt(0.01 * 0.99 / last["packets_sent"])
    stats = json.load(open(os.path.join(out, "link_stats.json")))
    assert list(stats["points"]) == ["h0.mlp", "h1.mlp", "h2.mlp", "h3.mlp"]
    assert stats["total"]["packets_lost"] == last["packets_lost"]


@pytest.mark.parametrize("extra", [[], pytest.param(["--sequence_parallel=True"], marks=pytest.mark.slow)])
def test_lossy_resume_draws_what_an_unbroken_run_draws(char_data, tmp_path, extra):
    """Also under sequence parallelism, whose two halves draw from the same streams."""
    common = [*TINY, f"--data_dir={char_data}", "--always_save_checkpoint=True", "--loss_model=gilbert_elliott",
              "--ge_preset=heavy", "--packet_bytes=64", "--block_types=parallel,spd", *extra]
    straight, broken = str(tmp_path / "straight"), str(tmp_path / "broken")
    assert run_train(*common, "--max_iters=20", f"--out_dir={straight}").returncode == 0
    assert run_train(*common, "--max_iters=10", "--lr_decay_iters=20", f"--out_dir={broken}").returncode == 0
    second = run_train(*common, "--max_iters=20", "--init_from=resume", f"--out_dir={broken}")
    assert second.returncode == 0, second.stderr
    assert "step 10:" in second.stdout and "iter 11:" in second.stdout and "iter 1:" not in second.stdout
    # the same log but for timing: losses bit for bit (CPU, fp32), every packet statistic, the counts
    timing = ("ms_per_iter", "tokens_per_s", "mfu", "time_s")
    logs = [[{k: v for k, v in r.items() if k not in timing} for r in records(o)] for o in (straight, broken)]
    assert logs[0] == logs[1] and any(r.get("packets_lost") for r in logs[0])


@pytest.mark.slow
def test_lossy_config_errors_through_train(char_data, tmp_path):
    base = [f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--max_iters=1"]
    assert_one_line_error(run_train(*base, "--loss_model=bernoulli", "--loss_rate=-0.1"), "loss_rate=-0.1")
    assert_one_line_error(run_train(*base, "--loss_model=gilbert_elliott", "--ge_preset=nope"), "ge_preset='nope'")
    assert_one_line_error(run_train(*base, "--loss_model=bernoulli", "--tp_size=1"), "needs tp_size > 1")
    assert_one_line_error(run_train(*base, "--loss_model=gilbert_elliott", "--ge_p=0", "--ge_r=0"), "ge_p + ge_r = 0")


def test_link_defaults_are_train_py_defaults():
    import configurator
    from links import LINK_DEFAULTS
    defaults = configurator.train_defaults()
    assert LINK_DEFAULTS == {key: defaults[key] for key in LINK_DEFAULTS}


def test_the_docs_preset_table_matches_the_chains():
    """The Gilbert-Elliott table of docs/lossy-links.md (the README links it; p, r, k, h, stationary loss,
    mean loss burst) is the code's."""
    from conftest import ROOT
    with open(os.path.join(ROOT, "docs", "lossy-links.md")) as f:
        rows = [line.split("|")[1:-1] for line in f if line.startswith("| `") and line.split("|")[1].strip(" `") in GE_PRESETS]
    assert {row[0].strip(" `") for row in rows} == set(GE_PRESETS)
    for name, p, r, k, h, loss, _, burst in ([c.strip(" `") for c in row] for row in rows):
        model = GilbertElliottLoss(*GE_PRESETS[name])
        assert tuple(float(v) for v in (p, r, k, h)) == GE_PRESETS[name], name
        assert f"{model.stationary_loss:.3%}" == loss, name
        assert f"{model.mean_burst:.2f}" == burst, name
