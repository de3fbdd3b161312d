# Sequence parallelism under packet loss (issue 51 item 5): planned, with its hypotheses, seeds and analysis,
# in plan.md, committed before any run. The char configs 24comm and 12comm (12 layers, n_embd 64, 600
# iterations, TP=2 `sim`, fp32); per config and seed: lossless, 1% Bernoulli on both passes with all-reduce
# syncs (b1), and the same link with sequence_parallel=True (b1_sp: each sync a reduce-scatter and an
# all-gather, each half its own packets). Seeds outermost, a seed's six runs in one session on one host.
#   python -m bench.sweep bench/studies/sp_loss/sweep.py --slots 2 --threads 1 --no_summary   (from a worktree at the plan's commit)
#   each finished seed: its runs' logs (not ckpt.pt) copied to bench/studies/sp_loss/runs/ and committed
name = "sp_loss"
configs = ["config/train_shakespeare_char_24comm.py", "config/train_shakespeare_char_12comm.py"]
seeds = list(range(400, 418))
settings = {
    "lossless": {},
    "b1": {"loss_model": "bernoulli", "loss_rate": 0.01},
    "b1_sp": {"loss_model": "bernoulli", "loss_rate": 0.01, "sequence_parallel": True},
}
common = {"compile": False, "dtype": "float32", "eval_interval": 75, "eval_iters": 40}
