# The scale study's learning-rate tuning at n_embd 512, on a lent GPU (issue 46; tuning/plan.md): lossless
# 24comm only, four peak learning rates (min_lr a tenth of each), tuning seeds 200-201, never reused by the
# study; n_head 32 (16-wide heads); bfloat16 autocast (the GPU widths' numerics class, plan.md's amendment).
#   run by bench/studies/scale/device_width.py --tune 512 (the rule applied in code) on a lent GPU
name = "scale_tuning_w512"
configs = ["config/train_shakespeare_char_24comm.py"]
seeds = [200, 201]
settings = {f"w512_lr{lr:g}": {"learning_rate": lr, "min_lr": lr / 10} for lr in (6.25e-4, 1.25e-3, 2.5e-3, 5e-3)}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40, "dtype": "bfloat16", "tf32": False,
          "n_embd": 512, "n_head": 32}
