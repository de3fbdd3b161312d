# GPT-2 medium on OpenWebText, TP=2: [spd,parallel] x12 (the seed guide's "8comm" pattern), 12 spd syncs and one exit sync after the last parallel block
# = 13 sync points per forward pass (and 13 mirror exchanges per backward pass).
# TP=2, one process per rank on 8 GPUs: dp = 4 x tp = 2.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_medium_13comm.py --tp_mode=dist --max_iters=20000

include("train_gpt2_medium.py")
tp_size = 2
block_types = "spd,parallel"
out_dir = "out-gpt2-medium-13comm"
wandb_run_name = "gpt2-medium-13comm"
