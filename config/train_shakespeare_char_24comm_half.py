# Char-level Shakespeare at CPU scale, TP=2: tp x12 = 24 sync points per pass, each sending only the first half of the
# channels of the partials (sync_fraction=0.5, CAAT-Net, Lamprecht et al., NeurIPS 2025): half of
# 24comm's bytes; the other channels stay with their rank (DESIGN section 8).

include("train_shakespeare_char.py")
tp_size = 2
block_types = "tp"
sync_fraction = 0.5
out_dir = "out-shakespeare-char-24comm-half"
wandb_run_name = "shakespeare-char-24comm-half"
