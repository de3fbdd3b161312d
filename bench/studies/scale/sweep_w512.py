# The scale study at n_embd 512 (issue 46): planned, with its hypotheses, seeds and analysis, in plan.md,
# committed before any run. 24comm's char config (12 layers, 600 iterations, TP=2 `sim`; bfloat16 autocast) at this
# width with 16-wide heads and the learning rate the tuning chose for it; the eight settings of
# widths.RANKED, in rank order within each seed (seeds outermost), so a width cut short keeps the first.
#   python -m bench.studies.scale.device_width --study 512 ... on a lent GPU (bfloat16 autocast, plan.md's amendment)
#   each finished seed: its runs' logs (not ckpt.pt) copied to bench/studies/scale/runs/ and committed
from bench.studies.scale.widths import SEEDS as _SEEDS, sweep as _sweep  # _: not sweep keys
name = "scale_w512"
configs = ["config/train_shakespeare_char_24comm.py"]
seeds = list(_SEEDS)
settings, common = _sweep(512)
