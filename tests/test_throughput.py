"""bench/throughput.py at a tiny size: the table's rows, sync counts and the per-round ratio interval."""

import os
import re
import sys

from conftest import ROOT, run


def test_throughput_table_has_ratio_intervals():
    result = run([sys.executable, os.path.join(ROOT, "bench", "throughput.py"), "--configs", "24comm", "2comm",
                  "--rounds", "3", "--steps", "1", "--warmup", "0", "--threads", "1", "--set", "n_layer=6"], timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in result.stdout.splitlines() if line.startswith("| ") and not line.startswith(("| config", "| ---"))}
    assert set(rows) == {"dense", "24comm", "2comm"}
    assert rows["dense"][6] == "1.000" and rows["dense"][7] == "1.000 [1.000, 1.000]"
    assert rows["24comm"][2] == "12" and rows["2comm"][2] == "1"  # n_layer=6: tp x6, and [parallel*5,spd] once
    for name in ("24comm", "2comm"):
        mean, low, high = map(float, re.fullmatch(r"([\d.]+) \[([\d.]+), ([\d.]+)\]", rows[name][7]).groups())
        assert low <= mean <= high and low < high
