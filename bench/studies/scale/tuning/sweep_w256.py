# The scale study's learning-rate tuning at n_embd 256 (issue 46; tuning/plan.md, committed before any of
# its runs): lossless 24comm only, four peak learning rates (min_lr a tenth of each), tuning seeds 200-201,
# never reused by the study. n_head 16: 16-wide heads at every width, as at n_embd 64 and 128 before.
#   python -m bench.sweep bench/studies/scale/tuning/sweep_w256.py --slots 2 --no_summary   (from a worktree at a fixed commit)
#   python -m bench.summarize bench/studies/scale/tuning/runs --out bench/studies/scale/tuning
name = "scale_tuning_w256"
configs = ["config/train_shakespeare_char_24comm.py"]
seeds = [200, 201]
settings = {f"w256_lr{lr:g}": {"learning_rate": lr, "min_lr": lr / 10} for lr in (2.5e-3, 5e-3, 1e-2, 2e-2)}
# tf32=False: on a lent GPU (device_width.py --tune 256, plan.md's second amendment) full float32; a CPU has no TF32
common = {"compile": False, "eval_interval": 75, "eval_iters": 40, "dtype": "float32", "tf32": False, "n_embd": 256,
          "n_head": 16}
