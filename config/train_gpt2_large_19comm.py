# GPT-2 large on OpenWebText, TP=4: [spd,parallel] x18 (the seed guide's "8comm" pattern), 18 spd syncs and one exit sync after the last parallel block
# = 19 sync points per forward pass (and 19 mirror exchanges per backward pass).
# TP=4, one process per rank on 8 GPUs: dp = 2 x tp = 4.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_large_19comm.py --tp_mode=dist --max_iters=20000

include("train_gpt2_large.py")
tp_size = 4
block_types = "spd,parallel"
out_dir = "out-gpt2-large-19comm"
wandb_run_name = "gpt2-large-19comm"
