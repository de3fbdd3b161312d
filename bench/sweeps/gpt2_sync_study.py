# The sync-count study at GPT-2 124M scale on one 8-GPU node: OpenWebText, 20k iterations,
# the dense config and the seven sync-count configs, one seed (sim mode: each GPU is a
# data-parallel rank simulating TP=2).
#   python data/openwebtext/prepare.py --num_proc=16
#   python bench/sweep.py bench/sweeps/gpt2_sync_study.py
name = "gpt2_sync_study"
configs = ["config/train_gpt2.py"] + [f"config/train_gpt2_{n}comm.py" for n in (24, 18, 16, 12, 8, 6, 2)]
seeds = [1337]
settings = {"": {}}
common = {"max_iters": 20000, "wandb_log": False}
launcher = "torchrun --standalone --nproc_per_node=8"
