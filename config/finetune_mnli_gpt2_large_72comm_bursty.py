# Seed 000's MNLI fine-tune of GPT-2 large, 72 syncs on TP=2, over a Gilbert-Elliott lossy link on
# both the forward all-reduces and the backward mirror exchanges. Seed 000 runs its link as
# `--loss_type g-e --ge_config <preset>` (its example names 'zero', the chain that never loses:
# --ge_preset=zero here gives the lossless numbers through the same code); this twin takes the
# 'bursty' preset (~1% of packets lost, in bursts of ~10), the project's other bursty twins' link.
# Other links: --ge_preset=light|moderate|heavy|noisy, or --ge_p/--ge_r/--ge_k/--ge_h.
# launch as: torchrun --standalone --nproc_per_node=2 train.py config/finetune_mnli_gpt2_large_72comm_bursty.py --tp_mode=dist

include("finetune_mnli_gpt2_large_72comm.py")
loss_model = "gilbert_elliott"
ge_preset = "bursty"
loss_fwd = True
loss_bwd = True
out_dir = "out-mnli-gpt2-large-72comm-bursty"
wandb_run_name = "mnli-gpt2-large-72comm-bursty"
