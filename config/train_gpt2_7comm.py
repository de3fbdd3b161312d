# GPT-2 124M on OpenWebText, TP=2 simulated: [spd,parallel] x6 (1 + 0 per pair of blocks,
# and the last block is a parallel one, so its partials need one exit sync)
# = 6 + 1 = 7 sync points per forward pass (and 7 mirror exchanges per backward pass).
# The seed experiment guide's "8comm": it counted 2 syncs at the model boundaries for
# parallel blocks; the embedding needs none (d = 0 there), so the true count is 7.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_7comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "spd,parallel"
out_dir = "out-gpt2-7comm"
wandb_run_name = "gpt2-124M-7comm"
