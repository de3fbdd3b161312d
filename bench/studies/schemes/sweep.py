# Hide or shrink vs drop (issue 33, study 3): planned, with its hypotheses and analysis, in plan.md,
# committed before any run. 24comm's config (char Shakespeare, n_embd 64, 600 iterations, TP=2 `sim`)
# with eight ways to sync, each lossless and at 1% Bernoulli loss; fresh seeds 28-37 (10: the power
# calculation of plan.md). 16 settings x 10 seeds = 160 runs, about 8-10 hours at --slots 2 on 2 cores.
#   python -m bench.sweep bench/studies/schemes/sweep.py --slots 2   (from a worktree at a fixed commit: runs/char_schemes/)
#   each finished seed: its runs' logs (not ckpt.pt) copied to bench/studies/schemes/runs/ and committed
#   python -m bench.summarize bench/studies/schemes/runs --seeds 28-37 --reference train_shakespeare_char_24comm/ref24 --out bench/studies/schemes/lossless
#   python -m bench.summarize bench/studies/schemes/runs --seeds 28-37 --reference train_shakespeare_char_24comm/ref24_bern1 --out bench/studies/schemes/bern1
name = "char_schemes"
configs = ["config/train_shakespeare_char_24comm.py"]
seeds = list(range(28, 38))
_ways = {
    "ref24": {},                                   # tp x12: 24 syncs, every one exposed, fp32
    "ladder": {"block_types": "ladder"},          # hidden: 24 syncs, 1 exposed
    "half": {"sync_fraction": 0.5},               # shrunk: half the channels
    "bf16": {"sync_dtype": "bfloat16"},           # shrunk: half the bits
    "drop12": {"block_types": "spd"},             # dropped: 12comm
    "int8": {"sync_dtype": "int8"},               # shrunk: 8 bits and a scale per token, 0.27 of the bytes
    "drop7": {"block_types": "spd,parallel"},     # dropped: 7comm
    "drop5": {"block_types": "spd,parallel,parallel"},  # dropped: 5comm
}
_bern1 = {"loss_model": "bernoulli", "loss_rate": 0.01}
settings = {**_ways, **{f"{name}_bern1": {**way, **_bern1} for name, way in _ways.items()}}
# dtype: float32 everywhere, also on a lent GPU (device auto), where the default would be bf16 (plan.md's amended host rule)
common = {"compile": False, "eval_interval": 75, "eval_iters": 40, "dtype": "float32"}
