# Char-level Shakespeare at CPU scale, TP=2 simulated: [spd,parallel,parallel] x4 = 4 + 1 exit
# sync = 5 sync points per pass (the seed experiment guide's "6comm").
# The CPU-scale twin of config/train_gpt2_5comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "spd,parallel,parallel"
out_dir = "out-shakespeare-char-5comm"
wandb_run_name = "shakespeare-char-5comm"
