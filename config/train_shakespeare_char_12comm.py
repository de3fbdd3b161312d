# Char-level Shakespeare at CPU scale, TP=2 simulated: spd x12 = 12 sync points per pass.
# The CPU-scale twin of config/train_gpt2_12comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "spd"
out_dir = "out-shakespeare-char-12comm"
wandb_run_name = "shakespeare-char-12comm"
