"""The scale study's analysis tools (bench/studies/scale/): the weighted slope of a cost on log2(width)
against a hand-computed least-squares fit, and the power calculation against its z-test definition."""

import csv
import glob
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


def final_val_loss(run_dir):
    """A run's last logged val loss, read from its metrics.jsonl (not from any tool's summary)."""
    import json
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if '"val_loss"' in line][-1]["val_loss"]


FAMILIES = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                         "bench", "studies", "scale", "family_w*.json")))


@pytest.mark.parametrize("family", FAMILIES, ids=os.path.basename)
def test_each_widths_committed_costs_are_what_its_run_logs_give(family):
    """The independent check issue 46 asks for: every contrast of a width's committed family, recomputed from
    the runs' own logs with a plain loop (float64 means, the t quantile, Holm by hand): the same seeds (every
    study seed with both runs committed), mean, interval and Holm p."""
    import json
    import by_hand
    runs = os.path.join(os.path.dirname(family), "runs")
    with open(family) as f:
        records = json.load(f)
    p_values = []
    for record in records:
        a, b = (name.split("/", 1)[1] for name in (record["a"], record["b"]))  # w512_drop1, w512_ref24
        seeds = [s for s in range(300, 312) if all(os.path.isdir(os.path.join(runs, f"shakespeare_char_24comm-{x}-s{s}"))
                                                    for x in (a, b))]
        assert record["seeds"] == seeds
        diffs = [final_val_loss(os.path.join(runs, f"shakespeare_char_24comm-{a}-s{s}")) -
                 final_val_loss(os.path.join(runs, f"shakespeare_char_24comm-{b}-s{s}")) for s in seeds]
        mean, low, high, p = by_hand.paired(diffs)
        assert (record["mean"], record["ci_low"], record["ci_high"]) == pytest.approx((mean, low, high), abs=1e-9)
        p_values.append(p)
    assert [r["p_holm"] for r in records] == pytest.approx(by_hand.holm(p_values), rel=1e-6)


SLOPES = sorted(glob.glob(os.path.join(os.path.dirname(FAMILIES[0]), "*slope*.json")))


@pytest.mark.parametrize("fit", SLOPES, ids=os.path.basename)
def test_each_committed_slope_is_what_the_run_logs_give(fit):
    """A committed slope file (the exploratory 64-vs-512 now; the planned family_slope*.json once fitted)
    recomputed from the runs' metrics.jsonl with plain arithmetic: each width's paired mean over its
    committed seeds, the equal-weight line on log2(width) (plan amendment 6), its standard error from each
    width's own seeds, the t p on Welch-Satterthwaite degrees of freedom, Holm (statsmodels) and the verdict's
    sign. Two widths: the slope's p is Welch's t test (scipy) of the two widths' costs."""
    import json
    from statsmodels.stats.multitest import multipletests
    runs = os.path.join(os.path.dirname(fit), "runs")
    records = json.load(open(fit))
    ps = []
    for record in records:
        setting = record["name"].split("/")[1]
        xs, ys, vs, ns, sds = [], [], [], [], []
        for w in record["widths"]:
            seeds = sorted({int(n.rsplit("-s", 1)[1]) for n in os.listdir(runs) if f"-w{w}_{setting}-" in n})
            diffs = [final_val_loss(os.path.join(runs, f"shakespeare_char_24comm-w{w}_{setting}-s{seed}")) -
                     final_val_loss(os.path.join(runs, f"shakespeare_char_24comm-w{w}_ref24-s{seed}")) for seed in seeds]
            n, mean = len(diffs), sum(diffs) / len(diffs)
            sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
            xs.append(math.log2(w / record["widths"][0]))
            ys.append(mean), vs.append(sd ** 2 / n), ns.append(n), sds.append(sd)
        record["_from_logs"] = list(zip(record["widths"], ys, [math.sqrt(v) for v in vs], ns))  # this setting's points
        assert record["n"] == ns and record["costs"] == pytest.approx(ys, rel=1e-5, abs=1e-7)
        xm, ym = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - xm) ** 2 for x in xs)
        b = sum((x - xm) * (y - ym) for x, y in zip(xs, ys)) / sxx
        parts = [((x - xm) / sxx) ** 2 * v for x, v in zip(xs, vs)]
        df = sum(parts) ** 2 / sum(v ** 2 / (n - 1) for v, n in zip(parts, ns))
        p = 2 * scipy_t.sf(abs(b) / math.sqrt(sum(parts)), df)
        assert record["slope"] == pytest.approx(b, rel=1e-4, abs=1e-7) and record["df"] == pytest.approx(df, rel=1e-3)
        assert record["se"] == pytest.approx(math.sqrt(sum(parts)), rel=1e-4) and record["p"] == pytest.approx(p, rel=1e-3)
        if len(xs) == 2:
            welch = scipy_stats.ttest_ind_from_stats(ys[1], sds[1], ns[1], ys[0], sds[0], ns[0], equal_var=False)
            assert record["p"] == pytest.approx(welch.pvalue, rel=1e-3)
        ps.append(p)
    for record, adjusted in zip(records, multipletests(ps, method="holm")[1]):
        assert record["p_holm"] == pytest.approx(adjusted, rel=1e-3)
        points = record["_from_logs"]  # from the run logs
        bent = False
        if len(points) > 2:
            q, df = lack_of_fit_by_projection(points)
            assert record["lack_of_fit"] == pytest.approx(q, rel=1e-4)  # the tool reads the summary csv's rounded costs
            bent = scipy_stats.f.sf(q / df, df, min(record["n"]) - 1) < 0.05
        assert record["verdict"] == ("not a line: the cost does not change by the same amount with each doubling" if bent else
                                     "unresolved" if adjusted >= 0.05 else "resolved: the cost " +
                                     ("rises" if record["slope"] > 0 else "falls") + " with width")


