# GPT-2 124M on OpenWebText, TP=2 simulated: [tp,spd,spd] x4 (2 + 1 + 1 per three blocks)
# = 16 sync points per forward pass (and 16 mirror exchanges per backward pass).
# A third of Megatron's syncs dropped, spread evenly.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_16comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "tp,spd,spd"
out_dir = "out-gpt2-16comm"
wandb_run_name = "gpt2-124M-16comm"
