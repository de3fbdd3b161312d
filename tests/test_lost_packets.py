"""What happens to a lost packet (README, "When packets are lost"): lost_fill='rescale',
sync_rotation='hadamard' and transport='reliable', and the resend rounds bench/step_time.py prices."""

import json
import math
import os

import numpy as np
import pytest
import scipy.linalg
import torch

from bench.harness import link_args, records, run_train, torchrun
from bench.step_time import rounds_cdf
from comms import SimComm
from conftest import SMALL, TINY, assert_one_line_error
from links import BWD, FWD, LosslessLink, link_from
from masks import AllArrive
from quantize import decode, wire_encode
from model import GPT, GPTConfig
from rotation import blocks, hadamard, transform
from test_dist import assert_same_run


class LoseOnly:
    """A mask source that loses exactly the packets `lost` of every message (and draws nothing)."""
    points = ()

    def __init__(self, lost):
        self.lost = lost

    def arrived(self, link, key, point, n_packets, device):
        arrived = torch.ones(n_packets, dtype=torch.bool, device=device)
        arrived[list(self.lost)] = False
        return arrived


def received(link, message, direction=FWD):
    """What rank 0 holds of rank 1's message after one crossing of link 1 -> 0 (its own part zero)."""
    return link.receive(torch.zeros_like(message), [torch.zeros_like(message), message], 0, direction, "p")


