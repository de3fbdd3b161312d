# The horizon arm's 5comm (plan.md): as sweep_horizon_w64.py, 5comm alone, run only after the four settings of that
# file are in for every horizon seed and only if the budget holds (the plan's cut order drops it before them).
#   WIDTH_ALONE_STATE=/work/main/bench/studies/width_alone python -m bench.sweep \
#       bench/studies/width_alone/sweep_horizon_w64_drop5.py --slots 2 --threads 1 --no_summary --seeds <the horizon's seeds>   (the worktree at the plan's commit)
from bench.studies.width_alone import design as _d  # _: not a sweep key
name = "width_alone_horizon_w64"  # the same folder as the four: one arm
configs = [_d.CONFIG]
seeds = _d.HORIZON_SEEDS
settings = _d.study_settings([(64, _d.HORIZON_LAST)], _d.read_state("chosen_rates.json"), suffix="h")
common = _d.horizon_common()
