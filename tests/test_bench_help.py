"""Every bench tool's --help, run as `python -m bench.<tool>` runs it (the package way: no tool edits
sys.path), prints its usage and exits 0: a help string with a bare `%` once made
`bench/time_to_target.py --help` a raw argparse traceback. All tools in one process (runpy, as
`python -m` does), so the check costs one interpreter start, not one per tool."""

import glob
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run

SCRIPTS = sorted(p for p in glob.glob(os.path.join(ROOT, "bench", "*.py"))
                 if "argparse" in open(p).read())
# runs every tool's main as `python -m bench.<tool> --help` would, and reports (exit status, stdout, stderr)
HELP_ALL = """
import contextlib, io, json, runpy, sys
out = {}
for module in sys.argv[1:]:
    sys.argv = [module.split(".")[-1] + ".py", "--help"]
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code or 0
    except BaseException as e:  # a tool's crash is its failure, not the others'
        code, stderr = 1, io.StringIO(f"{type(e).__name__}: {e}")
    out[module] = (code, stdout.getvalue(), stderr.getvalue())
print(json.dumps(out))
"""


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 10 and any(p.endswith("time_to_target.py") for p in SCRIPTS)


@pytest.fixture(scope="module")
def helps():
    modules = ["bench." + os.path.splitext(os.path.basename(s))[0] for s in SCRIPTS]
    result = run([sys.executable, "-c", HELP_ALL, *modules], timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


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
