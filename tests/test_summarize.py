"""bench/summary.py (the library behind `python -m bench.summarize`) on hand-computed examples, and
the paired columns of the summary of fabricated runs (no training: run directories written by
hand); bench/tolerance.py on hand-made rows. The statistics themselves: tests/test_stats.py."""

import csv
import json
import math

import pytest

from bench.harness import run_tool
from conftest import assert_one_line_error

from bench import summary, tolerance



def test_iters_to_target_interpolates_between_evals():
    curve = [(0, 4.0), (100, 2.5), (200, 2.0), (300, 1.9)]
    assert summary.iters_to_target(curve, 2.2) == pytest.approx(160.0)  # 100 + (2.5-2.2)/(2.5-2.0) * 100
    assert summary.iters_to_target(curve, 2.0) == pytest.approx(200.0)
    assert summary.iters_to_target(curve, 1.8) is None  # never reached
    assert summary.iters_to_target(curve, 5.0) == 0.0  # reached at the first eval
    # the first crossing counts, even if the curve rises again afterwards
    assert summary.iters_to_target([(0, 4.0), (100, 2.1), (200, 2.3)], 2.2) == pytest.approx(1.8 / 1.9 * 100)


def test_schedule_syncs_average_the_patterns_over_the_steps():
    # 24comm for 150 of 600 steps, then [spd,parallel] x6 (7 syncs): (150 * 24 + 450 * 7) / 600
    cfg = {"block_schedule": "0:tp;150:spd,parallel", "n_layer": 12, "tp_size": 2, "max_iters": 600}
    assert summary.schedule_syncs(cfg) == pytest.approx(11.25)
    # a switch after the end of the run counts no step; a dense schedule counts none
    assert summary.schedule_syncs(dict(cfg, block_schedule="0:spd;900:tp")) == 12
    assert summary.schedule_syncs(dict(cfg, tp_size=1)) == 0


def test_wall_time_adds_the_segments_of_a_resumed_run():
    evals = [{"time_s": t} for t in (0.5, 10.0, 20.0, 0.4, 12.0)]  # the clock restarted at the resume
    assert summary.wall_time(evals, None) == pytest.approx(32.0)
    assert summary.wall_time([], {"final": {"time_s": 7.0}}) == 7.0


# final val losses by config and seed; the per-seed differences from 24comm are round numbers
FINALS = {
    "train_shakespeare_char": ((1, 2.00), (2, 2.10), (3, 1.90)),          # dense: 24comm - dense = +0.01, -0.02, +0.015
    "train_shakespeare_char_24comm": ((1, 2.01), (2, 2.08), (3, 1.915)),
    "train_shakespeare_char_12comm": ((1, 2.011), (2, 2.082), (3, 1.9165)),  # +0.001, +0.002, +0.0015
    "train_shakespeare_char_2comm": ((1, 2.11), (2, 2.20), (3, 1.995)),      # +0.10, +0.12, +0.08
}
PATTERNS = {"train_shakespeare_char": (1, "tp"), "train_shakespeare_char_24comm": (2, "tp"),
            "train_shakespeare_char_12comm": (2, "spd"), "train_shakespeare_char_2comm": (2, "parallel*5,spd")}


