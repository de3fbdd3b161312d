# GPT-2 medium on OpenWebText, TP=2: every block Megatron-style (2 syncs each, 24 blocks)
# = 48 sync points per forward pass (and 48 mirror exchanges per backward pass).
# TP=2, one process per rank on 8 GPUs: dp = 4 x tp = 2.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_medium_48comm.py --tp_mode=dist --max_iters=20000

include("train_gpt2_medium.py")
tp_size = 2
block_types = "tp"
out_dir = "out-gpt2-medium-48comm"
wandb_run_name = "gpt2-medium-48comm"
