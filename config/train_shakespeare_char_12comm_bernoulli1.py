# Char-level Shakespeare at CPU scale, 12 spd blocks on TP=2, 1% Bernoulli packet loss
# on both passes. The CPU-scale twin of config/train_gpt2_12comm_bernoulli1.py.

include("train_shakespeare_char_12comm.py")
loss_model = "bernoulli"
loss_rate = 0.01
out_dir = "out-shakespeare-char-12comm-bernoulli1"
wandb_run_name = "shakespeare-char-12comm-bernoulli1"
