"""bench/power.py: seeds a paired study needs, against the noncentral t distribution's textbook
values (G*Power's one-sample t test); tests/test_summarize.py covers bench/tolerance.py's --plan."""

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

