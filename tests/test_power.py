"""`python -m bench.power`: the command line of bench/stats.py's seeds_needed (tested against the
noncentral t's textbook values in tests/test_stats.py); tests/test_summarize.py covers
bench/tolerance.py's --plan."""


from bench.harness import run_tool
from conftest import assert_one_line_error

POWER = "bench.power"


def test_power_cli_prints_the_answer_and_rejects_bad_input():
    result = run_tool(POWER, "--effect", "1", "--std", "1")
    assert result.returncode == 0, result.stderr
    assert "10 seeds for power 0.8 (power at 10: 0.803)" in result.stdout
    assert "no number of seeds" in run_tool(POWER, "--effect", "0", "--std", "1").stdout
    assert_one_line_error(run_tool(POWER, "--effect", "1", "--std", "1", "--power", "1.5"), "--power")
    assert_one_line_error(run_tool(POWER, "--effect", "1", "--std", "-1"), "--std")
    assert_one_line_error(run_tool(POWER, "--effect", "1", "--std", "1", "--family", "0"), "--family")
