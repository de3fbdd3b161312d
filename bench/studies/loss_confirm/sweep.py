# A confirmatory follow-up to the 4-seed loss sweep (bench/studies/loss_sweep/sweep.py, seeds
# 1-4), on new seeds 5-8 only, so that its tests do not reuse the data that suggested them.
# Written and committed before any of its runs; the hypotheses and the analysis are fixed here.
# Costs (lossy minus lossless final val loss, same config and seed), each "more than 0":
#   H1: 24comm under 1% Bernoulli loss (seeds 1-4: +0.029 [+0.005, +0.053], Holm p 0.23 over 15)
#   H2: 24comm under 3%                (seeds 1-4: +0.063 [+0.023, +0.103], Holm p 0.15)
#   H3: 2comm under 1%                 (seeds 1-4: +0.069 [+0.001, +0.138], Holm p 0.25)
#   H4: 2comm under 3% (a replication) (seeds 1-4: +0.180 [+0.127, +0.233], Holm p 0.026, resolved)
# Contrasts (2comm's cost minus 24comm's under the same link), each "2comm pays more":
#   H5: at 1% (seeds 1-4: +0.040 [-0.027, +0.107]);  H6: at 3% (+0.117 [+0.044, +0.190], Holm p 0.22 over 16)
# Bernoulli loss on both passes. Analysis: bench/tolerance.py on this sweep alone, two-sided p as it
# computes them; H1-H4 are its cost family (Holm over 4), H5-H6 its contrast family (Holm over 2).
# Each lossy run pairs with the lossless run of the same config and seed trained by this sweep
# (seeds outermost, so a seed's runs share a session and a machine). Training settings as in the
# 4-seed sweep, at the same commit (13695c1).
#   python -m bench.sweep bench/studies/loss_confirm/sweep.py --slots 2
#   python -m bench.summarize bench/studies/loss_confirm/runs --out bench/studies/loss_confirm
#   python -m bench.tolerance bench/studies/loss_confirm/experiment_summary.csv --noise_floor bench/studies/sync_count/noise_floor.json
name = "char_loss_confirm"
configs = [f"config/train_shakespeare_char_{n}comm.py" for n in (24, 2)]
seeds = [5, 6, 7, 8]
settings = {
    "lossless": {},
    **{f"bern{rate:g}": {"loss_model": "bernoulli", "loss_rate": rate} for rate in (0.01, 0.03)},
}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40}
