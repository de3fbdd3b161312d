"""Every bench tool's --help, run as `python -m bench.<tool>` (the package way: no tool edits
sys.path), prints its usage and exits 0: a help string with a bare `%` once made
`bench/time_to_target.py --help` a raw argparse traceback."""

import glob
import os
import sys

import pytest

from conftest import ROOT, run

SCRIPTS = sorted(p for p in glob.glob(os.path.join(ROOT, "bench", "*.py"))
                 if "argparse" in open(p).read())


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 10 and any(p.endswith("time_to_target.py") for p in SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS, ids=os.path.basename)
def test_help_prints_usage(script):
    module = "bench." + os.path.splitext(os.path.basename(script))[0]
    result = run([sys.executable, "-m", module, "--help"], timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage:"), result.stdout[:200]