@pytest.mark.slow
def test_the_planned_slope_pipeline_is_what_the_run_logs_give(tmp_path):
    """The independent check of the primary analysis, on the study's own committed runs: the plan's pipeline
    (bench.summarize per width with that width's 24comm as the reference, then bench.studies.scale.slope)
    against a plain recomputation from each run's metrics.jsonl: per width and setting the paired mean and
    its standard error sd / sqrt(n), then the least-squares slope on log2(width), widths weighted equally
    (plan amendment 6), by hand, its standard error and its two-sided t p on Welch-Satterthwaite degrees of freedom. Every width
    with two or more committed seeds
    (an arithmetic check of the pipeline, not the planned analysis, which waits for the planned seeds)."""
    import json
    from conftest import ROOT
    runs = os.path.join(ROOT, "bench", "studies", "scale", "runs")
    names = sorted(os.listdir(runs))
    widths = sorted({int(n.split("-w")[1].split("_")[0]) for n in names})
    whole = {w: sorted({int(n.rsplit("-s", 1)[1]) for n in names if f"-w{w}_" in n}) for w in widths}
    whole = {w: s for w, s in whole.items() if len(s) >= 2}
    if len(whole) < 2:
        pytest.skip("fewer than two widths with two committed seeds")
    settings = ["drop1", "drop5", "ladder", "half"]
    args = []
    for w in whole:
        result = run_tool("bench.summarize", runs, "--seeds", ",".join(map(str, whole[w])),
                          "--reference", f"train_shakespeare_char_24comm/w{w}_ref24", "--out", str(tmp_path / f"w{w}"))
        assert result.returncode == 0, result.stderr[-2000:]
        args += ["--width", f"{w}={tmp_path / f'w{w}' / 'experiment_summary.csv'}"]
    result = run_tool("bench.studies.scale.slope", *args, "--settings", *[f"24comm/{s}" for s in settings],
                      "--json", str(tmp_path / "slope.json"))
    assert result.returncode == 0, result.stderr[-2000:]
    fitted = {r["name"]: r for r in json.loads((tmp_path / "slope.json").read_text())}
    for s in settings:
        xs, ys, ws, ns = [], [], [], []
        for w, seeds in whole.items():
            diffs = [final_val_loss(os.path.join(runs, f"shakespeare_char_24comm-w{w}_{s}-s{seed}")) -
                     final_val_loss(os.path.join(runs, f"shakespeare_char_24comm-w{w}_ref24-s{seed}")) for seed in seeds]
            n = len(diffs)
            mean = sum(diffs) / n
            se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n)
            xs.append(math.log2(w / min(whole)))
            ys.append(mean)
            ws.append(se ** 2)  # each width's variance of its mean
            ns.append(n)
        xm, ym = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - xm) ** 2 for x in xs)
        b = sum((x - xm) * (y - ym) for x, y in zip(xs, ys)) / sxx
        parts = [((x - xm) / sxx) ** 2 * v for v, x in zip(ws, xs)]  # each width's share of the slope's variance
        record = fitted[f"24comm/{s}"]
        # the summary's csv keeps 6 significant digits: the pipeline agrees to that
        assert record["costs"] == pytest.approx(ys, rel=1e-5, abs=1e-7)
        assert record["slope"] == pytest.approx(b, rel=1e-4, abs=1e-7)
        assert record["se"] == pytest.approx(math.sqrt(sum(parts)), rel=1e-4)
        df = sum(parts) ** 2 / sum(v ** 2 / (n - 1) for v, n in zip(parts, ns))
        assert record["df"] == pytest.approx(df, rel=1e-3)
        assert record["p"] == pytest.approx(2 * scipy_t.sf(abs(b) / math.sqrt(sum(parts)), df), rel=1e-3, abs=1e-9)


