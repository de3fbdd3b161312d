# GPT-2 124M on OpenWebText, TP=2 simulated: [tp,spd] x6 (2 + 1 per pair of blocks)
# = 18 sync points per forward pass (and 18 mirror exchanges per backward pass).
# A quarter of Megatron's syncs dropped, spread evenly.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_18comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "tp,spd"
out_dir = "out-gpt2-18comm"
wandb_run_name = "gpt2-124M-18comm"
