# Char-level Shakespeare at CPU scale, dense (tp_size=1): the reference run.
# 12 layers so the sync-count patterns apply; small enough that a run takes a few
# minutes on a 2-core CPU and still ends far below the unigram baseline (3.33 nats).
# prepare the data first: python data/shakespeare_char/prepare.py

dataset = "shakespeare_char"
out_dir = "out-shakespeare-char"
wandb_run_name = "shakespeare-char"

# model
n_layer = 12
n_head = 4
n_embd = 64
block_size = 128
dropout = 0.0  # a few minutes of training does not overfit 4.5M characters
bias = True

# tensor parallelism: none
tp_size = 1
block_types = "tp"

batch_size = 32
gradient_accumulation_steps = 1
learning_rate = 1e-2
min_lr = 1e-3
max_iters = 600
warmup_iters = 50
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.99
grad_clip = 1.0

eval_interval = 100
eval_iters = 20
log_interval = 10
