# GPT-2 124M on OpenWebText, TP=2 simulated: spd x12 (1 sync per block: the attention sync is dropped)
# = 12 sync points per forward pass (and 12 mirror exchanges per backward pass).
# Half of Megatron's syncs, the SPD paper's setting.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_12comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "spd"
out_dir = "out-gpt2-12comm"
wandb_run_name = "gpt2-124M-12comm"
