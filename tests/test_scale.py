"""The scale study's analysis tools (bench/studies/scale/): the weighted slope of a cost on log2(width)
against a hand-computed least-squares fit, and the power calculation against its z-test definition."""

import csv
import math
import sys

import pytest

from bench.harness import run
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


def test_the_slope_is_the_weighted_least_squares_fit_on_log2_width(tmp_path):
    # 1comm: costs 0.04, 0.02, 0.01 at 64, 128, 256, every standard error 0.02 / sqrt(4) = 0.01: an
    # ordinary fit on x = 0, 1, 2: slope -0.015, its standard error 0.01 / sqrt(2)
    sds = {64: 0.02, 128: 0.02, 256: 0.02}
    for width, cost in ((64, 0.04), (128, 0.02), (256, 0.01)):
        summary(tmp_path / f"w{width}.csv", [("1comm", "", 4, cost, sds[width]), ("24comm", f"w{width}_half", 4, 0.0, 0.02)])
    tables = {w: slope.costs(tmp_path / f"w{w}.csv") for w in (64, 128, 256)}
    assert tables[128]["1comm"] == pytest.approx((0.02, 0.01, 4))
    assert tables[128]["24comm/half"] == pytest.approx((0.0, 0.01, 4))  # the width tag w128_ dropped
    fit = slope.slope([(w, *tables[w]["1comm"][:2]) for w in (64, 128, 256)])
    assert fit["slope"] == pytest.approx(-0.015) and fit["se"] == pytest.approx(0.01 / math.sqrt(2))
    z = 0.015 / (0.01 / math.sqrt(2))
    assert fit["p"] == pytest.approx(math.erfc(z / math.sqrt(2)))  # two-sided normal tail
    assert fit["ci_low"] == pytest.approx(-0.015 - 1.959964 * 0.01 / math.sqrt(2), abs=1e-6)
    # unequal errors weigh the widths: the 256 cost with a tenth of the error pulls the line to itself
    summary(tmp_path / "w256.csv", [("1comm", "", 4, 0.01, 0.002)])
    precise = slope.slope([(64, 0.04, 0.01), (128, 0.02, 0.01), (256, 0.01, 0.001)])
    weights = [1e4, 1e4, 1e6]
    xs, ys = [0, 1, 2], [0.04, 0.02, 0.01]
    xm = sum(w * x for w, x in zip(weights, xs)) / sum(weights)
    ym = sum(w * y for w, y in zip(weights, ys)) / sum(weights)
    expected = sum(w * (x - xm) * (y - ym) for w, x, y in zip(weights, xs, ys)) / sum(w * (x - xm) ** 2 for w, x in zip(weights, xs))
    assert precise["slope"] == pytest.approx(expected)
    result = run([sys.executable, "-m", "bench.studies.scale.slope", "--width", f"64={tmp_path / 'w64.csv'}",
                  "--width", f"128={tmp_path / 'w128.csv'}", "--settings", "1comm", "24comm/half"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| 1comm | 2 | 64: +0.0400, 128: +0.0200 | -0.0200" in result.stdout


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
