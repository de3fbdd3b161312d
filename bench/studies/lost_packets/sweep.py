# What to do about a lost packet (issue 33, study 4): planned, with its hypotheses and analysis, in
# plan.md, committed before any run. 24comm and 2comm (char Shakespeare, n_embd 64, 600 iterations,
# TP=2 `sim`) at 1% and 3% Bernoulli loss with each receiver option, the lossless twin, and the
# reliable transport as the control; fresh seeds 38-48 (11: the power calculation of plan.md).
# 2 configs x 8 settings x 11 seeds = 176 runs, about 10-12 hours at --slots 2 on 2 cores.
#   python -m bench.sweep bench/studies/lost_packets/sweep.py --slots 2   (from a worktree at a fixed commit)
#   each finished seed: its runs' logs (not ckpt.pt) copied to bench/studies/lost_packets/runs/ and committed
#   python -m bench.summarize bench/studies/lost_packets/runs --seeds 38-48 --out bench/studies/lost_packets
name = "char_lost_packets"
configs = ["config/train_shakespeare_char_24comm.py", "config/train_shakespeare_char_2comm.py"]
seeds = list(range(38, 49))
_options = {"zero": {}, "rescale": {"lost_fill": "rescale"}, "hadamard": {"sync_rotation": "hadamard"}}
settings = {"lossless": {}}
for _rate in (1, 3):
    for _name, _option in _options.items():
        settings[f"b{_rate}_{_name}"] = {"loss_model": "bernoulli", "loss_rate": _rate / 100, **_option}
settings["b1_reliable"] = {"loss_model": "bernoulli", "loss_rate": 0.01, "transport": "reliable"}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40}
