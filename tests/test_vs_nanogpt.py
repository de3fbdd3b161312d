"""bench/vs_nanogpt.py without nanoGPT: the one-line message that says how to get it, and the log parsing."""

import sys

from conftest import run

SCRIPT = ["-m", "bench.vs_nanogpt"]


def load():
    from bench import vs_nanogpt
    return vs_nanogpt


def test_missing_checkout_is_one_line_with_the_command(tmp_path):
    missing = tmp_path / "no-nanoGPT-here"
    result = run([sys.executable, *SCRIPT, "--nanogpt_dir", str(missing)], timeout=60)
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    commit = load().NANOGPT_COMMIT
    assert f"git clone https://github.com/karpathy/nanoGPT {missing}" in lines[0]
    assert f"checkout {commit}" in lines[0] and len(commit) == 40


def test_parses_nanogpt_and_project_logs():
    vs = load()
    stdout = ("step 0: train loss 4.4000, val loss 4.4100\n"
              "iter 0: loss 4.4172, time 2143.22ms, mfu -100.00%\n"
              "iter 1: loss 4.1000, time 250.50ms, mfu -100.00%\n"
              "iter 2: loss 3.9000, time 240.25ms, mfu -100.00%\n"
              "step 3: train loss 2.5000, val loss 2.6012\n"
              "iter 3: loss 3.7000, time 900.00ms, mfu 50.00%\n")
    assert vs.nanogpt_times(stdout, 1, 3) == [250.5, 240.25]
    assert vs.nanogpt_final_val(stdout, 3) == 2.6012
    records = [{"iter": 0, "val_loss": 4.4}, {"iter": 0, "ms_per_iter": 2000.0}, {"iter": 1, "ms_per_iter": 210.0},
               {"iter": 2, "ms_per_iter": 205.0}, {"iter": 3, "val_loss": 2.5}]
    assert vs.project_times(records, 1, 3) == [210.0, 205.0]
    assert vs.project_final_val(records, 3) == 2.5


def test_the_parity_verdict_needs_an_interval(capsys):
    """A verdict only when the per-round ratios' 95% interval leaves 1 out: the second session's
    rounds (mean 1.012, CI [0.879, 1.145] by hand, t(4) = 2.776) are unresolved; steady ones resolve."""
    timing_table = load().timing_table
    noisy = {"nanoGPT": [258.3, 306.4, 234.2, 271.7, 273.0], "dense": [286.7, 285.9, 235.8, 233.6, 293.4],
             "24comm": [295.5, 269.4, 242.3, 292.6, 263.7]}
    timing_table(noisy, 4096)
    assert "unresolved (per-round dense/nanoGPT tokens/s: mean 1.012, 95% CI [0.879, 1.145]" in capsys.readouterr().out
    slower = {"nanoGPT": [200.0, 201.0, 199.0], "dense": [220.0, 222.0, 219.0], "24comm": [230.0, 231.0, 229.0]}
    timing_table(slower, 4096)
    assert "goal (dense tokens/s >= nanoGPT's): missed" in capsys.readouterr().out
    faster = {"nanoGPT": [220.0, 222.0, 219.0], "dense": [200.0, 201.0, 199.0], "24comm": [200.0, 201.0, 199.0]}
    timing_table(faster, 4096)
    assert "goal (dense tokens/s >= nanoGPT's): holds" in capsys.readouterr().out


def test_device_flags_are_the_same_for_every_program_and_follow_the_gpu_defaults():
    run_flags = load().run_flags
    assert run_flags("cpu") == ["--device=cpu", "--dtype=float32", "--compile=False"]
    assert run_flags("cuda") == ["--device=cuda", "--dtype=bfloat16", "--compile=True"]
    assert run_flags("cuda:1", "float32", "off") == ["--device=cuda:1", "--dtype=float32", "--compile=False"]


def test_a_bad_device_is_an_error_naming_the_flag():
    result = run([sys.executable, *SCRIPT, "--device", "gpu"], timeout=60)
    assert result.returncode != 0
    assert "--device 'gpu'" in result.stderr.strip().splitlines()[-1]
