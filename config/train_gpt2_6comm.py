# GPT-2 124M on OpenWebText, TP=2 simulated: [parallel,spd] x6 (0 + 1 per pair of blocks)
# = 6 sync points per forward pass (and 6 mirror exchanges per backward pass).
# Three quarters of Megatron's syncs dropped.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_6comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "parallel,spd"
out_dir = "out-gpt2-6comm"
wandb_run_name = "gpt2-124M-6comm"
