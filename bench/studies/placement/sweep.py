# Placement at equal sync count (issue 33, study 2): planned, with its hypotheses and analysis, in
# plan.md, committed before any run. Char-level Shakespeare, n_embd 64, 600 iterations, TP=2 `sim`,
# lossless; each setting is 24comm's config with another block pattern; fresh seeds 19-27 (9: the
# power calculation of plan.md). 8 settings x 9 seeds = 72 runs, about 5 hours at --slots 2 on 2 cores.
#   python -m bench.sweep bench/studies/placement/sweep.py --slots 2    (from a worktree at a fixed commit: runs/char_placement/)
#   each finished seed: its runs' logs (not ckpt.pt) copied to bench/studies/placement/runs/ and committed
#   python -m bench.summarize bench/studies/placement/runs --seeds 19-27 --reference train_shakespeare_char_24comm/alt18 --out bench/studies/placement/s18
#   python -m bench.summarize bench/studies/placement/runs --seeds 19-27 --reference train_shakespeare_char_24comm/spd12 --out bench/studies/placement/s12
#   python -m bench.summarize bench/studies/placement/runs --seeds 19-27 --reference train_shakespeare_char_24comm/tp_first13 --out bench/studies/placement/s13
name = "char_placement"
configs = ["config/train_shakespeare_char_24comm.py"]
seeds = list(range(19, 28))
settings = {
    # 18 syncs: the seed guide's alternating pattern against both clusterings
    "alt18": {"block_types": "tp,spd"}, "tp_first18": {"block_types": "tp*6,spd*6"},
    "spd_first18": {"block_types": "spd*6,tp*6"},
    # 12 syncs: all spd against the guide's parallel*4 + spd*4 + tp*4
    "spd12": {"block_types": "spd"}, "mixed12": {"block_types": "parallel*4,spd*4,tp*4"},
    # 13 syncs: block 0's attention sync kept (tp first) against the last block's (tp last), and
    # against six tp blocks then six parallel ones (12 + the exit sync)
    "tp_first13": {"block_types": "tp,spd*11"}, "tp_last13": {"block_types": "spd*11,tp"},
    "tp6_par6_13": {"block_types": "tp*6,parallel*6"},
}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40,
          "device": "cuda", "dtype": "float32"}  # the amended host rule of plan.md: one lent H200
