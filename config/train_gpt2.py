# GPT-2 124M on OpenWebText, dense (tp_size=1, no sync points): the reference run.
# nanoGPT's hyperparameters: 12 batch x 1024 tokens x 5x8 gradient accumulation
# = ~0.5M tokens per iteration, 600k iterations (~300B tokens). For the 20k-step
# study: --max_iters=20000 (the learning rate then decays over those 20k steps).
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2.py

dataset = "openwebtext"
out_dir = "out-gpt2"
wandb_log = True
wandb_project = "owt"
wandb_run_name = "gpt2-124M"

# model: GPT-2 small
n_layer = 12
n_head = 12
n_embd = 768
block_size = 1024
dropout = 0.0
bias = True

# tensor parallelism: none
tp_size = 1
block_types = "tp"

# 12 batch size * 1024 block size * 5 gradaccum * 8 GPUs = 491,520 tokens per iteration
batch_size = 12
gradient_accumulation_steps = 5 * 8

# AdamW and schedule (lr_decay_iters follows max_iters)
learning_rate = 6e-4
min_lr = 6e-5
max_iters = 600000
warmup_iters = 2000
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0

# eval and logging
eval_interval = 1000
eval_iters = 200
log_interval = 10
always_save_checkpoint = True
