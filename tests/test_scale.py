"""The scale study's analysis tools (bench/studies/scale/): the weighted slope of a cost on log2(width)
against a hand-computed least-squares fit, and the power calculation against its z-test definition."""

import csv
import math
import os
import sys

import pytest
from scipy import stats as scipy_stats
from scipy.stats import t as scipy_t

from bench.harness import run, run_tool
from bench.studies.scale import power, slope

COLUMNS = ["kind", "run", "config", "setting", "paired_n", "paired_diff_mean", "paired_diff_std"]


def summary(path, rows):
    """A summary csv with only the paired columns the slope reads: rows of (config stem, setting, n, mean, sd)."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerow(dict(kind="run", run="x-s1", config="config/train_shakespeare_char_1comm.py", setting=""))
        for stem, setting, n, mean, sd in rows:
            writer.writerow(dict(kind="aggregate", run=f"{stem} (mean)", config=f"config/train_shakespeare_char_{stem}.py",
                                 setting=setting, paired_n=n, paired_diff_mean=mean, paired_diff_std=sd))


def test_the_slope_is_the_least_squares_fit_on_log2_width(tmp_path):
    # 1comm: costs 0.04, 0.02, 0.01 at 64, 128, 256, every standard error 0.02 / sqrt(4) = 0.01: an
    # ordinary fit on x = 0, 1, 2: slope -0.015, its standard error 0.01 / sqrt(2)
    sds = {64: 0.02, 128: 0.02, 256: 0.02}
    for width, cost in ((64, 0.04), (128, 0.02), (256, 0.01)):
        summary(tmp_path / f"w{width}.csv", [("1comm", "", 4, cost, sds[width]), ("24comm", f"w{width}_half", 4, 0.0, 0.02)])
    tables = {w: slope.costs(tmp_path / f"w{w}.csv") for w in (64, 128, 256)}
    # a summary holding two widths' runs: each width reads its own tag, and a name twice is refused
    summary(tmp_path / "both.csv", [("24comm", "w64_drop1", 12, 0.0193, 0.01), ("24comm", "w512_drop1", 12, 0.0035, 0.01)])
    assert slope.costs(tmp_path / "both.csv", 64)["24comm/drop1"][0] == 0.0193
    assert slope.costs(tmp_path / "both.csv", 512)["24comm/drop1"][0] == 0.0035
    with pytest.raises(ValueError, match="24comm/drop1 twice"):
        slope.costs(tmp_path / "both.csv")
    assert tables[128]["1comm"] == pytest.approx((0.02, 0.01, 4))
    assert tables[128]["24comm/half"] == pytest.approx((0.0, 0.01, 4))  # the width tag w128_ dropped
    fit = slope.slope([(w, *tables[w]["1comm"]) for w in (64, 128, 256)])
    assert fit["slope"] == pytest.approx(-0.015) and fit["se"] == pytest.approx(0.01 / math.sqrt(2))
    # the slope is (m256 - m64) / 2: its variance from the two end widths' seeds, 3 + 3 degrees of freedom
    t = 0.015 / (0.01 / math.sqrt(2))
    assert fit["df"] == pytest.approx(6) and fit["p"] == pytest.approx(2 * scipy_t.sf(t, 6))
    assert fit["ci_low"] == pytest.approx(-0.015 - scipy_t.ppf(0.975, 6) * 0.01 / math.sqrt(2))
    # read at GPT-2's width, log2(768 / 64) doublings up: the ordinary line's prediction, and its standard
    # error sigma * sqrt(1/n + (x0 - mean x)^2 / Sxx) with Sxx = 2; its weights (1/3 + (x - 1)(x0 - 1)/2 per
    # width) give its degrees of freedom
    x0 = math.log2(768 / 64)
    assert fit["at_width"] == 768 and fit["at_cost"] == pytest.approx(0.07 / 3 + 0.015 - 0.015 * x0)
    parts = [(1 / 3 + (x - 1) * (x0 - 1) / 2) ** 2 * 1e-4 for x in (0, 1, 2)]
    df = sum(parts) ** 2 / sum(v ** 2 / 3 for v in parts)
    half_width = scipy_t.ppf(0.975, df) * 0.01 * math.sqrt(1 / 3 + (x0 - 1) ** 2 / 2)
    assert fit["at_df"] == pytest.approx(df)
    assert fit["at_ci_high"] - fit["at_cost"] == pytest.approx(half_width, rel=1e-6)
    assert fit["at_cost"] - fit["at_ci_low"] == pytest.approx(half_width, rel=1e-6)
    # two widths: Welch's t test of the two means (scipy), the slope their difference per doubling
    welch = scipy_stats.ttest_ind_from_stats(0.01, 0.02, 12, 0.04, 0.03, 8, equal_var=False)
    two = slope.slope([(64, 0.04, 0.03 / math.sqrt(8), 8), (512, 0.01, 0.02 / math.sqrt(12), 12)])
    assert two["slope"] == pytest.approx(-0.01) and two["p"] == pytest.approx(welch.pvalue)
    # unequal errors do not weigh the widths (plan amendment 6): the line is the ordinary one, but its
    # standard error and degrees of freedom are each width's own: slope = (m256 - m64) / 2 again
    precise = slope.slope([(64, 0.04, 0.01, 4), (128, 0.02, 0.01, 4), (256, 0.01, 0.001, 4)])
    parts = [0.25 * 0.01 ** 2, 0.0, 0.25 * 0.001 ** 2]  # c_w^2 se_w^2, c = (x - 1) / 2
    assert precise["slope"] == pytest.approx(-0.015) and precise["se"] == pytest.approx(math.sqrt(sum(parts)))
    assert precise["df"] == pytest.approx(sum(parts) ** 2 / sum(v ** 2 / 3 for v in parts))
    assert precise["p"] == pytest.approx(2 * scipy_t.sf(0.015 / math.sqrt(sum(parts)), precise["df"]))
    result = run_tool("bench.studies.scale.slope", "--width", f"64={tmp_path / 'w64.csv'}",
                      "--width", f"128={tmp_path / 'w128.csv'}", "--settings", "1comm", "24comm/half")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| 1comm | 2 | 64: +0.0400, 128: +0.0200 | -0.0200" in result.stdout


def lack_of_fit_by_projection(points):
    """The costs' distance from every line, computed apart from slope.lack_of_fit: project the widths' means onto
    the directions no line can produce (the null space of the design's transpose) and measure that projection
    in its own covariance, diag(se^2) seen through it: chi-square on widths - 2 degrees of freedom for a line."""
    import numpy as np
    from scipy.linalg import null_space
    x = np.log2([p[0] for p in points])
    y, se = np.array([p[1] for p in points]), np.array([p[2] for p in points])
    away = null_space(np.column_stack([np.ones_like(x), x]).T)  # (widths, widths - 2)
    z = away.T @ y
    return float(z @ np.linalg.solve(away.T @ np.diag(se ** 2) @ away, z)), away.shape[1]


def test_a_trend_is_claimed_only_where_the_costs_lie_on_a_line():
    """Three or more widths: the lack-of-fit statistic is the costs' covariance-weighted distance from a line
    (checked against a projection onto what no line can fit), read on F(widths - 2, fewest seeds - 1); where it
    rejects, the verdict claims no trend however small the slope's p. Two widths: not tested (any line fits)."""
    line = [(64, 0.04, 0.005, 12), (128, 0.03, 0.01, 12), (512, 0.01, 0.004, 10)]  # 0.04 - 0.01 per doubling
    bent = [(64, 0.16, 0.019, 12), (128, 0.29, 0.034, 10), (512, -0.01, 0.0024, 12)]  # up, then down
    for points in (line, bent, [(64, 0.02, 0.01, 8), (128, 0.05, 0.02, 8), (256, 0.01, 0.01, 8), (512, 0.03, 0.005, 8)]):
        found = slope.lack_of_fit(points)
        q, df = lack_of_fit_by_projection(points)
        fewest = min(p[3] for p in points) - 1
        assert found["lack_of_fit"] == pytest.approx(q, rel=1e-9, abs=1e-12) and found["lack_of_fit_df"] == df
        assert found["lack_of_fit_p"] == pytest.approx(scipy_stats.f.sf(q / df, df, fewest), rel=1e-9)
    assert slope.lack_of_fit(line)["lack_of_fit"] == pytest.approx(0, abs=1e-12)
    assert slope.lack_of_fit(line)["lack_of_fit_p"] == pytest.approx(1)
    assert slope.lack_of_fit(bent)["lack_of_fit_p"] < 1e-3
    assert slope.lack_of_fit(line[:2]) == dict(lack_of_fit=None, lack_of_fit_df=None, lack_of_fit_p=None)
    shrinking = dict(slope=-0.07, p_holm=1e-8)
    assert slope.verdict(dict(shrinking, **slope.lack_of_fit(bent))).startswith("not a line")
    assert slope.verdict(dict(shrinking, **slope.lack_of_fit(line))) == "resolved: the cost falls with width"
    assert slope.verdict(dict(shrinking, **slope.lack_of_fit(line[:2]))) == "resolved: the cost falls with width"
    assert slope.verdict(dict(slope=0.01, p_holm=0.2, **slope.lack_of_fit(line))) == "unresolved"


def test_the_power_is_the_z_tests_at_holms_first_step():
    se = power.slope_se(0.02, 8, [64, 128, 256])
    assert se == pytest.approx(0.02 / math.sqrt(8 * 2))
    assert power.power(0.0, 0.02, 8, [64, 128, 256], 5) == pytest.approx(0.01)  # no slope: the level 0.05 / 5
    # a slope of 3.29 standard errors (the 0.995 quantile 2.576 + 0.84 ~ 80% power at level 0.01)
    assert power.power(3.4163 * se, 0.02, 8, [64, 128, 256], 5) == pytest.approx(0.80, abs=0.005)
    assert power.power(-0.0135, 0.02, 8, [64, 128, 256], 5) < power.power(-0.0135, 0.02, 12, [64, 128, 256], 5)


def test_a_width_plans_its_eight_settings_once_its_learning_rate_is_fixed(tmp_path, monkeypatch):
    """The study's sweeps refuse a width whose learning rate the tuning has not fixed, and plan the
    eight settings of the plan in rank order, tagged with the width, with 16-wide heads, once it is."""
    from bench import sweep as sweeps
    from bench.studies.scale import widths
    from conftest import ROOT
    monkeypatch.chdir(ROOT)
    path = "bench/studies/scale/sweep_w128.py"
    monkeypatch.setitem(widths.CHOSEN, 128, None)
    with pytest.raises(SystemExit, match="n_embd 128: no learning rate chosen yet"):
        sweeps.load_sweep(path)
    monkeypatch.setitem(widths.CHOSEN, 128, 5e-3)
    study = sweeps.load_sweep(path)
    runs = sweeps.plan(study, str(tmp_path))
    assert list(study["settings"]) == [f"w128_{name}" for name in widths.RANKED]
    assert study["common"]["n_head"] == 8 and study["common"]["min_lr"] == pytest.approx(5e-4)
    assert len(runs) == 8 * 12


def test_the_tuning_rule_chooses_inside_the_grid_and_extends_at_an_end():
    """tuning/plan.md's rule as device_width applies it: the lowest mean wins, a point within 0.005 nats of
    it with a larger learning rate wins instead, a winner at an end extends the grid by a factor of two."""
    from bench.studies.scale.device_width import choose
    assert choose({1e-3: [2.0, 2.1], 2e-3: [1.9, 1.9], 4e-3: [2.2, 2.0]}) == ("chosen", 2e-3)
    assert choose({1e-3: [2.0, 2.0], 2e-3: [1.9, 1.9], 4e-3: [1.904, 1.904], 8e-3: [2.5, 2.5]}) == ("chosen", 4e-3)
    assert choose({1e-3: [2.0, 2.0], 2e-3: [1.9, 1.9], 4e-3: [1.8, math.inf]}) == ("chosen", 2e-3)  # a failed run: inf
    assert choose({1e-3: [2.0, 2.0], 2e-3: [1.9, 1.9], 4e-3: [1.8, 1.8]}) == ("extend", 8e-3)
    assert choose({1e-3: [1.7, 1.7], 2e-3: [1.9, 1.9], 4e-3: [1.8, 1.8]}) == ("extend", 5e-4)
    with pytest.raises(ValueError, match="every tuning run failed"):
        choose({1e-3: [math.inf, math.inf], 2e-3: [math.inf, math.inf]})


def test_device_width_tunes_then_runs_whole_seeds_only(tmp_path, monkeypatch):
    """device_width's call with the sweeps faked (each run's final loss a function of its setting): the
    tuning extends the grid until the lowest mean is inside it (5e-3, the top, wins -> 1e-2 -> 2e-2), the
    choice is written where asked, the study plans exactly sweep_w512.py's runs at that rate, and a seed
    with a failed run is dropped whole: only whole seeds are packed."""
    import json
    import tarfile
    from bench import sweep as sweeps
    from bench.studies.scale import device_width, widths
    from conftest import ROOT
    monkeypatch.chdir(ROOT)
    planned = []

    def fake_run_sweep(sweep, out, limit_s, args, log):
        planned.append(sweep)
        for run in sweeps.plan(sweep, out):
            os.makedirs(run["dir"], exist_ok=True)
            lr = sweep["common"].get("learning_rate") or sweep["settings"][run["setting"]]["learning_rate"]
            for name in ("ckpt.pt", "train.log"):
                open(os.path.join(run["dir"], name), "w").close()
            if run["seed"] != 301 or run["setting"] != "w512_ladder":  # seed 301's ladder run fails
                with open(os.path.join(run["dir"], "result.json"), "w") as f:
                    json.dump({"final": {"val_loss": 1.8 + math.log2(lr / 1e-2) ** 2 / 10}}, f)
        return True

    monkeypatch.setattr(device_width, "run_sweep", fake_run_sweep)
    rates, out = tmp_path / "lr.json", tmp_path / "out"
    rates.write_text('{"512": null}')
    monkeypatch.setattr(sys, "argv", ["device_width", "--tune", "512", "--study", "512", "--commit", "abc",
                                      "--out", str(out), "--runs", str(tmp_path / "runs"), "--max_seeds", "3",
                                      "--learning_rates", str(rates)])
    device_width.main()
    assert json.loads(rates.read_text())["512"] == pytest.approx(1e-2)
    assert [len(s["settings"]) for s in planned[:3]] == [4, 5, 6]  # the grid, then one point past each end won
    monkeypatch.setitem(widths.CHOSEN, 512, 1e-2)
    expected = sweeps.load_sweep("bench/studies/scale/sweep_w512.py")
    assert {k: planned[3][k] for k in expected} == {**expected, "seeds": [300, 301, 302]}
    assert planned[3]["common"]["dtype"] == "bfloat16"
    host = (out / "host.txt").read_text()
    assert "seeds kept (every run finished): 300 302; dropped (cut off or failed, rerun whole): 301" in host
    with tarfile.open(out / "study_w512.tgz") as tar:
        names = tar.getnames()
    assert {n.split("/")[0].rsplit("-s", 1)[1] for n in names} == {"300", "302"} and len(names) == 2 * 8 * 2
    assert not any(n.endswith("ckpt.pt") for n in names)
    with tarfile.open(out / "tuning_w512.tgz") as tar:
        assert len({n.split("/")[0] for n in tar.getnames()}) == 6 * 2
    # a later call in the same lease: the study's next seeds, as many as its time holds at the measured
    # seconds a seed (here 100 s of 250, less the packing's 20: two seeds), at the rate now in the file
    planned.clear()
    monkeypatch.setattr(sys, "argv", ["device_width", "--study", "512", "--commit", "abc", "--out", str(tmp_path / "out2"),
                                      "--runs", str(tmp_path / "runs2"), "--from_seed", "303", "--seed_s", "100",
                                      "--limit", "250", "--learning_rates", str(rates)])
    device_width.main()
    assert [s["seeds"] for s in planned] == [[303, 304]]
    assert planned[0]["common"]["learning_rate"] == pytest.approx(1e-2)


def test_a_cpu_bound_width_runs_on_a_gpu_in_full_float32_only(tmp_path, monkeypatch, capsys):
    """plan.md's second amendment: device_width runs n_embd 128's study as sweep_w128.py plans it, in float32
    with TF32 off, at the learning rate the CPU tuning chose; 256's tuning sweep is float32 with TF32 off
    too; a width the plan keeps on the CPU (64) is refused in one line."""
    from bench import sweep as sweeps
    from bench.studies.scale import device_width, widths
    from conftest import ROOT
    monkeypatch.chdir(ROOT)
    planned = []
    monkeypatch.setattr(device_width, "run_sweep", lambda sweep, *a: planned.append(sweep) or True)
    argv = ["device_width", "--commit", "abc", "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs")]
    monkeypatch.setattr(sys, "argv", argv + ["--study", "128", "--max_seeds", "2"])
    device_width.main()
    expected = sweeps.load_sweep("bench/studies/scale/sweep_w128.py")
    assert {k: planned[0][k] for k in expected} == {**expected, "seeds": [300, 301]}
    common = planned[0]["common"]
    assert (common["dtype"], common["tf32"], common["learning_rate"]) == ("float32", False, widths.CHOSEN[128])
    tuning = sweeps.load_sweep("bench/studies/scale/tuning/sweep_w256.py")["common"]
    assert (tuning["dtype"], tuning["tf32"]) == ("float32", False)
    monkeypatch.setattr(sys, "argv", argv + ["--study", "64"])
    with pytest.raises(SystemExit, match=r"n_embd 64 is not one of the widths a GPU may run: \(512, 768\) in bfloat16"):
        device_width.main()


