# The confirmatory loss follow-up (bench/studies/loss_confirm/sweep.py: 24 and 2comm on seeds 5-8)
# extended to 12comm, the middle of the sync counts, on the same new seeds 5-8. Written and committed
# after char_loss_confirm's results and before any 12comm run of seeds 5-8 (none existed for these
# link settings). Hypotheses, from the 4-seed sweep's seeds 1-4:
#   H7: 12comm under 1% Bernoulli loss costs more than 0 (seeds 1-4: +0.030 [-0.002, +0.062])
#   H8: 12comm under 3% costs more than 0                (seeds 1-4: +0.049 [+0.010, +0.088])
#   H9: 12comm's cost differs from 24comm's at 1%         (seeds 1-4: +0.001 [-0.035, +0.037])
#   H10: ... and at 3%                                    (seeds 1-4: -0.015 [-0.052, +0.023])
# Bernoulli loss on both passes; two-sided p. Analysis fixed here: the summary of this sweep together
# with char_loss_confirm, and bench/tolerance.py on it, reference 24comm (the most syncs): its cost
# family is then 6 (H1-H4 again, with H7, H8; Holm over 6) and its contrast family 4 (H5, H6 again,
# with H9, H10; Holm over 4). H1-H6 keep the verdicts of their own analysis; they are in these
# families only so that 12comm's hypotheses are corrected for everything tested on these seeds.
# Each lossy run pairs with the lossless run of the same config and seed trained by this sweep.
# Training settings as in the 4-seed sweep, at the same commit (13695c1).
#   python -m bench.sweep bench/studies/loss_confirm_12comm/sweep.py --slots 2
#   python -m bench.summarize bench/studies/loss_confirm/runs bench/studies/loss_confirm_12comm/runs --out bench/studies/loss_confirm_12comm
#   python -m bench.tolerance bench/studies/loss_confirm_12comm/experiment_summary.csv --noise_floor bench/studies/sync_count/noise_floor.json
name = "char_loss_confirm_12comm"
configs = ["config/train_shakespeare_char_12comm.py"]
seeds = [5, 6, 7, 8]
settings = {
    "lossless": {},
    **{f"bern{rate:g}": {"loss_model": "bernoulli", "loss_rate": rate} for rate in (0.01, 0.03)},
}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40}
