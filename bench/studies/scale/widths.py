"""The peak learning rate per width, chosen by the tuning sweep (tuning/plan.md's rule) and fixed in
plan.md before the study's first run; min_lr is a tenth of it. A width not yet chosen refuses to plan."""
CHOSEN = {64: None, 128: None, 256: None}


def learning_rate(width):
    if CHOSEN.get(width) is None:
        raise ValueError(f"n_embd {width}: no learning rate chosen yet; run its tuning first "
                         "(bench/studies/scale/tuning/plan.md) and fix it in plan.md")
    return CHOSEN[width]
