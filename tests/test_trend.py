"""bench/trend.py: per-seed slopes of final val loss on the sync count, on hand-made rows whose slopes are known."""

import math

import pytest

from bench.trend import slopes


def row(seed, syncs, loss, tp_size=2, setting=""):
    return dict(kind="run", status="done", tp_size=str(tp_size), loss_model="none", setting=setting, seed=str(seed),
                sync_points=str(syncs), final_val_loss=str(loss))


def test_slopes_are_the_least_squares_slopes_of_each_seed():
    rows = [row(1, s, 2.0 - 0.001 * s) for s in (24, 12, 6, 2)]  # exactly -0.001 per sync
    rows += [row(2, s, 1.5 + 0.01 * math.log2(s)) for s in (24, 12, 6)]  # exactly +0.01 per doubling
    rows += [row(1, 0, 9.0, tp_size=1), row(1, 12, 9.0, setting="bern0.01"), row(3, 12, 1.0), row(3, 24, 1.0)]
    per_sync = slopes(rows)
    assert set(per_sync) == {1, 2}  # dense, lossy and a seed with two TP runs left out
    assert per_sync[1] == pytest.approx(-0.001, abs=1e-12)
    assert slopes(rows, log2=True)[2] == pytest.approx(0.01, abs=1e-12)
    assert slopes(rows, min_syncs=12) == {}  # seeds keep < 3 runs in [12, 24]
