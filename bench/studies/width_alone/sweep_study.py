# The width-alone study at n_embd 64 and 128 (plan.md, committed before any run of the study): each setting at its
# own chosen rate (chosen_rates.json, read from WIDTH_ALONE_STATE; a width not yet chosen refuses to plan), seeds
# 600-613. A seed is the unit: its nine runs (64: 24comm, 1comm, 5comm, half, ladder; 128: 24comm, 1comm, half,
# ladder) run on one host in one class, seeds outermost, and a seed is committed when all nine are done.
#   WIDTH_ALONE_STATE=/work/main/bench/studies/width_alone python -m bench.sweep \
#       bench/studies/width_alone/sweep_study.py --slots 2 --threads 1 --no_summary --seeds 600   (from the worktree at the plan's commit)
#   each finished seed: its runs' small files (not ckpt.pt) copied to bench/studies/width_alone/runs/ and committed
from bench.studies.width_alone import design as _d  # _: not a sweep key
name = "width_alone_study"
configs = [_d.CONFIG]
seeds = _d.STUDY_SEEDS
settings = _d.study_settings([(64, _d.CPU[64]), (128, _d.CPU[128])], _d.read_state("chosen_rates.json"))
common = _d.common()
