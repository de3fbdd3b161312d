"""bench/summarize.py's statistics on hand-computed examples."""

import math
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import summarize  # noqa: E402


@pytest.mark.parametrize("df, expected", [(1, 12.706), (2, 4.303), (7, 2.365), (30, 2.042)])
def test_t_quantile_matches_tables(df, expected):
    assert summarize.t_quantile(0.975, df) == pytest.approx(expected, abs=5e-4)
    assert summarize.t_quantile(0.025, df) == pytest.approx(-expected, abs=5e-4)  # the distribution is symmetric


def test_t_tail_matches_closed_forms():
    # df=1 is the Cauchy distribution: P(|T| >= 1) = 1/2; df=2: P(|T| >= t) = 1 - t / sqrt(2 + t^2)
    assert summarize.t_two_sided_p(1.0, 1) == pytest.approx(0.5, abs=1e-12)
    for t in (0.3, 1.0, 2.5, 8.0):
        assert summarize.t_two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-12)
    assert summarize.t_quantile(0.995, 1) == pytest.approx(63.657, abs=1e-3)


def test_paired_stats_by_hand():
    # differences 0.1, 0.2, 0.3: mean 0.2, std 0.1, se 0.1/sqrt(3), t = 2 sqrt(3), df 2
    stats = summarize.paired_stats([0.1, 0.2, 0.3])
    assert stats["n"] == 3
    assert stats["mean"] == pytest.approx(0.2) and stats["std"] == pytest.approx(0.1)
    half = 4.302653 * 0.1 / math.sqrt(3)  # t_{0.975, 2} * se = 0.248414
    assert stats["ci_low"] == pytest.approx(0.2 - half, abs=1e-6)
    assert stats["ci_high"] == pytest.approx(0.2 + half, abs=1e-6)
    assert stats["p"] == pytest.approx(1 - math.sqrt(12 / 14), abs=1e-9)  # 0.074180
    # too few seeds for an interval; no spread: the mean is exact
    one = summarize.paired_stats([0.4])
    assert one["mean"] == 0.4 and one["ci_low"] is None and one["p"] is None
    zero = summarize.paired_stats([0.0, 0.0, 0.0])
    assert (zero["ci_low"], zero["ci_high"], zero["p"]) == (0.0, 0.0, 1.0)


def test_holm_by_hand():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> raised to 0.06 (monotone)
    assert summarize.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert summarize.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert summarize.holm([]) == []


def test_iters_to_target_interpolates_between_evals():
    curve = [(0, 4.0), (100, 2.5), (200, 2.0), (300, 1.9)]
    assert summarize.iters_to_target(curve, 2.2) == pytest.approx(160.0)  # 100 + (2.5-2.2)/(2.5-2.0) * 100
    assert summarize.iters_to_target(curve, 2.0) == pytest.approx(200.0)
    assert summarize.iters_to_target(curve, 1.8) is None  # never reached
    assert summarize.iters_to_target(curve, 5.0) == 0.0  # reached at the first eval
    # the first crossing counts, even if the curve rises again afterwards
    assert summarize.iters_to_target([(0, 4.0), (100, 2.1), (200, 2.3)], 2.2) == pytest.approx(1.8 / 1.9 * 100)


def test_wall_time_adds_the_segments_of_a_resumed_run():
    evals = [{"time_s": t} for t in (0.5, 10.0, 20.0, 0.4, 12.0)]  # the clock restarted at the resume
    assert summarize.wall_time(evals, None) == pytest.approx(32.0)
    assert summarize.wall_time([], {"final": {"time_s": 7.0}}) == 7.0