def test_the_findings_render_128_and_the_planned_slope_once_their_files_exist():
    """The branches of findings.md.j2 that wait for n_embd 128's analysis and the primary family's fit,
    rendered from stand-in files (64's numbers as 128's, and a fit over 64 and 128 whose verdicts differ):
    each number in them comes from its file, and the sentence follows the verdicts."""
    import copy
    from bench import render
    data = render.numbers()
    scale = data["scale"]
    # stand-ins replace whatever is committed: this checks the template's branches (the committed files'
    # numbers are checked against the run logs by the tests above)
    scale["family_w128"] = copy.deepcopy(scale["family_w64"])
    scale["family_w128"]["drop5"].update(verdict="resolved: A lower", mean=-0.0321, ci_low=-0.05, ci_high=-0.01)
    scale["w128"] = {"summary": {"shakespeare_char_24comm/w128_ref24": {"final_val_loss": "1.7777"}}}
    two = {"cpu AMD EPYC AVX512, float32": [300, 301, 302, 303], "cpu Intel(R) Xeon(R) Processor @ 2.50GHz AVX512, float32": list(range(304, 312))}
    scale["classes_by_width"][128] = two  # 128's seeds in two host classes (plan amendment 3)
    for name, contrast in scale["family_w128"].items():
        contrast["by_class"] = {label: dict(seeds=seeds, mean=0.0, ci_low=-0.01, ci_high=0.01) for label, seeds in two.items()}
    scale["family_w128"]["drop1"]["by_class"]["cpu AMD EPYC AVX512, float32"].update(mean=0.03, ci_low=0.02, ci_high=0.04)
    scale["family_w128"]["drop5"]["by_class"]["cpu AMD EPYC AVX512, float32"].update(seeds=[300], mean=0.05, ci_low=None, ci_high=None)
    rows = copy.deepcopy(scale["explore_slope_64_512"])
    for row in rows:
        row["widths"] = [64, 128]
    rows[0].update(verdict="resolved: the cost falls with width", slope=-0.0123, at_cost=-0.0345)
    rows[1].update(verdict="resolved: the cost rises with width", slope=+0.0101)
    rows[2].update(verdict="unresolved")
    rows[3].update(widths=[128], costs=[0.0042])  # a setting fitted over fewer widths: its cost under its own width
    scale["family_slope"] = {row["name"]: row for row in rows}
    rows512 = copy.deepcopy(scale["explore_slope_64_512"])
    for row in rows512:
        row.update(widths=[64, 128, 512], costs=row["costs"][:1] + [0.0077] + row["costs"][1:])
    rows512[2].update(verdict="resolved: the cost falls with width", slope=-0.0066)
    for row in rows512:
        row.update(lack_of_fit=1.0, lack_of_fit_df=1, lack_of_fit_p=0.5)
    rows512[3].update(verdict="not a line: the cost does not change by the same amount with each doubling", lack_of_fit_p=0.0004)
    scale["family_slope_512"] = {row["name"]: row for row in rows512}
    import json
    scale["frontier_w128"] = {"frontier": json.loads(json.dumps(scale["frontier_w64"]["frontier"]).replace("w64_", "w128_"))}
    for row in scale["frontier_w128"]["frontier"]["settings"]:
        row["reached"] = row["n"] if row["name"].endswith(("_drop5", "_ref24")) else row["n"] - 1
    text = render.render_template("bench/studies/scale/findings.md.j2", data=data)
    frontier = text.split("## The frontier at n_embd 128")[1].split("## The frontier at n_embd 512")[0]
    assert "runs/*-w128_* --target 0.02" in frontier and "at this width 5comm and 24comm do" in frontier
    assert "11 of 12 seeds (1comm)" in frontier and "(5comm)" not in frontier.split("The others")[1]
    assert "**Status: n_embd 64 and 128 (CPU, float32)" in text and "and is fitted below\nover 64 and 128." in text
    section = text.split("## n_embd 128 (secondary")[1].split("## The primary family")[0]
    assert "| 5comm | 5 | -0.0321 [-0.0500, -0.0100] |" in section and "24comm ends at 1.7777" in section
    assert "5comm (-0.0321 [-0.0500, -0.0100]) ends lower than 24comm" in section
    assert "On the CPU (cpu AMD EPYC AVX512, float32: seeds 300-303; cpu Intel(R) Xeon(R) Processor @ 2.50GHz AVX512, float32: seeds 304-311)" in section
    assert "| 1comm | +0.0300 [+0.0200, +0.0400] (seeds 300-303) | +0.0000 [-0.0100, +0.0100] (seeds 304-311) | do not overlap |" in section
    assert "| 2comm | +0.0000 [-0.0100, +0.0100] (seeds 300-303) | +0.0000 [-0.0100, +0.0100] (seeds 304-311) | overlap |" in section
    assert "| 5comm | +0.0500, one seed, no interval (seeds 300) | +0.0000 [-0.0100, +0.0100] (seeds 304-311) | not comparable" in section
    assert "128: cpu AMD EPYC AVX512, float32: seeds 300-303; cpu Intel" in text
    fit = text.split("## The primary family")[1].split("## The same fit with n_embd 512")[0]
    assert "--width 128=bench/studies/scale/w128/experiment_summary.csv" in fit
    d = rows[0]
    assert f"| 1comm | {d['costs'][0]:+.4f} | {d['costs'][1]:+.4f} | -0.0123 [{d['ci_low']:+.4f}, {d['ci_high']:+.4f}] |" in fit
    assert f"| -0.0345 [{d['at_ci_low']:+.4f}, {d['at_ci_high']:+.4f}] |" in fit and "an extrapolation beyond the widest width fitted (128)" in fit
    assert "| ladder | - | +0.0042 |" in fit
    assert "the cost of 1comm and ladder is shown to fall" in fit and "the cost of 2comm is shown to rise" in fit
    floor64, floor128 = scale["family_w64"]["floor"], scale["family_w128"]["floor"]
    assert f"at each width:\n64: {floor64['mean']:+.4f} [{floor64['ci_low']:+.4f}, {floor64['ci_high']:+.4f}]; 128: {floor128['mean']:+.4f}" in fit
    assert "how the cost of 5comm and half the channels moves with width is unresolved" in fit and "Two widths fit any line" in fit
    assert text.index("## The primary family") < text.index("## The same fit with n_embd 512") < text.index("## Two widths")
    beside = text.split("## The same fit with n_embd 512")[1].split("## Two widths")[0]
    assert "--width 512=bench/studies/scale/w512/experiment_summary.csv" in beside and "family_slope_512.json" in beside
    r = rows512[2]
    assert f"| 5comm | {r['costs'][0]:+.4f} | +0.0077 | {r['costs'][2]:+.4f} | -0.0066 [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] |" in beside
    assert "Over n_embd 64, 128 and 512 (exploratory: the verdicts as the tool reads them, no claim): the cost of 5comm falls in this fit" in beside
    # three widths: whether the costs lie on a line is tested, and a bent setting gets no trend
    assert "| lack of fit p |" in beside and "| lack of fit p |" not in fit and "| 0.0004 | not a line" in beside
    assert "each doubling | - (not a line) |" in beside  # no reading at 768 from a line the costs do not lie on
    assert "the costs of ladder do not lie on one line\n(they do not change by the same amount with each doubling), so no trend is read from its slope." in beside
    assert "Two widths fit any line" not in beside and "inside the widths fitted" not in beside
    missing = text.split("## Missing")[1]
    assert "n_embd 128, " not in missing and "--width 256=bench/studies/scale/w256/experiment_summary.csv" in missing
    # RESULTS' summary and both first screens cite the planned fit with what else changed between the widths
    # (rate, progress, arithmetic), read no difference between widths as width's, and read nothing at 768
    summary = " ".join(render.render_template("bench/templates/results_summary.md.j2", data=data).split())
    assert "is unresolved as an effect of width" in summary and "width did not change alone" in summary
    ladder = scale["family_slope"]["24comm/ladder"]
    assert f'said of ladder "{ladder["verdict"].split(": ", 1)[1]}"' in summary and "changes sign with the rate alone" in summary
    assert "768" not in summary and "GPT-2's width" not in summary and "extrapolation" not in summary
    assert "the costs of ladder (lack-of-fit p 0.0004) do not lie on one line" in summary
    V128 = scale["family_w128"]
    assert "at 128 " + ("no cut setting is" if all(V128[n]["verdict"] != "resolved: A higher" for n in
                        ("drop1", "drop2", "drop5", "drop12", "ladder", "half")) else "") in summary
    answers = render.render_template("bench/templates/results_answers.md.j2", data=data)
    first = [line for line in answers.splitlines() if line.startswith("| Does it hold as the model grows?")]
    assert len(first) == 1 and first[0].startswith("| Does it hold as the model grows? | Unresolved as an effect of width.")
    assert "is not read as an effect of width" in first[0] and "768" not in first[0]
    assert " falls for " not in first[0] and " rises for " not in first[0]
    assert "n_embd 128: cpu AMD EPYC AVX512, float32: seeds 300-303; cpu Intel" in first[0]
    readme = render.render_template("bench/templates/readme_answers.md.j2", data=data)
    row = [line for line in readme.splitlines() if line.startswith("| Does it hold as the model grows?")]
    assert len(row) == 1 and "Unresolved as an effect of width" in row[0] and "768" not in readme
