# The width-alone study's second reading at n_embd 64 (plan.md): each setting whose chosen rate is not 24comm's, at
# 24comm's chosen rate (chosen_rates.json, read from WIDTH_ALONE_STATE), seeds 600-613; paired with the study's own
# 24comm runs of the same seed and class. Never read in one line with the best-against-best costs. Cut order: plan.md.
#   WIDTH_ALONE_STATE=/work/main/bench/studies/width_alone python -m bench.sweep \
#       bench/studies/width_alone/sweep_at24_w64.py --slots 2 --threads 1 --no_summary --seeds 600   (the worktree at the plan's commit)
from bench.studies.width_alone import design as _d  # _: not a sweep key
name = "width_alone_at24_w64"
configs = [_d.CONFIG]
seeds = _d.STUDY_SEEDS
settings = _d.at24_settings(64, _d.CPU[64], _d.read_state("chosen_rates.json"))
common = _d.common()
