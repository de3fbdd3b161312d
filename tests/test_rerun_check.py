"""bench/rerun_check.py: a rerun's bits, and train.py's `deterministic` key (CPU here; the GPU check is
the tool's own run on a lent machine)."""

import json
import os

import pytest

from bench.compare_runs import TIMING
from bench.harness import records, run_train
from bench.rerun_check import PAIRS, compare, main
from conftest import TINY


def test_compare_calls_only_equal_bits_identical():
    a = [{"iter": 0, "train_loss": 4.1, "val_loss": 4.2, "packets_lost": 3}, {"iter": 1, "train_loss": 3.9}]
    assert compare(a, [dict(r) for r in a])[2]
    nudged = [dict(r) for r in a]
    nudged[1]["train_loss"] = 3.9 + 1e-15
    floats, counts, same = compare(a, nudged)
    assert not same and 0 < floats["train_loss"] < 1e-14 and counts == []
    lost = [dict(r) for r in a]
    lost[0]["packets_lost"] = 4
    assert compare(a, lost)[1:] == (["packets_lost"], False)
    assert compare(a, lost, with_counts=False)[1:] == ([], True)  # the reliable control: floats only


def test_deterministic_kernels_are_on_and_change_nothing_on_cpu(char_data, tmp_path):
    """CPU kernels are deterministic already: the key must switch torch's mode on (run_info says so, as
    measured in the run) and leave every logged number of a lossy, Hadamard-spread run as it was."""
    common = [*TINY, f"--data_dir={char_data}", "--max_iters=10", "--block_types=tp,ladder", "--loss_model=bernoulli",
              "--loss_rate=0.05", "--packet_bytes=64", "--sync_rotation=hadamard", "--sync_dtype=int8"]
    logs = {}
    for name, extra in {"plain": [], "det": ["--deterministic=True"]}.items():
        out = str(tmp_path / name)
        result = run_train(*common, *extra, f"--out_dir={out}")
        assert result.returncode == 0, result.stderr
        assert ("compile=False deterministic |" in result.stdout) == (name == "det"), result.stdout.splitlines()[0]
        assert json.load(open(os.path.join(out, "run_info.json")))["deterministic_kernels"] == (name == "det")
        logs[name] = [{k: v for k, v in r.items() if k not in TIMING} for r in records(out)]
    assert logs["det"] == logs["plain"]


@pytest.mark.slow
@pytest.mark.timeout(300)  # 53 s with the cores shared four ways
def test_rerun_check_finds_every_pair_identical_on_cpu(char_data, capsys, tmp_path):
    """The whole tool on a tiny model: on a CPU every pair is bit-identical, the control included."""
    main(["--max_iters=6", "--slots=2", f"--out={tmp_path}", "--train_args", *TINY, f"--data_dir={char_data}"])
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| train_shakespeare_char_24comm |")]
    assert len(rows) == 4 and all(line.endswith("| none | yes |") for line in rows), table
    assert [line.split(" | ")[1] for line in rows] == list(PAIRS)


def test_a_deterministic_pair_that_differs_fails_the_gate(monkeypatch, tmp_path, capsys):
    """device.sh runs seeds only when rerun_check exits 0: a differing deterministic pair must exit 1,
    while noise in the default-kernel rerun (what CUDA shows without the key) alone must not."""
    import bench.rerun_check as rc
    zeros = dict.fromkeys(rc.FLOAT_KEYS, 0.0)
    same, differs = (zeros, [], True), ({**zeros, "train_loss": 1e-7}, [], False)
    monkeypatch.setattr(rc, "run_pairs", lambda *a: {**{p: same for p in PAIRS}, "rerun, default kernels": differs})
    main([f"--out={tmp_path}"])  # passes
    monkeypatch.setattr(rc, "run_pairs", lambda *a: {**{p: same for p in PAIRS}, "rerun, deterministic": differs})
    with pytest.raises(SystemExit, match="not bit-reproducible here: .*rerun, deterministic"):
        main([f"--out={tmp_path}"])
