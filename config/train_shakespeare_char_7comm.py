# Char-level Shakespeare at CPU scale, TP=2 simulated: [spd,parallel] x6 = 6 + 1 exit sync
# = 7 sync points per pass (the seed experiment guide's "8comm").
# The CPU-scale twin of config/train_gpt2_7comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "spd,parallel"
out_dir = "out-shakespeare-char-7comm"
wandb_run_name = "shakespeare-char-7comm"
