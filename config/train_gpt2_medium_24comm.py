# GPT-2 medium on OpenWebText, TP=2: every block sync-point drop (1 sync each, 24 blocks)
# = 24 sync points per forward pass (and 24 mirror exchanges per backward pass).
# TP=2, one process per rank on 8 GPUs: dp = 4 x tp = 2.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_medium_24comm.py --tp_mode=dist --max_iters=20000

include("train_gpt2_medium.py")
tp_size = 2
block_types = "spd"
out_dir = "out-gpt2-medium-24comm"
wandb_run_name = "gpt2-medium-24comm"
