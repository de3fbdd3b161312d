# Seed 000's MNLI fine-tune of GPT-2 large with 12 sync points instead of 72: [parallel,parallel,spd] x12
# on TP=2 (each spd block syncs once, after its MLP; the parallel blocks never). Lossless; compare with
# finetune_mnli_gpt2_large_72comm.py (same data, hyperparameters and evals).
# launch as: torchrun --standalone --nproc_per_node=2 train.py config/finetune_mnli_gpt2_large_12comm.py --tp_mode=dist

include("finetune_mnli_gpt2_large_72comm.py")
block_types = "parallel,parallel,spd"
out_dir = "out-mnli-gpt2-large-12comm"
wandb_run_name = "mnli-gpt2-large-12comm"