@pytest.mark.parametrize("rate", [0.02, 0.1, 0.3])
def test_rescale_is_unbiased(rate):
    """Mean received message over many draws == the sent one within its standard error; zero fill's is (1 - q) x."""
    message = torch.randn(64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    draws = 4000
    for fill, mean_share in (("rescale", 1.0), ("zero", 1 - rate)):
        link = link_from({"loss_model": "bernoulli", "loss_rate": rate, "packet_bytes": 16, "lost_fill": fill, "seed": 1})
        got = torch.stack([received(link, message) for _ in range(draws)])
        z = (got.mean(0) - mean_share * message) / (got.std(0) / math.sqrt(draws))
        assert z.abs().max() < 4.5, (fill, z.abs().max())  # every one of 64 elements (Bonferroni, about 0.05%)
        # the whole message: the relative bias of its received sum, and that bias's standard error
        total = got.sum(1) / message.sum()
        bias, se = total.mean() - 1, total.std() / math.sqrt(draws)
        assert abs(bias - (mean_share - 1)) < 4 * se, (fill, bias, se)
        print(f"q={rate} {fill}: relative bias of the received sum {bias:+.5f} (standard error {se:.5f})")


def test_both_arrive_is_the_chains_two_packet_arrival():
    """P(a packet and the one d after it both arrive): (1 - q)^2 under Bernoulli; under Gilbert-Elliott
    pi diag(a) T^d a, with T the chain's transition matrix raised by numpy (an independent reference)."""
    assert link_from({"loss_model": "bernoulli", "loss_rate": 0.3}).model.both_arrive(3) == pytest.approx(0.49)
    p, r, k, h = 0.05, 0.3, 0.98, 0.2
    model = link_from({"loss_model": "gilbert_elliott", "ge_p": p, "ge_r": r, "ge_k": k, "ge_h": h}).model
    T, a = np.array([[1 - p, p], [r, 1 - r]]), np.array([k, h])
    pi = np.array([r, p]) / (p + r)
    for d in (1, 2, 5, 40):
        assert model.both_arrive(d) == pytest.approx(pi @ np.diag(a) @ np.linalg.matrix_power(T, d) @ a, rel=1e-12), d
    assert model.both_arrive(1) > (1 - model.stationary_loss) ** 2  # losses come in runs: arrivals too


@pytest.mark.parametrize("loss", [{"loss_model": "bernoulli", "loss_rate": 0.3},
                                  {"loss_model": "gilbert_elliott", "ge_p": 0.2, "ge_r": 0.4, "ge_k": 0.95, "ge_h": 0.3}])
def test_rescale_is_unbiased_where_an_int8_row_spans_packets(loss):
    """An int8 row of 40 values and its 4-byte scale over 16-byte packets spans three, its scale in the first:
    a value past the first packet needs two packets, and rescale divides it by that chance (quantize.rescaled).
    Mean received over many draws == the decoded message, per channel, for both loss models."""
    C, draws = 40, 4000
    link = link_from({**loss, "packet_bytes": 16, "lost_fill": "rescale", "seed": 1})
    message = torch.linspace(1, 2, C, dtype=torch.float64).view(1, C)
    wires = [link.encode(torch.zeros_like(message), 0, FWD, torch.int8), link.encode(message, 1, FWD, torch.int8)]
    decoded = decode(*wire_encode(message, torch.int8), torch.float64)[0]  # what a lossless crossing delivers
    got = torch.stack([link.receive_encoded(torch.zeros(C, dtype=torch.float64), wires, 0, FWD, "p", torch.int8, message.shape)
                       for _ in range(draws)])
    z = (got.mean(0) - decoded) / (got.std(0) / math.sqrt(draws))
    assert z.abs().max() < 4.5, z.abs().max()  # 40 channels, Bonferroni: about 0.03%
    # the values past the first packet are the ones the old 1 / (1 - q) left short, by a factor 1 - q
    past = (4 + torch.arange(C)) >= 16
    assert past.sum() == 28 and got.mean(0)[past].mean() / decoded[past].mean() == pytest.approx(1, abs=0.03)


def test_hadamard_blocks_and_inverse_are_exact():
    assert blocks(13) == [(0, 8), (8, 4), (12, 1)] and blocks(64) == [(0, 64)] and blocks(0) == []
    for K in (2, 8, 16, 2048):  # K = a * b: (1, 2), (2, 4), (4, 4), (32, 64)
        x = torch.randn(K, 3, dtype=torch.float64)
        reference = torch.tensor(scipy.linalg.hadamard(K), dtype=torch.float64) / K ** 0.5  # an independent matrix
        assert torch.allclose(hadamard(x), reference @ x, atol=1e-13, rtol=0), K
    # under bf16 autocast (a CUDA run's default) the GEMMs stay in the message's float32
    x = torch.randn(512, 7)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rotated = hadamard(x)
    assert rotated.dtype == torch.float32 and torch.allclose(rotated.double(), hadamard(x.double()), atol=1e-5, rtol=0)
    y = torch.randn(13, 5, dtype=torch.float64)
    assert torch.allclose(transform(transform(y)), y, atol=1e-14, rtol=0)  # orthonormal: its own inverse
    # through a lossy link on which every packet arrives: 1000 elements, 4 per packet (250 packets: 128+64+32+16+8+2)
    for dtype, tol in ((torch.float64, 1e-13), (torch.float32, 1e-5)):
        link = link_from({"loss_model": "bernoulli", "loss_rate": 0.5, "packet_bytes": 4 * torch.finfo(dtype).bits // 8,
                          "sync_rotation": "hadamard"})
        message = torch.randn(1000, dtype=dtype)
        with link.masks_from(AllArrive()):
            assert torch.allclose(received(link, message), message, atol=tol, rtol=0)
    # 1003 elements: a short last packet, filled out with zeros on the wire
    link = link_from({"loss_model": "bernoulli", "loss_rate": 0.5, "packet_bytes": 32, "sync_rotation": "hadamard"})
    message = torch.randn(1003, dtype=torch.float64)
    with link.masks_from(AllArrive()):
        assert torch.allclose(received(link, message), message, atol=1e-13, rtol=0)


def test_a_lost_packet_under_rotation_changes_every_channel_of_its_block_a_little():
    tokens, channels = 32, 32
    message = torch.randn(tokens * channels, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    errors = {}
    for rotation in ("none", "hadamard"):  # 8 elements per packet: 128 packets, one block
        link = link_from({"loss_model": "bernoulli", "loss_rate": 0.5, "packet_bytes": 64, "sync_rotation": rotation})
        with link.masks_from(LoseOnly([37])):
            errors[rotation] = (received(link, message) - message).view(tokens, channels)
    plain, spread = errors["none"], errors["hadamard"]
    assert (plain != 0).sum() == 8 and torch.equal(plain.flatten()[37 * 8:38 * 8], -message[37 * 8:38 * 8].view(1, 8)[0])
    assert bool((spread.abs() > 0).all())  # every channel of every token of the block
    # the energy lost is that of one packet either way; spread over 128 packets, each element's share is small
    print(f"one lost packet of 128: zero fill changes {(plain != 0).sum()} elements, largest {plain.abs().max():.3f}; "
          f"hadamard changes {(spread != 0).sum()} elements, largest {spread.abs().max():.3f}, rms {spread.pow(2).mean().sqrt():.4f}")
    assert spread.abs().max() < plain.abs().max() / 4
    assert 0.1 < spread.pow(2).sum() / plain.pow(2).sum() < 10


def test_rotation_signs_are_seeded_and_per_sender():
    one = link_from({"loss_model": "bernoulli", "loss_rate": 0.1, "sync_rotation": "hadamard", "seed": 5})
    two = link_from({"loss_model": "bernoulli", "loss_rate": 0.1, "sync_rotation": "hadamard", "seed": 5})
    assert torch.equal(one.rotate.signs(1, FWD, 512, "cpu"), two.rotate.signs(1, FWD, 512, "cpu"))
    assert not torch.equal(one.rotate.signs(1, FWD, 512, "cpu"), one.rotate.signs(0, FWD, 512, "cpu"))
    assert not torch.equal(one.rotate.signs(1, FWD, 512, "cpu"), one.rotate.signs(1, BWD, 512, "cpu"))


def forward_backward(link, seed=0, block_types="tp,spd,parallel", **sync):
    torch.manual_seed(seed)
    model = GPT(GPTConfig(block_size=16, vocab_size=37, n_layer=3, n_head=4, n_embd=32, tp_size=2,
                          block_types=block_types), SimComm(2, link, **sync))
    idx = torch.randint(37, (2, 16), generator=torch.Generator().manual_seed(1))
    logits, loss = model(idx, idx)
    loss.backward()
    return logits, loss, [p.grad for p in model.parameters()]


@pytest.mark.parametrize("loss", [dict(loss_model="bernoulli", loss_rate=0.1),
                                  dict(loss_model="gilbert_elliott", ge_preset="bursty", ge_p=0.01)])
def test_reliable_is_lossless_in_process_and_counts_rounds(loss):
    """Forward and backward, Bernoulli and Gilbert-Elliott: every value the lossless model's, bit for bit."""
    link = link_from({**loss, "packet_bytes": 64, "transport": "reliable"})
    (l0, loss0, g0), (l1, loss1, g1) = forward_backward(LosslessLink()), forward_backward(link)
    assert torch.equal(l0, l1) and torch.equal(loss0, loss1) and all(torch.equal(a, b) for a, b in zip(g0, g1))
    stats = link.stats()
    for direction in ("fwd", "bwd"):
        row = stats[direction]
        assert row["retransmissions"] == row["packets_lost"] > 0
        assert row["messages"] == 4 * 2  # 4 sync points (tp: 2, spd: 1, the exit after parallel: 1) x 2 links
        assert row["packets_sent"] == row["messages"] * 64 + row["retransmissions"]  # 2x16x32 fp32, 64-byte packets
        assert sum(row["rounds_histogram"]) == row["messages"] and row["resend_rounds"] >= row["messages_resent"]


def test_the_options_apply_to_every_sync_scheme():
    """Hide and shrink (DESIGN section 8): reliable is lossless bit for bit for ladder, partial and int8
    syncs too; rescale and rotation change what a lossy ladder / partial / int8 sync delivers."""
    scheme = dict(block_types="ladder,parallel,ladder", sync_fraction=0.5, sync_dtype="int8")
    loss = dict(loss_model="bernoulli", loss_rate=0.2, packet_bytes=16, seed=2)
    clean = forward_backward(LosslessLink(), **scheme)
    reliable = forward_backward(link_from({**loss, "transport": "reliable"}), **scheme)
    assert all(torch.equal(a, b) for a, b in zip(clean[:2] + tuple(clean[2]), reliable[:2] + tuple(reliable[2])))
    outs = [forward_backward(link_from({**loss, **handling}), **scheme)[1] for handling in
            ({}, {"lost_fill": "rescale"}, {"sync_rotation": "hadamard"})]
    assert len({round(x.item(), 6) for x in [clean[1].detach(), *(o.detach() for o in outs)]}) == 4  # zero fill, rescale, rotation: each its own


# compiled: inductor builds two runs' graphs, 342 s with the cores shared four ways: a limit of its own
@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=[pytest.mark.slow, pytest.mark.timeout(600)])])
def test_reliable_equals_lossless_through_train(char_data, tmp_path, compiled):
    """A short char run: metrics.jsonl equal to the lossless run's except timing and the link's own fields;
    compiled (inductor, 2 micro-batches a step), both runs compiled: the reliable syncs are in the lossless
    graph, and its packets and resend rounds are the eager reliable run's."""
    base = [*TINY, f"--data_dir={char_data}", "--max_iters=10"]
    base += ["--compile=True", "--gradient_accumulation_steps=2"] if compiled else []
    clean, reliable = str(tmp_path / "clean"), str(tmp_path / "reliable")
    link = ["--loss_model=bernoulli", "--loss_rate=0.05", "--packet_bytes=64", "--transport=reliable"]
    assert run_train(*base, f"--out_dir={clean}").returncode == 0
    result = run_train(*base, f"--out_dir={reliable}", *link)
    assert result.returncode == 0, result.stderr
    if compiled:
        eager = str(tmp_path / "eager")
        assert run_train(*base, "--compile=False", f"--out_dir={eager}", *link).returncode == 0
        assert json.load(open(os.path.join(eager, "link_stats.json"))) == json.load(open(os.path.join(reliable, "link_stats.json")))
    assert "64-byte packets, reliable" in result.stdout
    timing = {"ms_per_iter", "tokens_per_s", "mfu", "time_s"}
    a, b = records(clean), records(reliable)
    assert len(a) == len(b) > 10
    for x, y in zip(a, b):
        assert {k: v for k, v in x.items() if k not in timing} == {k: y[k] for k in x if k not in timing}
    steps = [r for r in b if "val_loss" not in r]
    assert all(s["retransmissions"] > 0 for s in steps)
    assert [s["retransmissions"] for s in steps] == sorted(s["retransmissions"] for s in steps)  # cumulative
    stats = json.load(open(os.path.join(reliable, "link_stats.json")))
    row = stats["points"]["h0.mlp"]["bwd"]
    assert row["messages"] == 10 * 2 * (2 if compiled else 1) and sum(row["rounds_histogram"]) == row["messages"]
    assert stats["total"]["retransmissions"] == steps[-1]["retransmissions"]


