# GPT-2 124M on OpenWebText, TP=2 simulated: [parallel,spd,spd] x4 (0 + 1 + 1 per three blocks)
# = 8 sync points per forward pass (and 8 mirror exchanges per backward pass).
# Two thirds of Megatron's syncs dropped.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_8comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "parallel,spd,spd"
out_dir = "out-gpt2-8comm"
wandb_run_name = "gpt2-124M-8comm"
