# A confirmatory follow-up to the 4-seed loss sweep (bench/sweeps/char_loss_sweep_4seeds.py, seeds
# 1-4), on new seeds 5-8 only, so that its tests do not reuse the data that suggested them.
# Written and committed before any of its runs; the hypotheses and the analysis are fixed here:
#   H1 (contrast): 2comm pays more than 24comm for 3% Bernoulli loss on both passes
#      (seeds 1-4: +0.117 [+0.044, +0.190], Holm p 0.22 over 16 contrasts: unresolved).
#   H2 (cost): 24comm under 3% Bernoulli loss costs more than 0 (seeds 1-4: +0.063 [+0.023, +0.103],
#      Holm p 0.15 over 15: unresolved).
#   H3 (cost, replication): 2comm under 3% Bernoulli loss costs more than 0 (seeds 1-4: +0.180
#      [+0.127, +0.233], Holm p 0.026: the sweep's one resolved cost).
# Analysis: bench/tolerance.py on this sweep alone (two-sided p, as it computes them): the costs H2, H3 are its cost family (Holm over
# 2) and H1 its only contrast; each lossy run is paired with the lossless run of the same config
# and seed trained by this sweep (seeds outermost, so a seed's runs share a session and a machine).
# Same training settings as the 4-seed sweep, the same commit (13695c1).
#   python bench/sweep.py bench/sweeps/char_loss_confirm.py --slots 2
#   python bench/summarize.py runs/char_loss_confirm --out bench/loss_confirm
#   python bench/tolerance.py bench/loss_confirm/experiment_summary.csv --noise_floor bench/study_8seeds/noise_floor.json
name = "char_loss_confirm"
configs = [f"config/train_shakespeare_char_{n}comm.py" for n in (24, 2)]
seeds = [5, 6, 7, 8]
settings = {
    "lossless": {},
    "bern0.03": {"loss_model": "bernoulli", "loss_rate": 0.03},
}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40}
