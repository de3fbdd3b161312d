# GPT-2 124M on OpenWebText, TP=2 simulated: parallel x12: each rank runs its own narrow
# tower through all 12 blocks, and the towers meet once, in the exit sync before ln_f
# = 1 sync point per forward pass (and 1 mirror exchange per backward pass).
# The lower bound for TP=2: no pattern that shards the blocks can sync fewer times.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_1comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "parallel"
out_dir = "out-gpt2-1comm"
wandb_run_name = "gpt2-124M-1comm"
