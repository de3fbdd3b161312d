# Char-level Shakespeare at CPU scale, TP=2 simulated: [tp,spd,spd] x4 = 16 sync points per pass.
# The CPU-scale twin of config/train_gpt2_16comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "tp,spd,spd"
out_dir = "out-shakespeare-char-16comm"
wandb_run_name = "shakespeare-char-16comm"
