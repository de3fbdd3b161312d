# Char-level Shakespeare at CPU scale, 12 spd blocks on TP=2, over a bursty lossy
# network (Gilbert-Elliott 'bursty': ~1% loss in bursts of ~10 packets, both passes).
# The CPU-scale twin of config/train_gpt2_12comm_bursty.py.

include("train_shakespeare_char_12comm.py")
loss_model = "gilbert_elliott"
ge_preset = "bursty"
out_dir = "out-shakespeare-char-12comm-bursty"
wandb_run_name = "shakespeare-char-12comm-bursty"
