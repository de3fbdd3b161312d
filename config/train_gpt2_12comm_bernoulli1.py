# GPT-2 124M, 12 spd blocks on TP=2, with 1% of the packets of every all-reduce lost
# independently (Bernoulli), forward and backward. Compare with train_gpt2_12comm.py.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_12comm_bernoulli1.py --max_iters=20000

include("train_gpt2_12comm.py")
loss_model = "bernoulli"
loss_rate = 0.01
out_dir = "out-gpt2-12comm-bernoulli1"
wandb_run_name = "gpt2-124M-12comm-bernoulli1"
