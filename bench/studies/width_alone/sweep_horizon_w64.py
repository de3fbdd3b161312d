# The width-alone study's horizon arm (plan.md): n_embd 64 at 2,400 iterations (4x; lr_decay_iters follows, warmup
# 50 and min_lr = lr/10 unchanged, evals every 300), 24comm, 1comm, half the channels and ladder, each at its rate
# chosen at 600 iterations (chosen_rates.json, from WIDTH_ALONE_STATE), on 8 of the study seeds: the first 8
# in seed order that a host of their study runs' class reaches (a seed's four runs in that class, --seeds names them).
#   WIDTH_ALONE_STATE=/work/main/bench/studies/width_alone python -m bench.sweep \
#       bench/studies/width_alone/sweep_horizon_w64.py --slots 2 --threads 1 --no_summary --seeds <a study seed of this host's class>   (the worktree at the plan's commit)
from bench.studies.width_alone import design as _d  # _: not a sweep key
name = "width_alone_horizon_w64"
configs = [_d.CONFIG]
seeds = _d.HORIZON_SEEDS
settings = _d.study_settings([(64, _d.HORIZON)], _d.read_state("chosen_rates.json"), suffix="h")
common = _d.horizon_common()
