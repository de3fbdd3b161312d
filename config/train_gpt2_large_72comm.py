# GPT-2 large on OpenWebText, TP=4: every block Megatron-style (2 syncs each, 36 blocks)
# = 72 sync points per forward pass (and 72 mirror exchanges per backward pass).
# TP=4, one process per rank on 8 GPUs: dp = 2 x tp = 4.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_large_72comm.py --tp_mode=dist --max_iters=20000

include("train_gpt2_large.py")
tp_size = 4
block_types = "tp"
out_dir = "out-gpt2-large-72comm"
wandb_run_name = "gpt2-large-72comm"