@pytest.mark.parametrize("name, loss, n_packets", [("bernoulli", dict(loss_model="bernoulli", loss_rate=0.05), 40),
                                                   ("gilbert_elliott", dict(loss_model="gilbert_elliott", ge_preset="heavy"), 40)])
def test_resend_rounds_match_the_analytic_distribution(name, loss, n_packets):
    """The simulator's rounds per message against bench/step_time.py's P(rounds <= k) (Bernoulli: (1 - q^k)^n)."""
    link = link_from({**loss, "transport": "reliable", "seed": 3})
    messages = 4000
    for _ in range(messages // 2):
        link.deliver("p", FWD, n_packets, [0, 1], 2, "cpu")
    histogram = np.array(link.stats()["fwd"]["rounds_histogram"], dtype=float)
    assert histogram.sum() == messages
    cdf = rounds_cdf(link.model, n_packets, len(histogram) + 2)
    if name == "bernoulli":
        assert np.allclose(cdf[:4], [(1 - 0.05 ** k) ** n_packets for k in range(1, 5)])
    observed = np.cumsum(histogram) / messages
    # each point of the empirical CDF within 4.5 binomial standard errors of the analytic one
    for k, (p, o) in enumerate(zip(cdf, observed), 1):
        assert abs(o - p) <= 4.5 * math.sqrt(p * (1 - p) / messages) + 1e-9, (k, o, p)
    mean_rounds, expected = (np.arange(1, len(histogram) + 1) * histogram).sum() / messages, 1 + (1 - cdf).sum()
    print(f"{name}: mean rounds {mean_rounds:.4f}, analytic {expected:.4f}")


def test_pipeline_stages_resend_what_the_unpipelined_run_resends():
    """transport='reliable' with pipeline stages: each stage's resend rounds are drawn in the unpipelined
    order (links.Planned), so the two stages together count, point by point, what one unpipelined link
    counts; before, every stage drew its first messages from the streams' start (stage 1 repeated stage 0)."""
    from masks import Planned
    config = dict(loss_model="bernoulli", loss_rate=0.2, transport="reliable", seed=4)
    points, micro_batches = ["h0.attn", "h0.mlp", "h1.attn", "h1.mlp"], 3
    stages = [points[:2], points[2:]]

    def one_step(link, own):  # a step of micro-batches as a stage runs its own points (GPipe: all forwards first)
        link.begin_round(micro_batches)
        for direction, order in ((FWD, own), (BWD, own[::-1])):
            for _ in range(micro_batches):
                for point in order:
                    link.deliver(point, direction, 12, [0, 1], 2, "cpu")

    plain = link_from(config)
    piped = [link_from(config) for _ in stages]
    for link, own in zip(piped, stages):
        link.use(Planned(points, own))
    for _ in range(2):
        one_step(plain, points)
        for link, own in zip(piped, stages):
            one_step(link, own)
    counters = ("sent", "lost", "bursts")
    for link, own in zip(piped, stages):
        for name in counters:  # every (point, direction) and resend-round histogram of this stage's points
            want = {k: torch.as_tensor(v) for k, v in getattr(plain, name).items() if k[0] in own}
            got = {k: torch.as_tensor(v) for k, v in getattr(link, name).items()}
            assert want.keys() == got.keys() and all(torch.equal(got[k], want[k]) for k in want), name
    lost = {k: int(v.sum()) for k, v in plain.lost.items() if len(k) == 2}
    assert all(v > 0 for v in lost.values()) and len(set(lost.values())) > 1  # real, distinct draws


def test_resends_report_measures_against_the_run_own_model(tmp_path):
    """bench/resends.py on a run directory written as train.py writes one: the resent packets and rounds of
    a reliable Bernoulli link sit within a few standard errors of its own model's expectation, and a config
    that names another rate (what the report would see if the link drew at the wrong rate) is far outside."""
    from bench.resends import extra_rounds_moments, run_resends
    config = dict(loss_model="bernoulli", loss_rate=0.05, transport="reliable", seed=5)
    link = link_from(config)
    # the moments of a message's extra rounds, against a Monte Carlo of its definition: the most losses
    # of any of its packets, each packet's losses geometric (numpy's own generator, not the link's)
    extra = (np.random.default_rng(0).geometric(0.95, size=(100_000, 70)) - 1).max(axis=1)
    mean, var = extra_rounds_moments(link.model, 70)
    assert abs(extra.mean() - mean) < 4 * math.sqrt(var / extra.size) and abs(extra.var() / var - 1) < 0.03
    for _ in range(1500):
        link.deliver("h0.attn", FWD, 30, [0, 1], 2, "cpu")
        link.deliver("h0.mlp", BWD, 70, [0, 1], 2, "cpu")
    for rate, far in ((0.05, False), (0.03, True)):
        run = tmp_path / f"r{rate}-s5"
        run.mkdir()
        (run / "config.json").write_text(json.dumps({**config, "loss_rate": rate}))
        (run / "link_stats.json").write_text(json.dumps({"iters": 1500, **link.stats()}))
        row = run_resends(str(run))
        z_resent = (row["resent"] - row["resent_expected"]) / math.sqrt(row["resent_var"])
        z_rounds = (row["rounds"] - row["rounds_expected"]) / math.sqrt(row["rounds_var"])
        assert row["resent"] == link.stats()["total"]["retransmissions"] and row["iters"] == 1500
        if far:
            assert z_resent > 10 and z_rounds > 10, (z_resent, z_rounds)
        else:
            assert abs(z_resent) < 4 and abs(z_rounds) < 4, (z_resent, z_rounds)
    unreliable = tmp_path / "u-s5"
    unreliable.mkdir()
    (unreliable / "config.json").write_text(json.dumps({**config, "transport": "unreliable"}))
    (unreliable / "link_stats.json").write_text("{}")
    assert run_resends(str(unreliable)) is None


def test_bad_values_are_one_line_errors():
    import configurator
    defaults = configurator.train_defaults()
    for key, value in (("lost_fill", "mean"), ("sync_rotation", "fourier"), ("transport", "tcp")):
        with pytest.raises(configurator.ConfigError, match=f"{key}='{value}': allowed values are"):
            configurator.check_train_config({**defaults, key: value})
        with pytest.raises(ValueError, match=f"{key}='{value}': allowed values are"):
            link_from({"loss_model": "bernoulli", key: value})
    with pytest.raises(ValueError, match="transport='reliable' resends every lost packet"):
        link_from({"loss_model": "bernoulli", "transport": "reliable", "lost_fill": "rescale"})
    with pytest.raises(ValueError, match="need a loss rate below 1"):
        link_from({"loss_model": "bernoulli", "loss_rate": 1.0, "lost_fill": "rescale"})


def test_defaults_keep_the_link_as_it_was():
    link = link_from({"loss_model": "gilbert_elliott", "ge_preset": "bursty"})
    assert (link.fill_scale, link.rotate, link.reliable) == (None, None, False)
    assert link.describe().endswith("1500-byte packets")  # a checkpoint's link_model: old checkpoints still match
    assert "retransmissions" not in link.stats()["total"]


@pytest.mark.slow
def test_lost_packet_options_through_train_errors(char_data, tmp_path):
    base = [f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--max_iters=1"]
    assert_one_line_error(run_train(*base, "--lost_fill=mean"), "lost_fill='mean': allowed values are")
    assert_one_line_error(run_train(*base, "--loss_model=bernoulli", "--transport=reliable", "--sync_rotation=hadamard"),
                          "transport='reliable' resends every lost packet")


SCHEME = ["--block_types=ladder,parallel", "--sync_fraction=0.5", "--sync_dtype=int8"]  # hide and shrink


@pytest.mark.slow
@pytest.mark.parametrize("handling, scheme", [(dict(lost_fill="rescale"), []), (dict(sync_rotation="hadamard"), []),
                                              (dict(transport="reliable"), []),
                                              (dict(lost_fill="rescale", sync_rotation="hadamard"), SCHEME),
                                              (dict(transport="reliable"), SCHEME)])
def test_dist_equals_sim(char_data, tmp_path, handling, scheme):
    """The same masks, signs and resends in `sim` and in `dist`, forward and backward, Bernoulli; also
    for a ladder pattern with partial int8 syncs."""
    args = [*SMALL, f"--data_dir={char_data}", "--block_types=tp,spd,parallel", "--tp_size=2", *scheme,
            *link_args(dict(loss_model="bernoulli", loss_rate=0.05, packet_bytes=64, **handling))]
    sim_dir, dist_dir = str(tmp_path / "sim"), str(tmp_path / "dist")
    sim = run_train(*args, f"--out_dir={sim_dir}")
    assert sim.returncode == 0, sim.stderr[-2000:]
    dst = torchrun(2, *args, "--tp_mode=dist", f"--out_dir={dist_dir}")
    assert dst.returncode == 0, dst.stderr[-2000:]
    # int8 syncs: a last-bit difference between sim's and dist's partials that flips one rounding moves
    # that value by 1/127 of its token's largest, and a step whose gradient spikes carries it on: observed
    # 2.4e-4 in the loss after 5 steps on an AMD EPYC host, 1.2e-3 on an Intel Xeon one (at a step whose
    # gradient norm spiked to 13.6; every record before it within 4e-6), hence the wider tolerance. The
    # masks are held exactly: the same packets lost and resent at every step, and the first forward pass
    # (before any update, under the first masks) equal to float tolerance
    assert_same_run(sim_dir, dist_dir, 5e-3 if scheme else 5e-5)
    sim_records, dist_records = records(sim_dir), records(dist_dir)
    for a, b in zip(sim_records, dist_records):
        for key in ("packets_lost", "retransmissions", "resend_rounds"):
            assert a.get(key) == b.get(key), (a["iter"], key)
    assert abs(sim_records[0]["train_loss"] - dist_records[0]["train_loss"]) < 5e-5
    if "transport" in handling:
        assert records(sim_dir)[-2]["retransmissions"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("handling", [dict(lost_fill="rescale", sync_rotation="hadamard"), dict(transport="reliable")])
def test_resume_draws_what_an_unbroken_run_draws(char_data, tmp_path, handling):
    common = [*TINY, f"--data_dir={char_data}", "--always_save_checkpoint=True", "--block_types=parallel,spd",
              *link_args(dict(loss_model="gilbert_elliott", ge_preset="heavy", packet_bytes=64, **handling))]
    straight, broken = str(tmp_path / "straight"), str(tmp_path / "broken")
    assert run_train(*common, "--max_iters=20", f"--out_dir={straight}").returncode == 0
    assert run_train(*common, "--max_iters=10", "--lr_decay_iters=20", f"--out_dir={broken}").returncode == 0
    assert run_train(*common, "--max_iters=20", "--init_from=resume", f"--out_dir={broken}").returncode == 0
    timing = {"ms_per_iter", "tokens_per_s", "mfu", "time_s"}
    logs = [[{k: v for k, v in r.items() if k not in timing} for r in records(o)] for o in (straight, broken)]
    assert logs[0] == logs[1]
