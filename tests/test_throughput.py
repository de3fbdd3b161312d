"""bench/throughput.py at a tiny size: the table's rows, sync counts and the per-round ratio interval."""

import re

from bench.harness import run_tool


def test_throughput_table_has_ratio_intervals():
    result = run_tool("bench.throughput", "--configs", "24comm", "2comm", "ladder",
                      "--base", "24comm", "--rounds", "3", "--steps", "1", "--warmup", "0", "--threads", "1",
                      "--set", "n_layer=6")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [[c.strip() for c in line.split("|")[1:-1]] for line in result.stdout.splitlines() if line.startswith("| ")]
    header = lines[0]
    rows = {cells[0]: dict(zip(header, cells)) for cells in lines[2:]}
    assert set(rows) == {"dense", "24comm", "2comm", "ladder"}
    ratio, interval = "ratio to 24comm (median)", "ratio: mean [95% CI]"
    assert rows["24comm"][ratio] == "1.000" and rows["24comm"][interval] == "1.000 [1.000, 1.000]"
    assert rows["24comm"]["syncs"] == "12" and rows["2comm"]["syncs"] == "1"  # n_layer=6: tp x6, [parallel*5,spd] once
    assert (rows["ladder"]["syncs"], rows["ladder"]["exposed"], rows["24comm"]["exposed"]) == ("12", "1", "12")
    for name in ("dense", "2comm", "ladder"):
        # a 3-round interval on a busy host may reach below 0 (a t interval of ratios, not a bound)
        mean, low, high = map(float, re.fullmatch(r"(-?[\d.]+) \[(-?[\d.]+), (-?[\d.]+)\]", rows[name][interval]).groups())
        assert low <= mean <= high and low < high