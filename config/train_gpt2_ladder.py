# GPT-2 124M on OpenWebText, TP=2: ladder x12 (Ladder Residual, Zhang et al., ICML 2025): tp's 24
# sync points per pass, but each sublayer's synced output lands in the residual one sublayer late, so
# its all-reduce runs behind the next sublayer's compute; only the last one (before ln_f) is exposed.
# In tp_mode='dist' each sync is an asynchronous all-reduce waited for just before its result is read.
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_ladder.py --tp_mode=dist

include("train_gpt2.py")
tp_size = 2
block_types = "ladder"
out_dir = "out-gpt2-ladder"
wandb_run_name = "gpt2-124M-ladder"
