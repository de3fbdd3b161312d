# Seed 000's fine-tune: pretrained GPT-2 large (774M, 36 layers) on MNLI, TP=2, every block
# Megatron-style (2 syncs each) = 72 sync points per forward pass (and 72 mirror exchanges per
# backward pass), lossless. The seed's flags, in this project's keys: --model_name gpt2-large ->
# init_from, --dataset mnli, --batch_size 8, --learning_rate 3e-5, --eval_steps 20 -> eval_interval,
# --max_steps 500 -> max_iters; the rest as Hugging Face's Trainer defaults those flags come from
# (no warmup, decay to 0, AdamW betas (0.9, 0.999), no weight decay, clip 1.0), cosine for its linear.
# Evals log val loss and the label accuracy / label loss of the first eval_iters x batch_size = 800
# dev_matched and dev_mismatched prompts (label_eval.py; docs/data.md, "Fine-tuning on MNLI").
# prepare as: python data/mnli/prepare.py  (offline: --input DIR with GLUE's MNLI TSVs)
# launch as: torchrun --standalone --nproc_per_node=2 train.py config/finetune_mnli_gpt2_large_72comm.py --tp_mode=dist
#   (or one GPU, both TP ranks in one process: python train.py config/finetune_mnli_gpt2_large_72comm.py)

init_from = "gpt2-large"
dataset = "mnli"
out_dir = "out-mnli-gpt2-large-72comm"
wandb_log = False
wandb_project = "mnli"
wandb_run_name = "mnli-gpt2-large-72comm"

# GPT-2 large's shape (init_from checks it against the weights: another value here is an error); no dropout, so a lossless TP run
# is the dense one and the differences between runs are the links'
n_layer = 36
n_head = 20
n_embd = 1280
dropout = 0.0
bias = True
# MNLI prompts are short: prepare.py prints the longest and the mean; a longer one keeps its last
# block_size tokens in the label eval (label_eval.prompts)
block_size = 256

# tensor parallelism: TP=2, all Megatron blocks
tp_size = 2
block_types = "tp"

# 8 windows of 256 tokens per step (2,048 tokens, about 30 rendered examples: a window starts anywhere
# in the stream of examples), 500 steps; fine-tuning on the rendered examples as a language model
batch_size = 8
gradient_accumulation_steps = 1
max_iters = 500
learning_rate = 3e-5
decay_lr = True
warmup_iters = 0
min_lr = 0.0
weight_decay = 0.0
beta1 = 0.9
beta2 = 0.999
grad_clip = 1.0

# eval every 20 steps on 100 fixed batches per split (and 100 x 8 prompts per label set)
eval_interval = 20
eval_iters = 100
log_interval = 10
always_save_checkpoint = False