@pytest.mark.slow
@pytest.mark.timeout(300)  # 74 s with the cores shared four ways
def test_device_width_runs_a_whole_seed_for_real_at_a_tiny_size(char_data, tmp_path):
    """The same call on the CPU at a tiny size with the real sweeps and train.py: one seed's eight runs finish,
    each run_info names the caller's commit and the bfloat16 class, and they come back packed."""
    import json
    import tarfile
    rates, out = tmp_path / "lr.json", tmp_path / "out"
    rates.write_text('{"512": 0.002}')
    result = run([sys.executable, "-m", "bench.studies.scale.device_width", "--study", "512", "--commit", "f" * 40,
                  "--out", str(out), "--runs", str(tmp_path / "runs"), "--slots", "2", "--max_seeds", "1",
                  "--learning_rates", str(rates), "--set", f"data_dir={char_data}", "n_layer=6", "max_iters=2",
                  "eval_interval=1", "eval_iters=1", "batch_size=2", "block_size=16", "warmup_iters=1"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "seeds kept (every run finished): 300; dropped (cut off or failed, rerun whole): none" in result.stdout
    with tarfile.open(out / "study_w512.tgz") as tar:
        infos = [json.load(tar.extractfile(n)) for n in tar.getnames() if n.endswith("run_info.json")]
    assert len(infos) == 8 and all(i["git_commit"] == "f" * 40 for i in infos), infos[:1]
    assert all(i["numerics"]["dtype"] == "bfloat16" for i in infos)
