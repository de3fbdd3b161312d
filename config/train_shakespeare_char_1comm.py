# Char-level Shakespeare at CPU scale, TP=2 simulated: parallel x12 = 1 sync point per pass
# (independent towers, one exit sync: the lower bound).
# The CPU-scale twin of config/train_gpt2_1comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "parallel"
out_dir = "out-shakespeare-char-1comm"
wandb_run_name = "shakespeare-char-1comm"
