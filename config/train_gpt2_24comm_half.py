# GPT-2 124M on OpenWebText, TP=2: tp x12 = 24 sync points per pass, each sending only the first half of the
# channels of the partials (sync_fraction=0.5, CAAT-Net, Lamprecht et al., NeurIPS 2025): half of
# 24comm's bytes; the other channels stay with their rank (DESIGN section 8).

include("train_gpt2.py")
tp_size = 2
block_types = "tp"
sync_fraction = 0.5
out_dir = "out-gpt2-24comm-half"
wandb_run_name = "gpt2-124M-24comm-half"
