# GPT-2 124M on OpenWebText, TP=2 simulated: tp x12 (Megatron: 2 syncs per block)
# = 24 sync points per forward pass (and 24 mirror exchanges per backward pass).
# The control: on a lossless network it computes exactly the dense model.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_24comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "tp"
out_dir = "out-gpt2-24comm"
wandb_run_name = "gpt2-124M-24comm"
