# Char-level Shakespeare at CPU scale, TP=2 simulated: ladder x12 = 24 sync points per pass, 1 exposed
# (each lands one sublayer late; see config/train_gpt2_ladder.py). The CPU-scale twin of that config.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "ladder"
out_dir = "out-shakespeare-char-ladder"
wandb_run_name = "shakespeare-char-ladder"
