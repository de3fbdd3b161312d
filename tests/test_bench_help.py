"""Every bench tool's --help, run as `python -m bench.<tool>` runs it (the package way: no tool edits
sys.path), prints its usage and exits 0: a help string with a bare `%` once made
`bench/time_to_target.py --help` a raw argparse traceback. All tools in the test's process (runpy, as
`python -m` does: bench.harness.run_tool), so the check costs no interpreter start."""

import glob
import os
import subprocess
import sys

import pytest

from bench.harness import run_tool
from conftest import ROOT

SCRIPTS = sorted(p for p in glob.glob(os.path.join(ROOT, "bench", "*.py"))
                 if "argparse" in open(p).read())


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 10 and any(p.endswith("time_to_target.py") for p in SCRIPTS)


@pytest.fixture(scope="module")
def helps():
    modules = ["bench." + os.path.splitext(os.path.basename(s))[0] for s in SCRIPTS]
    results = {module: run_tool(module, "--help") for module in modules}  # runpy in this process, as -m runs it
    return {module: (r.returncode, r.stdout, r.stderr) for module, r in results.items()}


@pytest.mark.parametrize("script", SCRIPTS, ids=os.path.basename)
def test_help_prints_usage(script, helps):
    code, stdout, stderr = helps["bench." + os.path.splitext(os.path.basename(script))[0]]
    assert code == 0, stderr[-2000:]
    assert stdout.startswith("usage:"), stdout[:200]


def test_a_tool_runs_as_a_script_too(tmp_path):
    """`python bench/<tool>.py` (nanoGPT's habit) runs the tool as its module, from any directory,
    with its exit status (it was a raw ModuleNotFoundError); every tool with a main does so."""
    script = os.path.join(ROOT, "bench", "power.py")  # a tool that does not import torch: two interpreter starts, not two torch imports
    def run_here(*args):  # from another directory than the repository's
        return subprocess.run([sys.executable, script, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    result = run_here("--help")
    assert result.returncode == 0 and result.stdout.startswith("usage: power.py"), result.stderr[-2000:]
    bad = run_here("--no_such_flag")
    assert bad.returncode == 2 and "power.py: error:" in bad.stderr
    assert "Traceback" not in bad.stderr
    tools = [p for p in glob.glob(os.path.join(ROOT, "bench", "*.py")) if '__name__ == "__main__"' in open(p).read()]
    missing = [os.path.basename(p) for p in tools if "import _as_module" not in open(p).read()]
    assert len(tools) >= 20 and not missing, missing
