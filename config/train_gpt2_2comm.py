# GPT-2 124M on OpenWebText, TP=2 simulated: [parallel*5,spd] x2 (one sync every six blocks)
# = 2 sync points per forward pass (and 2 mirror exchanges per backward pass).
# Each rank runs its own narrow tower for five blocks between syncs.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_2comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "parallel*5,spd"
out_dir = "out-gpt2-2comm"
wandb_run_name = "gpt2-124M-2comm"
