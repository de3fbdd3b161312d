"""The peak learning rate per width, chosen by the tuning sweep (tuning/plan.md's rule) and fixed in
learning_rates.json (plan.md's table renders it) before the study's first run at that width; min_lr is a
tenth of it. A width not yet chosen refuses to plan."""
import json
import os

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "learning_rates.json")) as _f:
    CHOSEN = {int(width): lr for width, lr in json.load(_f).items()}


def learning_rate(width):
    if CHOSEN.get(width) is None:
        raise ValueError(f"n_embd {width}: no learning rate chosen yet; run its tuning first "
                         "(bench/studies/scale/tuning/plan.md) and fix it in plan.md")
    return CHOSEN[width]


GPU_WIDTHS = (512, 768)  # run on a lent GPU by device_width.py, in bfloat16 autocast (plan.md's amendment)
GPU_FLOAT32 = (128, 256)  # may run whole on a lent GPU too, in float32 with TF32 off (plan.md's second amendment)
SEEDS = range(300, 312)  # the study's seeds at every width (plan.md); sweep_w<W>.py plans them

# the study's settings in the plan's rank order: the reference, the primary family's costs, the rest
RANKED = {
    "ref24": {},                                        # tp x12: 24 syncs (the reference)
    "drop1": {"block_types": "parallel"},               # 1comm
    "drop2": {"block_types": "parallel*5,spd"},         # 2comm
    "drop5": {"block_types": "spd,parallel,parallel"},  # 5comm
    "half": {"sync_fraction": 0.5},                     # 24 syncs of half the channels
    "ladder": {"block_types": "ladder"},                # 24 syncs, each hidden behind the next sublayer
    "drop12": {"block_types": "spd"},                   # 12comm
    "dense": {"tp_size": 1},                            # the same function as ref24: the noise floor
}


def sweep(width, lr=None):
    """A width's sweep: (settings tagged with the width, the common keys). n_head keeps heads 16 wide.
    `lr`: the learning rate device_width.py has just chosen by the rule (default: learning_rates.json's)."""
    lr = learning_rate(width) if lr is None else lr
    common = {"compile": False, "eval_interval": 75, "eval_iters": 40, "dtype": "float32",
              "n_embd": width, "n_head": width // 16, "learning_rate": lr, "min_lr": lr / 10}
    if width in GPU_WIDTHS:
        common.update(dtype="bfloat16", tf32=False)  # the GPU widths' numerics class (plan.md's amendment)
    if width in GPU_FLOAT32:
        common.update(tf32=False)  # on a GPU full float32 (plan.md's second amendment); a CPU has no TF32
    return {f"w{width}_{name}": keys for name, keys in RANKED.items()}, common
