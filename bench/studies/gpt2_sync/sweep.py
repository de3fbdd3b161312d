# The sync-count study at GPT-2 124M scale on one 8-GPU node: OpenWebText, 20k iterations,
# the dense config and every sync-count config (the seed guide's patterns included: 7comm is its
# "8comm", 5comm its "6comm", 1comm the lower bound), 3 seeds (sim mode: each GPU is a
# data-parallel rank simulating TP=2). Seeds pair across configs, so bench/summarize.py gives
# each config's paired difference from 24comm with a 95% interval; one seed gives none (the char
# study needed 8 to resolve anything: bench/RESULTS.md). 33 runs: cut `configs`, not `seeds`.
#   python data/openwebtext/prepare.py --num_proc=16
#   python -m bench.sweep bench/studies/gpt2_sync/sweep.py
name = "gpt2_sync_study"
configs = ["config/train_gpt2.py"] + [f"config/train_gpt2_{n}comm.py" for n in (24, 18, 16, 12, 8, 7, 6, 5, 2, 1)]
seeds = [1, 2, 3]
settings = {"": {}}
common = {"max_iters": 20000, "wandb_log": False}
launcher = "torchrun --standalone --nproc_per_node=8"
