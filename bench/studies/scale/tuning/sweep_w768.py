# The scale study's learning-rate tuning at n_embd 768, on a lent GPU (issue 46; tuning/plan.md): lossless
# 24comm only, four peak learning rates (min_lr a tenth of each), tuning seeds 200-201, never reused by the
# study; n_head 48 (16-wide heads); bfloat16 autocast (the GPU widths' numerics class, plan.md's amendment).
#   run by bench/studies/scale/device_width.py --tune 768 (the rule applied in code) on a lent GPU
name = "scale_tuning_w768"
configs = ["config/train_shakespeare_char_24comm.py"]
seeds = [200, 201]
settings = {f"w768_lr{lr:g}": {"learning_rate": lr, "min_lr": lr / 10} for lr in (6.25e-4, 1.25e-3, 2.5e-3, 5e-3)}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40, "dtype": "bfloat16", "tf32": False,
          "n_embd": 768, "n_head": 48}
