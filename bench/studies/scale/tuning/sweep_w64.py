# The scale study's learning-rate tuning at n_embd 64 (issue 46; tuning/plan.md, committed before any of
# its runs): lossless 24comm only, four peak learning rates (min_lr a tenth of each), tuning seeds 200-201,
# and 4e-2 added by the plan's edge rule (2e-2, the grid's top, had the lowest loss: runs/sweep_w64.log);
# never reused by the study. n_head 4: 16-wide heads at every width, as at n_embd 64 and 128 before.
#   python -m bench.sweep bench/studies/scale/tuning/sweep_w64.py --slots 2 --no_summary   (from a worktree at a fixed commit)
#   python -m bench.summarize bench/studies/scale/tuning/runs --out bench/studies/scale/tuning
name = "scale_tuning_w64"
configs = ["config/train_shakespeare_char_24comm.py"]
seeds = [200, 201]
settings = {f"w64_lr{lr:g}": {"learning_rate": lr, "min_lr": lr / 10} for lr in (2.5e-3, 5e-3, 1e-2, 2e-2, 4e-2)}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40, "dtype": "float32", "n_embd": 64, "n_head": 4}
