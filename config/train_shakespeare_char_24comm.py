# Char-level Shakespeare at CPU scale, TP=2 simulated: tp x12 = 24 sync points per pass.
# The CPU-scale twin of config/train_gpt2_24comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "tp"
out_dir = "out-shakespeare-char-24comm"
wandb_run_name = "shakespeare-char-24comm"