def fabricate_runs(sweep_dir):
    """Run directories as bench/sweep.py leaves them: config.json, metrics.jsonl, result.json.
    Every curve is 4.0, 3.0, final + 0.5, final at iterations 0, 100, 200, 300."""
    import configurator
    defaults = configurator.train_defaults()
    for stem, finals in FINALS.items():
        tp_size, block_types = PATTERNS[stem]
        for seed, final in finals:
            run_dir = sweep_dir / f"{stem.removeprefix('train_')}-s{seed}"
            run_dir.mkdir(parents=True)
            cfg = dict(defaults, seed=seed, max_iters=300, tp_size=tp_size, block_types=block_types,
                       out_dir=str(run_dir))
            (run_dir / "config.json").write_text(json.dumps(cfg))
            evals = [{"iter": i, "val_loss": v, "val_perplexity": math.exp(v), "val_accuracy": 0.3, "time_s": t}
                     for i, v, t in ((0, 4.0, 1.0), (100, 3.0, 30.0), (200, final + 0.5, 60.0), (300, final, 90.0))]
            steps = [{"iter": i, "train_loss": 3.0, "ms_per_iter": ms, "tokens_per_s": 4096 / ms * 1000}
                     for i, ms in ((1, 900.0), (101, 250.0), (201, 250.0))]
            records = [evals[0], steps[0], evals[1], steps[1], evals[2], steps[2], evals[3]]
            (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            (run_dir / "result.json").write_text(json.dumps(
                {"config": f"config/{stem}.py", "setting": "", "seed": seed, "final": evals[-1]}))
            (run_dir / "train.log").write_text(
                "layout: dp=1 x tp=2 (sim, 1 process) | blocks: x | sync points: 2 per pass | backend: native "
                "(tp_backend='native') | loss model: none | params: 0.61M | tokens/iter: 4,096 | "
                "device: cpu float32 compile=False | seed: 1\n")


def summarize_runs(tmp_path, *args):
    sweep = tmp_path / "sweep"
    if not sweep.exists():
        fabricate_runs(sweep)
    out = tmp_path / "summary"
    result = run_tool("bench.summarize", str(sweep), "--out", str(out), *args)
    return result, out


def read_summary(out):
    with open(out / "experiment_summary.csv") as f:
        rows = list(csv.DictReader(f))
    aggregates = {r["run"].removesuffix(" (mean)"): r for r in rows if r["kind"] == "aggregate"}
    runs = {r["run"]: r for r in rows if r["kind"] == "run"}
    return runs, aggregates


@pytest.mark.slow
def test_summary_pairs_seeds_against_24comm(tmp_path):
    result, out = summarize_runs(tmp_path)
    assert result.returncode == 0, result.stderr
    runs, aggregates = read_summary(out)
    assert len(runs) == 12 and len(aggregates) == 4

    # every row: backend, mode, dtype, it/s (median of the steps after the first: 250 ms) and wall time
    for r in list(runs.values()) + list(aggregates.values()):
        assert (r["tp_backend"], r["tp_mode"], r["dtype"]) == ("native", "sim", "float32")
        assert float(r["it_per_s"]) == pytest.approx(4.0) and float(r["wall_time_s"]) == pytest.approx(90.0)

    # run rows carry their own seed's difference from 24comm, written in full: 2.20 - 2.08 read back exactly
    assert float(runs["shakespeare_char_2comm-s2"]["paired_diff"]) == 2.20 - 2.08
    assert float(runs["shakespeare_char-s1"]["paired_diff"]) == pytest.approx(-0.01, abs=1e-6)
    assert all(r["paired_reference"] == "train_shakespeare_char_24comm" for r in runs.values())

    # 2comm - 24comm: 0.10, 0.12, 0.08 -> mean 0.10, std 0.02, t = 5 sqrt(3), df 2
    two = aggregates["shakespeare_char_2comm"]
    half = 4.302653 * 0.02 / math.sqrt(3)
    p_two = 1 - math.sqrt(75 / 77)  # the df=2 tail at t^2 = 75: 0.0130725
    assert two["paired_n"] == "3"
    assert float(two["paired_diff_mean"]) == pytest.approx(0.10, abs=1e-6)
    assert float(two["paired_diff_std"]) == pytest.approx(0.02, abs=1e-6)
    assert float(two["paired_ci_low"]) == pytest.approx(0.10 - half, abs=1e-5)
    assert float(two["paired_ci_high"]) == pytest.approx(0.10 + half, abs=1e-5)
    assert float(two["paired_p"]) == pytest.approx(p_two, rel=1e-5)
    # 12comm - 24comm: 0.001, 0.002, 0.0015 -> t = 3 sqrt(3), p = 1 - sqrt(27/29)
    twelve = aggregates["shakespeare_char_12comm"]
    p_twelve = 1 - math.sqrt(27 / 29)
    assert float(twelve["paired_p"]) == pytest.approx(p_twelve, rel=1e-4)
    # Holm over the three tested settings (dense, 12comm, 2comm; not the reference itself)
    assert float(two["paired_p_holm"]) == pytest.approx(3 * p_two, rel=1e-5)
    assert float(twelve["paired_p_holm"]) == pytest.approx(2 * p_twelve, rel=1e-4)
    reference = aggregates["shakespeare_char_24comm"]
    assert reference["paired_p"] == "" and reference["paired_n"] == "3"

    # noise floor: 24comm - dense = +0.01, -0.02, +0.015; max |difference| 0.02
    floors = json.loads((out / "noise_floor.json").read_text())
    assert len(floors) == 1 and floors[0]["n"] == 3 and floors[0]["max_abs"] == pytest.approx(0.02)
    assert floors[0]["diffs"] == pytest.approx([0.01, -0.02, 0.015])
    assert "noise floor" in result.stdout
    assert twelve["within_noise_floor"] == "True"  # CI [0.00026, 0.00274] inside +-0.02
    assert two["within_noise_floor"] == "False"    # CI [0.050, 0.150]

    # iterations to dense's final loss + 1% (same seed): seed 1 targets 2.02 between evals 200 and 300
    assert float(runs["shakespeare_char-s1"]["iters_to_1pct"]) == pytest.approx(296.0)  # 200 + (2.5-2.02)/0.5*100
    assert float(runs["shakespeare_char_24comm-s1"]["iters_to_1pct"]) == pytest.approx(298.0)
    never = runs["shakespeare_char_2comm-s1"]  # final 2.11 > 2.02: never reached
    assert never["iters_to_1pct"] == "" and never["reached_1pct"] == "0"
    assert two["reached_2pct"] == "0" and two["paired_iters_to_2pct_n"] == "0"
    # dense - 24comm, in iterations: 200 * (dense final - 24comm final) = -2, +4, -3
    dense = aggregates["shakespeare_char"]
    assert dense["paired_iters_to_1pct_n"] == "3"
    assert float(dense["paired_iters_to_1pct_mean"]) == pytest.approx(-1 / 3, abs=1e-4)
    assert (out / "val_loss_vs_syncs.png").stat().st_size > 10_000


@pytest.mark.slow
def test_summary_reference_option(tmp_path):
    result, out = summarize_runs(tmp_path, "--reference=shakespeare_char_2comm")  # train_ may be left out
    assert result.returncode == 0, result.stderr
    runs, aggregates = read_summary(out)
    assert float(aggregates["shakespeare_char_24comm"]["paired_diff_mean"]) == pytest.approx(-0.10, abs=1e-6)
    assert runs["shakespeare_char-s1"]["paired_reference"] == "train_shakespeare_char_2comm"

    bad, _ = summarize_runs(tmp_path, "--reference=train_shakespeare_char_99comm")
    assert_one_line_error(bad, "--reference='train_shakespeare_char_99comm' matches no setting",
                          "train_shakespeare_char_12comm", "train_shakespeare_char_24comm")


def test_parse_seeds():
    assert summary.parse_seeds("1-7") == set(range(1, 8))
    assert summary.parse_seeds("1,3, 5") == {1, 3, 5}
    assert summary.parse_seeds("1-2,8") == {1, 2, 8}
    for bad in ("3-1", "a", "1-", "", "1,,2"):
        with pytest.raises(summary.SummaryError, match="--seeds"):
            summary.parse_seeds(bad)


@pytest.mark.slow
def test_summary_seeds_option_keeps_only_those_seeds(tmp_path):
    result, out = summarize_runs(tmp_path, "--seeds=1,3")
    assert result.returncode == 0, result.stderr
    runs, aggregates = read_summary(out)
    assert sorted(runs) == sorted(f"{c}-s{s}" for s in (1, 3) for c in
                                  ("shakespeare_char", "shakespeare_char_24comm", "shakespeare_char_12comm",
                                   "shakespeare_char_2comm"))
    two = aggregates["shakespeare_char_2comm"]
    assert two["paired_n"] == "2" and float(two["paired_diff_mean"]) == pytest.approx(0.09, abs=1e-6)  # 0.10, 0.08

    none, _ = summarize_runs(tmp_path, "--seeds=9")
    assert_one_line_error(none, "no runs of seeds [9]")


TOLERANCE_COLUMNS = ["kind", "status", "run", "config", "seed", "iters", "sync_points", "loss_model", "loss_rate",
                     "ge_preset", "loss_fwd", "loss_bwd", "final_val_loss"]


LOSSLESS_LOSSES = {1: 1.50, 2: 1.52, 3: 1.49, 4: 1.51}  # seed -> final val loss of config/a.py's lossless runs


def tolerance_rows(lossy, base=LOSSLESS_LOSSES):
    """Summary run rows of one config, config/a.py: a lossless run per seed (final val loss `base`) and,
    per (loss model, rate) of `lossy`, a run per seed at the lossless loss plus the given difference
    (rate 0: the `zero` Gilbert-Elliott preset)."""
    rows = [dict(kind="run", status="done", run=f"a-s{seed}", config="config/a.py", seed=seed, iters=600, sync_points=24,
                 loss_model="none", loss_rate=0.0, ge_preset="", loss_fwd=True, loss_bwd=True, final_val_loss=loss)
            for seed, loss in base.items()]
    for (model, rate), diffs in lossy.items():
        rows += [dict(rows[k], loss_model=model, loss_rate=rate, ge_preset="zero" if rate == 0 else "",
                      final_val_loss=base[k + 1] + d) for k, d in enumerate(diffs)]
    return rows


def write_rows(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, TOLERANCE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def test_tolerance_pairs_each_lossy_run_with_its_lossless_twin(tmp_path):
    """bench/tolerance.py on hand-made run rows: 0.3% unresolved, 1% resolved, so the tolerance is
    0.3%; the `zero` control pairs to exactly 0 and stays out of the Holm family (2 settings); a control
    that does not pair to 0 fails the tool."""
    rows = tolerance_rows({("bernoulli", 0.003): [0.001, -0.001, 0.002, 0.0],
                           ("bernoulli", 0.01): [0.010, 0.012, 0.011, 0.013],
                           ("gilbert_elliott", 0.0): [0.0, 0.0, 0.0, 0.0]})
    path = tmp_path / "summary.csv"
    write_rows(path, rows)
    result = run_tool("bench.tolerance", str(path), "--plot", str(tmp_path / "cost.png"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cost.png").stat().st_size > 0
    lines = {line.split("|")[2].strip(): line for line in result.stdout.splitlines() if line.startswith("| a.py")}
    assert "| 4 | +0.0005 |" in lines["bern0.003"] and lines["bern0.003"].endswith("| no |")
    assert "| 4 | +0.0115 |" in lines["bern0.01"] and lines["bern0.01"].endswith("| yes |")
    assert "| a.py | ge-zero | 4 | yes | +0 |" in result.stdout and "Holm over 2 settings" in result.stdout
    # 1% Bernoulli: mean 0.0115, std 0.0012910, t = 17.816 on 3 df; closed form for 3 df:
    # p = 1 - (2/pi) (atan(x) + x / (1 + x^2)), x = t/sqrt(3) -> 3.856e-4; the smaller of 2 p: Holm x2
    assert "| 0.000771 |" in lines["bern0.01"]
    assert "| a.py | 0.30% | +0.0005 |" in result.stdout

    floor = tmp_path / "noise_floor.json"  # 0.3%: 95% CI [-0.0016, +0.0026] inside +-0.005; 1% outside
    floor.write_text(json.dumps([{"dense": "a", "tp": "a", "max_abs": 0.005}]))
    with_floor = run_tool("bench.tolerance", str(path), f"--noise_floor={floor}")
    cells = {line.split("|")[2].strip(): line for line in with_floor.stdout.splitlines() if line.startswith("| a.py")}
    assert cells["bern0.003"].endswith("| no | yes |") and cells["bern0.01"].endswith("| yes | no |")
    not_floor = run_tool("bench.tolerance", str(path), f"--noise_floor={path}")
    assert_one_line_error(not_floor, "--noise_floor", "not a noise_floor.json")
    wrong = run_tool("bench.tolerance", str(path), "--reference=config/b.py")
    assert_one_line_error(wrong, "--reference 'config/b.py' is not a config", "config/a.py")

    write_rows(path, [r for r in rows if r["loss_rate"] != 0.01])  # without the resolved 1%: every rate unresolved
    only_small = run_tool("bench.tolerance", str(path))
    assert "| a.py | >= 0.30% (none resolved) | +0.0005 |" in only_small.stdout, only_small.stdout

    twins = rows + [dict(rows[0], final_val_loss=1.6)]  # a second lossless setting of a.py: whose twin is whose?
    write_rows(path, twins)
    assert_one_line_error(run_tool("bench.tolerance", str(path)), "a.py seed 1: two lossless runs")
    rows[-1]["final_val_loss"] += 1e-7  # seed 4's zero control one rounding step off its lossless twin
    write_rows(path, rows)
    broken = run_tool("bench.tolerance", str(path))
    assert broken.returncode == 1 and "| a.py | ge-zero | 4 | NO | +1e-07 |" in broken.stdout
    assert_one_line_error(broken, "control(s) a.py ge-zero dropped no packet")


def test_tolerance_plan_lists_unresolved_costs_with_the_seeds_they_need(tmp_path):
    """--plan (bench/power.py): 1% resolved (not planned), 3% unresolved with mean 0.02 and std 0.02
    (d = 1: 10 seeds as one hypothesis; at alpha 0.05 / 2, 13 seeds: power 0.835, 12 give 0.793)."""
    spread = 0.02 * (3 / 4) ** 0.5  # 0.02 +- spread alternating: mean 0.02, sample std 0.02 (variance 4 spread^2 / 3)
    path = tmp_path / "summary.csv"
    write_rows(path, tolerance_rows({("bernoulli", 0.01): [0.010, 0.012, 0.011, 0.013],
                                     ("bernoulli", 0.03): [0.02 + spread, 0.02 - spread, 0.02 + spread, 0.02 - spread]}))
    assert "Planning" not in run_tool("bench.tolerance", str(path)).stdout  # only when asked for
    result = run_tool("bench.tolerance", str(path), "--plan")
    assert result.returncode == 0, result.stderr
    planned = [line for line in result.stdout.split("Planning", 1)[1].splitlines() if line.startswith("| a.py")]
    assert planned == ["| a.py: bern0.03 | +0.0200 | 0.0200 | 10 | 13 (of 2) |"]


def test_tolerance_corrected_and_uncorrected_stop_at_their_own_first_resolved_rate():
    """tolerance.tolerances walks a config's Bernoulli rates upwards and stops at the first resolved
    one: by Holm (p_holm < 0.05) 1% is unresolved and 3% resolved, so 1%; by each setting's own 95%
    interval 1% is already resolved, so 0.3%. A rate with n < 2 cannot be told: the walk stops there."""

    def stats(ci, p_holm):
        return dict(n=4, mean=(ci[0] + ci[1]) / 2, ci_low=ci[0], ci_high=ci[1], p_holm=p_holm)
    table = [("a", "bern0.01", stats((0.005, 0.05), 0.06), 0.01, True, True),  # rungs go by rate, not order
             ("a", "bern0.003", stats((-0.01, 0.01), 0.9), 0.003, True, True),
             ("a", "bern0.03-fwd", stats((-0.5, -0.4), 0.001), 0.03, False, True),  # one pass: not a rung
             ("a", "bern0.03", stats((0.05, 0.09), 0.04), 0.03, True, True),
             ("b", "bern0.003", stats((0.01, 0.02), 0.01), 0.003, True, True),
             ("c", "bern0.003", dict(n=1, mean=0.0, ci_low=None, ci_high=None), 0.003, True, True)]
    assert tolerance.tolerances(table)["a"][0] == 0.01
    assert tolerance.tolerances(table, corrected=False)["a"][0] == 0.003
    assert tolerance.tolerances(table)["b"] is None and tolerance.tolerances(table)["c"] is None


def test_tolerance_contrasts_difference_two_paired_costs_seed_by_seed():
    """tolerance.contrasts on hand-made paired costs: both passes minus forward only (same rate),
    Gilbert-Elliott minus the Bernoulli rate within 5% of its stationary rate (0.0099 vs 0.01, not
    0.03), and config b minus the reference a under the same link, over the seeds both have; Holm
    over the 4 contrasts (none from a single seed)."""
    a, b = "config/a.py", "config/b.py"
    costs = {(a, "bern0.01", 0.01, True, True): {1: 0.02, 2: 0.03, 3: 0.01},
             (a, "bern0.03", 0.03, True, True): {1: 0.05, 2: 0.07, 3: 0.06},
             (a, "bern0.03-fwd", 0.03, False, True): {1: 0.03, 2: 0.03, 3: 0.05},
             (a, "ge-bursty", 0.0099, True, False): {1: 0.03, 2: 0.03, 3: 0.03},
             (b, "bern0.03", 0.03, True, True): {1: 0.09, 2: 0.10, 4: 0.50},  # seed 4 has no pair in a
             (b, "bern0.03-fwd", 0.03, False, True): {1: 0.04},  # one seed: no contrast
             (b, "bern0.01", 0.01, True, True): {1: 0.02, 2: 0.02, 3: 0.02}}
    found = {label: stats for _, label, stats in tolerance.contrasts(costs, a)}
    assert sorted(found) == ["a.py: bern0.03 - bern0.03-fwd", "a.py: ge-bursty - bern0.01", "b.py - a.py: bern0.01",
                             "b.py - a.py: bern0.03"]
    assert found["a.py: bern0.03 - bern0.03-fwd"]["mean"] == pytest.approx(0.07 / 3)  # 0.02, 0.04, 0.01
    assert found["a.py: ge-bursty - bern0.01"]["mean"] == pytest.approx(0.01)  # 0.01, 0.00, 0.02
    assert found["b.py - a.py: bern0.03"]["n"] == 2 and found["b.py - a.py: bern0.03"]["mean"] == pytest.approx(0.035)
    raw = sorted(s["p"] for s in found.values())
    assert sorted(s["p_holm"] for s in found.values())[0] == pytest.approx(min(1.0, 4 * raw[0]))


def test_time_to_target_projects_measured_iterations(tmp_path):
    """bench/time_to_target.py on the fabricated runs. 24comm reaches dense's final x 1.01 at
    iterations 298, 291.8 and 299.2 (seeds 1-3; linear between the evals at 200 and 300), mean
    296.33. One GPT-2 124M micro-step with 24 syncs at 25 Gb/s, by hand: a rank's compute is the
    blocks' 6 x 85,054,464 weights x 12,288 + 12 x 12 x 768 x 1024 x 12,288 = 7.6625e12 FLOPs halved,
    plus the replicated head's 6 x 38,633,472 x 12,288 = 2.8484e12 in full: 6.6796e12 / (0.4 x 989e12)
    = 16.88 ms; 48 all-reduces x (10 us + 18,874,368 B / 3.125e9 B/s) = 290.39 ms; replicated
    gradients (10 us + 157,906,944 B / 3.125e9) / 5 = 10.11 ms; 317.38 ms in all. 5 micro-steps:
    0.026449 min per iteration."""
    sweep = tmp_path / "sweep"
    fabricate_runs(sweep)
    result = run_tool("bench.time_to_target", str(sweep), "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in result.stdout.splitlines() if line.startswith("| train_")}
    assert "train_shakespeare_char" not in rows  # dense sets the target; it has no TP pair to project
    assert rows["train_shakespeare_char_24comm"][:4] == ["24", "3 / 3", "296", "7.84"]
    assert rows["train_shakespeare_char_2comm"][1] == "0 / 3"  # never within 1% of dense
    assert rows["train_shakespeare_char_12comm"][4].startswith("-")  # 12 syncs fewer: less time per iteration
    assert (tmp_path / "time_to_target.png").exists()


def test_eval_noise_recomputes_train_pys_own_val_loss(char_data, tmp_path):
    """bench/eval_noise.py draws train.py's eval batches itself: its mean must equal the logged val
    loss (the tool checks), and a log that disagrees is caught. The run switches its pattern at iteration 5
    and sends half the channels, so the model must be rebuilt as the run computed it at its checkpoint
    (checkpoint.model_as_run, which sample.py uses too): the schedule's pattern in force, its sync_fraction."""
    from bench.harness import run_train
    from conftest import TINY
    run_dir = tmp_path / "run"
    assert run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={run_dir}", "--max_iters=10",
                     "--always_save_checkpoint=True", "--tp_size=2", "--block_schedule=0:tp;5:parallel,spd",
                     "--sync_fraction=0.5").returncode == 0
    result = run_tool("bench.eval_noise", str(run_dir), str(run_dir), f"--data_dir={char_data}")
    assert result.returncode == 0, result.stderr
    rows = [line.split("|") for line in result.stdout.splitlines()
            if line.startswith("| run | ") and "| seed |" not in line]
    assert len(rows) == 2 and rows[0][4] == rows[0][5]  # recomputed mean == logged val loss
    assert rows[1][8].strip() == "+0.0000"  # a run paired with itself
    metrics = (run_dir / "metrics.jsonl").read_text().splitlines()
    last = json.loads(metrics[-1])
    last["val_loss"] += 0.01
    (run_dir / "metrics.jsonl").write_text("\n".join(metrics[:-1] + [json.dumps(last)]) + "\n")
    assert_one_line_error(run_tool("bench.eval_noise", str(run_dir), f"--data_dir={char_data}"),
                          "differs from the logged", "not train.py's eval batches")


def test_verdict_names_only_what_the_interval_resolves():
    from bench.summary import verdict
    assert verdict(dict(paired_p_holm=0.01, paired_diff_mean=0.03, within_noise_floor=False)) == \
        "resolved, higher val loss than the reference"
    assert verdict(dict(paired_p_holm=0.004, paired_diff_mean=-0.02, within_noise_floor=False)).endswith("lower val loss than the reference")
    assert verdict(dict(paired_p_holm=0.4, paired_diff_mean=0.001, within_noise_floor=True)) == "resolved, within the noise floor"
    assert verdict(dict(paired_p_holm=0.4, paired_diff_mean=0.03, within_noise_floor=False)) == \
        "unresolved (interval wider than the noise floor)"
    assert verdict(dict(paired_p_holm=None, paired_diff_mean=0.03, within_noise_floor=None)) == "unresolved"
