# Seed 002's model, from its Megatron vs native comparison: a mixture of experts in every block (8 experts,
# top-2 routing, each expert sharded over the TP ranks like the dense MLP: moe.py), 384 wide, 6 layers,
# 8 heads, trained with the Muon + AdamW hybrid (optim.py); about 79M parameters, as the seed's 79.1M.
# TP=2 with tp blocks: 2 x 6 = 12 sync points per pass. GPT-2 BPE Shakespeare, a dataset this machine
# prepares (python data/shakespeare/prepare.py); the seed ran 1000 steps of batch 16 in bf16.
#   torchrun --standalone --nproc_per_node=2 train.py config/train_moe_seed002_12comm.py --tp_mode=dist
#   python -m bench.compare_backends --config config/train_moe_seed002_12comm.py   (native vs megatron-core)

dataset = "shakespeare"
out_dir = "out-moe-seed002"
wandb_run_name = "moe-seed002-12comm"
n_layer = 6
n_head = 8
n_embd = 384
dropout = 0.0
n_experts = 8
experts_top_k = 2
optimizer = "muon"  # Muon on the blocks' matrices, AdamW on embeddings, biases and gains
learning_rate = 1e-3  # AdamW's scale: Muon's update is matched to AdamW's RMS (optim.py)
min_lr = 1e-4
warmup_iters = 50
weight_decay = 0.1
block_size = 512
batch_size = 16
max_iters = 1000
eval_interval = 100
eval_iters = 20
tp_size = 2
block_types = "tp"
