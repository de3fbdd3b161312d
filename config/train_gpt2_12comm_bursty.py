# GPT-2 124M, 12 spd blocks on TP=2, over a bursty lossy network: the Gilbert-Elliott
# 'bursty' preset (~1% of packets lost, in bursts of ~10 packets) on both the forward
# all-reduces and the backward mirror exchanges. Compare with train_gpt2_12comm.py.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_12comm_bursty.py --max_iters=20000

include("train_gpt2_12comm.py")
loss_model = "gilbert_elliott"
ge_preset = "bursty"
loss_fwd = True
loss_bwd = True
out_dir = "out-gpt2-12comm-bursty"
wandb_run_name = "gpt2-124M-12comm-bursty"
