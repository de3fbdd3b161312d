# Packet-loss tolerance, redone with enough seeds (issue 16, item 6): the 24, 12 and 2comm char
# configs under Bernoulli loss 0.3%, 1% and 3% on both passes, 3% on the forward pass only,
# Gilbert-Elliott `bursty` (1% stationary, mean bursts of 10 packets), and the `zero` preset as a
# control (a lossy code path that loses nothing: its paired difference must be exactly 0).
# Seeds 1-4. Each lossy run pairs with the lossless run of the same config and seed. The sweep
# trains its own lossless runs instead of reusing the 8-seed study's: the same run is bit-identical
# on one machine, but a run trained in another session (another host CPU) drifts from step ~10
# in the 7th digit and ends ~0.002 nats away (RESULTS, "The same run on another machine"), which
# would add to every paired difference. Seeds run outermost, so a seed's runs share a session.
# Summarize this sweep on its own (its lossless runs are the pairs):
#   python -m bench.sweep bench/studies/loss_sweep/sweep.py --slots 2
#   python -m bench.summarize bench/studies/loss_sweep/runs --out bench/studies/loss_sweep
#   python -m bench.tolerance bench/studies/loss_sweep/experiment_summary.csv --plot bench/studies/loss_sweep/tolerance.png \
#       --noise_floor bench/studies/sync_count/noise_floor.json
name = "char_loss_sweep_4seeds"
configs = [f"config/train_shakespeare_char_{n}comm.py" for n in (24, 12, 2)]
seeds = [1, 2, 3, 4]
settings = {
    "lossless": {},
    **{f"bern{rate:g}": {"loss_model": "bernoulli", "loss_rate": rate} for rate in (0.003, 0.01, 0.03)},
    "bern0.03-fwd": {"loss_model": "bernoulli", "loss_rate": 0.03, "loss_bwd": False},
    "ge-bursty": {"loss_model": "gilbert_elliott", "ge_preset": "bursty"},
    "ge-zero": {"loss_model": "gilbert_elliott", "ge_preset": "zero"},
}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40}
