# Packet-loss tolerance at CPU scale: the 24, 12 and 6comm char configs under Bernoulli
# loss (0.1%, 1%, 5%, 10%) and two Gilbert-Elliott presets, on both passes; and 5%
# Bernoulli on one pass only, to see which direction hurts. The lossless baseline (rate 0)
# is the char_sync_study run of the same config and seed.
#   python bench/sweep.py bench/sweeps/char_loss_sweep.py --slots 2
name = "char_loss_sweep"
configs = [f"config/train_shakespeare_char_{n}comm.py" for n in (24, 12, 6)]
seeds = [1]
settings = {
    **{f"bern{rate:g}": {"loss_model": "bernoulli", "loss_rate": rate} for rate in (0.001, 0.01, 0.05, 0.1)},
    "ge-moderate": {"loss_model": "gilbert_elliott", "ge_preset": "moderate"},
    "ge-bursty": {"loss_model": "gilbert_elliott", "ge_preset": "bursty"},
    "bern0.05-fwd": {"loss_model": "bernoulli", "loss_rate": 0.05, "loss_bwd": False},
    "bern0.05-bwd": {"loss_model": "bernoulli", "loss_rate": 0.05, "loss_fwd": False},
}
common = {"compile": False, "eval_interval": 100}
