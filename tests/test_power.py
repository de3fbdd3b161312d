"""bench/power.py: seeds a paired study needs, against the noncentral t distribution's textbook
values (G*Power's one-sample t test), and bench/tolerance.py's --plan table that uses it."""

import csv
import os
import sys

import pytest

from bench.harness import run
from conftest import ROOT, assert_one_line_error

sys.path.insert(0, os.path.join(ROOT, "bench"))
import power  # noqa: E402

POWER = os.path.join(ROOT, "bench", "power.py")


@pytest.mark.parametrize("effect, std, family, seeds", [
    (1.0, 1.0, 1, 10),    # d = 1, alpha 0.05 two-sided, power 0.8: n = 10 (exact power 0.803; 9 gives 0.748)
    (0.5, 1.0, 1, 34),    # d = 0.5: n = 34 (0.808; 33 gives 0.795)
    (0.8, 1.0, 1, 15),    # d = 0.8: n = 15 (0.821; 14 gives 0.790)
    (-0.03, 0.03, 1, 10),  # only |effect| / std matters, and the sign not at all
    (2.0, 1.0, 4, 7),     # alpha 0.05 / 4: n = 7 (0.910; 6 is below 0.8)
])
def test_seeds_needed_matches_the_noncentral_t(effect, std, family, seeds):
    assert power.seeds_needed(effect, std, family) == seeds


def test_power_is_the_level_without_an_effect_and_grows_with_seeds():
    # with no effect the test rejects at its level: the critical value is the right quantile
    assert power.power_at(5, 0.0, 1.0) == pytest.approx(0.05, abs=0.002)
    assert power.power_at(5, 0.0, 1.0, family=5) == pytest.approx(0.01, abs=0.001)
    assert power.power_at(10, 1.0, 1.0) == pytest.approx(0.8031, abs=0.002)  # noncentral t, exact value
    assert power.power_at(4, 1.0, 1.0) < power.power_at(8, 1.0, 1.0) < power.power_at(16, 1.0, 1.0)


def test_seeds_needed_edges():
    assert power.seeds_needed(0.0, 1.0) is None        # no effect: no number of seeds resolves it
    assert power.seeds_needed(0.1, 0.0) == 2           # no spread: the difference is exact
    assert power.seeds_needed(1e-4, 1.0) is None       # more than 10,000 seeds


def test_power_cli_prints_the_answer_and_rejects_bad_input():
    result = run([sys.executable, POWER, "--effect", "1", "--std", "1"])
    assert result.returncode == 0, result.stderr
    assert "10 seeds for power 0.8" in result.stdout
    assert_one_line_error(run([sys.executable, POWER, "--effect", "1", "--std", "1", "--power", "1.5"]), "--power")
    assert_one_line_error(run([sys.executable, POWER, "--effect", "1", "--std", "-1"]), "--std")


def test_tolerance_plan_lists_unresolved_costs_with_the_seeds_they_need(tmp_path):
    """Two settings of one config: 1% resolved (not planned), 3% unresolved with mean 0.02 and std 0.02
    (d = 1: 10 seeds as one hypothesis; at alpha 0.05 / 2, 13 seeds: power 0.835, 12 give 0.793)."""
    columns = ["kind", "status", "run", "config", "seed", "iters", "sync_points", "loss_model", "loss_rate", "ge_preset",
               "loss_fwd", "loss_bwd", "final_val_loss"]
    base = {1: 1.50, 2: 1.52, 3: 1.49, 4: 1.51}
    # 3%: 0.02 +- spread alternating, so the mean is 0.02 and the sample std 0.02 (variance 4 spread^2 / 3)
    spread = 0.02 * (3 / 4) ** 0.5
    lossy = {0.01: [0.010, 0.012, 0.011, 0.013], 0.03: [0.02 + spread, 0.02 - spread, 0.02 + spread, 0.02 - spread]}
    rows = [dict(kind="run", status="done", run=f"a-s{seed}", config="config/a.py", seed=seed, iters=600, sync_points=24,
                 loss_model="none", loss_rate=0.0, ge_preset="", loss_fwd=True, loss_bwd=True, final_val_loss=loss)
            for seed, loss in base.items()]
    for rate, diffs in lossy.items():
        rows += [dict(rows[k], loss_model="bernoulli", loss_rate=rate, final_val_loss=base[k + 1] + d)
                 for k, d in enumerate(diffs)]
    path = tmp_path / "summary.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    tolerance = os.path.join(ROOT, "bench", "tolerance.py")
    assert "Planning" not in run([sys.executable, tolerance, str(path)]).stdout  # only when asked for
    result = run([sys.executable, tolerance, str(path), "--plan"])
    assert result.returncode == 0, result.stderr
    planned = [line for line in result.stdout.split("Planning", 1)[1].splitlines() if line.startswith("| a.py")]
    assert planned == ["| a.py: bern0.03 | +0.0200 | 0.0200 | 10 | 13 (of 2) |"]
