# The scale study at n_embd 64 (issue 46): planned, with its hypotheses, seeds and analysis, in plan.md,
# committed before any run. 24comm's char config (12 layers, 600 iterations, TP=2 `sim`, fp32) at this
# width, n_head 4 (16-wide heads), the peak learning rate the tuning chose for this width (plan.md), eight
# settings, seeds 300-311. Seeds outermost; within a seed the settings in the plan's rank order, so a width
# cut short keeps the settings ranked first.
#   python -m bench.sweep bench/studies/scale/sweep_w64.py --slots 2 --no_summary   (from a worktree at the plan's commit)
#   each finished seed: its runs' logs (not ckpt.pt) copied to bench/studies/scale/runs/ and committed
from bench.studies.scale.widths import learning_rate
name = "scale_w64"
configs = ["config/train_shakespeare_char_24comm.py"]
seeds = list(range(300, 312))
settings = {  # rank order (plan.md): the reference, then the costs the primary family tests, then the rest
    "w64_ref24": {},                                          # tp x12: 24 syncs (the reference)
    "w64_drop1": {"block_types": "parallel"},                 # 1comm
    "w64_drop2": {"block_types": "parallel*5,spd"},           # 2comm
    "w64_drop5": {"block_types": "spd,parallel,parallel"},    # 5comm
    "w64_half": {"sync_fraction": 0.5},                       # 24 syncs of half the channels
    "w64_ladder": {"block_types": "ladder"},                  # 24 syncs, each hidden behind the next sublayer
    "w64_drop12": {"block_types": "spd"},                     # 12comm
    "w64_dense": {"tp_size": 1},                              # the same function as 24comm: the noise floor
}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40, "dtype": "float32", "n_embd": 64, "n_head": 4,
          "learning_rate": learning_rate(64), "min_lr": learning_rate(64) / 10}
