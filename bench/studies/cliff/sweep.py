# The cliff, confirmed (issue 33, study 1): is there a trend, and where does the cost of dropping
# syncs begin? Planned, with its hypotheses and analysis, in plan.md, committed before any run.
# Char-level Shakespeare, n_embd 64 (the width where the exploratory trend was found), 600 iterations,
# dense (the noise floor) and ten TP patterns from 24 to 1 syncs per pass, the intermediate counts
# 11, 10 and 9 with their parallel blocks spread evenly; fresh seeds 9-18 (10: the power calculation
# of plan.md). 11 configs x 10 seeds = 110 runs, about 7.6 hours at --slots 2 on a 2-core host.
# Seeds outermost: a seed's 11 runs follow one another in one session, on one host.
#   python -m bench.sweep bench/studies/cliff/sweep.py --slots 2       (from a worktree at a fixed commit: runs/char_cliff/)
#   each finished seed: its runs' logs (not ckpt.pt) copied to bench/studies/cliff/runs/ and committed
#   python -m bench.summarize bench/studies/cliff/runs --seeds 9-18 --out bench/studies/cliff
#   python -m bench.trend bench/studies/cliff/experiment_summary.csv --seeds 9-18
name = "char_cliff"
configs = ["config/train_shakespeare_char.py"] + [
    f"config/train_shakespeare_char_{n}comm.py" for n in (24, 18, 12, 11, 10, 9, 7, 5, 2, 1)]
seeds = list(range(9, 19))
settings = {"": {}}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40}
