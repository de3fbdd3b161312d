# Char-level Shakespeare at CPU scale, TP=2 simulated: [parallel,spd,spd] x4 = 8 sync points per pass.
# The CPU-scale twin of config/train_gpt2_8comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "parallel,spd,spd"
out_dir = "out-shakespeare-char-8comm"
wandb_run_name = "shakespeare-char-8comm"
