# The width-alone study's rate tuning at n_embd 128 (plan.md, committed before any run of the study): 24comm, 1comm,
# half the channels and ladder, each at every rate of its grid (0.0025, 0.005, 0.01, 0.02 and the points
# the rule added at an edge: tuning/extensions.json, read from WIDTH_ALONE_STATE), tuning seeds 500-502, CPU float32.
#   WIDTH_ALONE_STATE=/work/main/bench/studies/width_alone python -m bench.sweep \
#       bench/studies/width_alone/tuning/sweep_w128.py --slots 2 --threads 1 --no_summary   (from the worktree at the plan's commit)
#   then: python -m bench.studies.width_alone.rates --width 128 --runs bench/studies/width_alone/tuning/runs --write
from bench.studies.width_alone import design as _d  # _: not a sweep key
_sweep = _d.tuning_sweep(128, _d.CPU[128], _d.TUNING_SEEDS, _d.read_state("tuning/extensions.json"))
name, configs, seeds, settings, common = (_sweep[k] for k in ("name", "configs", "seeds", "settings", "common"))
