# Char-level Shakespeare at CPU scale, TP=2 simulated: [parallel,spd] x6 = 6 sync points per pass.
# The CPU-scale twin of config/train_gpt2_6comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "parallel,spd"
out_dir = "out-shakespeare-char-6comm"
wandb_run_name = "shakespeare-char-6comm"
