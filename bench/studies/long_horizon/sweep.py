# Do the sync-count curves separate later? At 600 iterations (char_sync_study) the char
# models are still on the steep part of the curve and seed noise (~0.02 nats) hides any
# difference between patterns. This runs the two extremes, 24comm (full Megatron TP) and
# 2comm (mostly parallel blocks), five times longer, to the end of a full cosine decay;
# two seeds (about 50 minutes, two runs at a time).
#   python -m bench.sweep bench/studies/long_horizon/sweep.py --slots 2
name = "char_long_horizon"
configs = [f"config/train_shakespeare_char_{n}comm.py" for n in (24, 2)]
seeds = [1, 2]
settings = {"": {}}
common = {"compile": False, "max_iters": 3000, "eval_interval": 250}
