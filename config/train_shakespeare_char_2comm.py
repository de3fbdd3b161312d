# Char-level Shakespeare at CPU scale, TP=2 simulated: [parallel*5,spd] x2 = 2 sync points per pass.
# The CPU-scale twin of config/train_gpt2_2comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "parallel*5,spd"
out_dir = "out-shakespeare-char-2comm"
wandb_run_name = "shakespeare-char-2comm"
