# The width-alone study's noise floor (plan.md, amendment 2): dense (tp_size=1, the same function as 24comm from the
# same weights) at 24comm's chosen rate (chosen_rates.json, from WIDTH_ALONE_STATE) at n_embd 64 and 128, on the study
# seeds; each pairs with the study's own 24comm run of its seed, so a seed's two floor runs run in the class of that
# seed's study runs and are committed together. This file came after the plan's commit P, so it uses only what P's
# design.py has: it runs from the worktree at P, named by its path in the main checkout, and every run is P's code.
#   cd /work/wt-width-alone && WIDTH_ALONE_STATE=/work/main/bench/studies/width_alone python -m bench.sweep \
#       /work/main/bench/studies/width_alone/sweep_floor.py --slots 2 --threads 1 --no_summary --seeds <a study seed of this class>
from bench.studies.width_alone import design as _d  # _: not a sweep key

_DENSE = {"tp_size": 1}  # one rank: every block is the dense block, no sync (the scale study's noise floor)
_rates = _d.read_state("chosen_rates.json")
name = "width_alone_floor"
configs = [_d.CONFIG]
seeds = _d.STUDY_SEEDS
settings = {f"w{w}_dense": {**_DENSE, **_d.shape(w), **_d.rate(_d.chosen(_rates, w, ("ref24",))["ref24"])}
            for w in (64, 128)}
common = _d.common()
