# GPT-2 124M on OpenWebText, TP=2 simulated: [spd,parallel,parallel] x4 (1 + 0 + 0 per three
# blocks, and the model ends on parallel blocks, so their partials need one exit sync)
# = 4 + 1 = 5 sync points per forward pass (and 5 mirror exchanges per backward pass).
# The seed experiment guide's "6comm": it counted 2 syncs at the model boundaries for
# parallel blocks; the embedding needs none (d = 0 there), so the true count is 5.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_5comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "spd,parallel,parallel"
out_dir = "out-gpt2-5comm"
wandb_run_name = "gpt2-124M-5comm"
