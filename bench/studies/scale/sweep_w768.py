# The scale study at n_embd 768 (issue 46): planned, with its hypotheses, seeds and analysis, in plan.md,
# committed before any run. 24comm's char config (12 layers, 600 iterations, TP=2 `sim`, fp32) at this
# width with 16-wide heads and the learning rate the tuning chose for it; the eight settings of
# widths.RANKED, in rank order within each seed (seeds outermost), so a width cut short keeps the first.
#   python -m bench.sweep bench/studies/scale/sweep_w768.py via bench/device_sweep.sh on a lent GPU (float32, TF32 off)
#   each finished seed: its runs' logs (not ckpt.pt) copied to bench/studies/scale/runs/ and committed
from bench.studies.scale.widths import sweep as _sweep  # _: not a sweep key
name = "scale_w768"
configs = ["config/train_shakespeare_char_24comm.py"]
seeds = list(range(300, 312))
settings, common = _sweep(768)
