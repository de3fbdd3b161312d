# A second width (issue 16, item 8): the char study at n_embd 128 (n_head 8: 16-wide heads, as at
# n_embd 64), 24comm, 7comm (the seed guide's "8comm") and the 1comm lower bound, 4 seeds. Does
# the cost of a dropped sync grow or shrink with width? Compare each pattern's paired difference
# from 24comm of its own width with the 8-seed study's at n_embd 64 (same seeds, same settings).
#   python -m bench.sweep bench/studies/width128/sweep.py --slots 2
#   python -m bench.summarize bench/studies/width128/runs --out bench/studies/width128
name = "char_width128"
configs = [f"config/train_shakespeare_char_{n}comm.py" for n in (24, 7, 1)]
seeds = [1, 2, 3, 4]
settings = {"": {}}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40, "n_embd": 128, "n_head": 8}
