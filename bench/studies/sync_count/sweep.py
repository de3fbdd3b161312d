# The sync-count study with enough seeds to tell configs apart (issue 16, item 4): char-level
# Shakespeare, the dense config and every sync-count config, including the seed guide's own
# patterns (7comm = its "8comm", 5comm = its "6comm") and the 1comm lower bound, 8 seeds each,
# 600 iterations (the configs' own setting). 11 configs x 8 seeds = 88 runs.
# Seeds pair across configs (same seed: same initial weights, same batches), so
# bench/summarize.py compares every config with 24comm seed by seed; dense vs 24comm of the
# same seed is the noise floor.
# Eval every 75 iterations (9 evals: the curves give the iterations to target) on a fixed sample
# of 40 batches per split, twice the default 20. Measured on this 2-core machine (1 thread per
# run, 24comm): one such eval costs about as much as 27 training steps, so every 50 iterations
# would be ~37% of a run, over the third the study allows; every 75 is ~29%.
# Every run of the table uses 1 thread (--slots 2 on 2 cores), so all share one summation order.
#   python -m bench.sweep bench/studies/sync_count/sweep.py --slots 2
#   python -m bench.summarize bench/studies/sync_count/runs --out bench/studies/sync_count
name = "char_sync_study_8seeds"
configs = ["config/train_shakespeare_char.py"] + [
    f"config/train_shakespeare_char_{n}comm.py" for n in (24, 18, 16, 12, 8, 7, 6, 5, 2, 1)]
seeds = [1, 2, 3, 4, 5, 6, 7, 8]
settings = {"": {}}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40}
