# Char-level Shakespeare at CPU scale, TP=2 simulated: [tp,spd] x6 = 18 sync points per pass.
# The CPU-scale twin of config/train_gpt2_18comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "tp,spd"
out_dir = "out-shakespeare-char-18comm"
wandb_run_name = "shakespeare-char-18comm"
