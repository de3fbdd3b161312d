# GPT-2 medium (355M, 24 layers) on OpenWebText, dense (tp_size=1): the reference run at this size.
# The batch of config/train_gpt2.py (~0.5M tokens per iteration); the learning rate of the
# GPT-3 paper's model of this size. ZeRO-1 shards AdamW's moments over the data-parallel ranks,
# activation checkpointing trades a recompute for the activations of 24 blocks.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_medium.py --max_iters=20000

include("train_gpt2.py")
out_dir = "out-gpt2-medium"
wandb_run_name = "gpt2-medium"

n_layer = 24
n_head = 16
n_embd = 1024
learning_rate = 3e-4
min_lr = 3e-5
zero_stage = 1
# no pipeline stages: a TP group holds the whole model (weights, gradients and sharded AdamW
# state are a few GB per rank); --pp_size=2 cuts it in two (the 40 micro-batches of an
# iteration already give each pipeline more than its 2 stages need; the batch stays ~0.5M tokens)
pp_size = 1
activation_checkpointing = "block"
