"""bench/contrasts.py: a planned family of paired contrasts with Holm, on runs written by hand (the
fabricated runs of test_frontier), against p values and intervals worked out by hand."""

import csv
import json
import math

import pytest

from bench import contrasts, summary
from bench.harness import run_tool
from conftest import assert_one_line_error
from test_frontier import fabricate


def test_family_pairs_by_seed_and_adjusts_over_the_family(tmp_path):
    fabricate(tmp_path)
    rows, _ = summary.read_runs([str(tmp_path)])
    aggregates = summary.aggregate(rows)
    found = contrasts.family(aggregates, [("C1", "half", "ref"), ("C2", "drop", "train_shakespeare_char_24comm/ref"),
                                          ("C3", "shakespeare_char_24comm/b1_reliable", "ref")], tost=0.03)
    c1, c2, c3 = found
    # C1: +0.01, +0.02, +0.02: t = 5 with 2 degrees of freedom, p = 1 - sqrt(25/27)
    p1 = 1 - math.sqrt(25 / 27)
    assert c1["mean"] == pytest.approx(0.05 / 3) and c1["p"] == pytest.approx(p1, rel=1e-6)
    # C2: +0.05, +0.10, +0.03: mean 0.06, std sqrt(0.0013), t^2 = 0.0036 * 3 / 0.0013
    t2 = 0.0036 * 3 / 0.0013
    p2 = 1 - math.sqrt(t2 / (t2 + 2))
    assert c2["p"] == pytest.approx(p2, rel=1e-6)
    # C3: the same numbers at every seed: exactly 0, p = 1
    assert c3["mean"] == 0 and c3["p"] == 1.0
    # Holm over three: 3 x p1, then max(3 p1, 2 p2), then 1
    assert c1["p_holm"] == pytest.approx(3 * p1, rel=1e-6)
    assert c2["p_holm"] == pytest.approx(max(3 * p1, 2 * p2), rel=1e-6)
    assert [c["verdict"] for c in found] == ["unresolved"] * 3
    # TOST at +-0.03: C1's 90% interval 0.01667 -+ 2.919986 x 0.005774 / sqrt(3) = [0.00693, 0.02640] inside
    assert c1["tost_low"] == pytest.approx(0.05 / 3 - 2.919986 * 0.0057735 / math.sqrt(3), abs=1e-5)
    assert c1["within_margin"] and not c2["within_margin"] and c3["within_margin"]
    # a family of one: C1 alone is resolved
    (alone,) = contrasts.family(aggregates, [("C1", "half", "ref")])
    assert alone["p_holm"] == pytest.approx(p1) and alone["verdict"] == "resolved: A higher"


def test_cli_table_json_and_one_line_errors(tmp_path):
    fabricate(tmp_path / "runs")
    out = tmp_path / "family.json"
    result = run_tool("bench.contrasts", str(tmp_path / "runs"), "--contrast", "C1", "half", "ref",
                      "--contrast", "C2", "drop", "ref", "--seeds", "1-3", "--json", str(out))
    assert result.returncode == 0, result.stderr
    assert "| C1 | train_shakespeare_char_24comm/half | train_shakespeare_char_24comm/ref | 3 | +0.0167" in result.stdout
    assert [c["name"] for c in json.loads(out.read_text())] == ["C1", "C2"]
    runs = str(tmp_path / "runs")
    assert_one_line_error(run_tool("bench.contrasts", runs, "--contrast", "C1", "halve", "ref"),
                          "no setting 'halve'", "train_shakespeare_char_24comm/half")
    assert_one_line_error(run_tool("bench.contrasts", runs, "--contrast", "C1", "half", "ref",
                                   "--contrast", "C1", "drop", "ref"), "names must differ")
    assert_one_line_error(run_tool("bench.contrasts", runs, "--contrast", "C1", "half", "ref", "--tost", "-1"),
                          "--tost=-1.0")


def test_seeds_on_a_gpu_and_a_cpu_are_one_setting_where_they_computed_the_same(tmp_path):
    """A plan may run one seed on a GPU (deterministic kernels, dtype float32 given) and the others on a
    CPU (dtype 'auto', which resolves to float32 there): the same setting, so its contrasts pair over
    every seed. A GPU run whose 'auto' became bfloat16 computed something else: a setting of its own."""
    fabricate(tmp_path)

    def as_run_on(run_dir, device, dtype, deterministic):
        cfg = json.loads((run_dir / "config.json").read_text())
        cfg.update(dtype=dtype, deterministic=deterministic)
        (run_dir / "config.json").write_text(json.dumps(cfg))
        resolved = "float32" if dtype == "auto" and device == "cpu" else ("bfloat16" if dtype == "auto" else dtype)
        (run_dir / "train.log").write_text(f"layout: dp=1 x tp=2 | backend: native (tp_backend='native') | "
                                           f"device: {device} {resolved} compile=False | seed: 1\n")

    for run_dir in tmp_path.iterdir():
        seed = int(run_dir.name.rsplit("-s", 1)[1])
        as_run_on(run_dir, "cuda" if seed == 2 else "cpu", "float32" if seed == 2 else "auto", seed == 2)
    rows, _ = summary.read_runs([str(tmp_path)])
    (c1,) = contrasts.family(summary.aggregate(rows), [("C1", "half", "ref")])
    assert c1["n"] == 3 and c1["mean"] == pytest.approx(0.05 / 3)  # seed 2 (the GPU's) pairs with the others

    as_run_on(tmp_path / "24comm-half-s2", "cuda", "auto", False)  # bfloat16 on the GPU
    rows, _ = summary.read_runs([str(tmp_path)])
    halves = [a for a in summary.aggregate(rows) if a["_name"].endswith("/half")]
    assert sorted(a["n"] for a in halves) == [1, 2]
    with pytest.raises(summary.SummaryError, match="ambiguous"):
        contrasts.family(summary.aggregate(rows), [("C1", "half", "ref")])


def test_a_pair_of_runs_of_two_numerics_classes_is_refused(tmp_path):
    """Runs record their numerics class (run_info.json, provenance.numerics_class); a contrast pairing a
    CPU run with a TF32 GPU run of the same seed is one clear error, a pair of one class passes, and
    runs from before the class was recorded pair as before (every committed study's)."""
    fabricate(tmp_path / "runs")
    cpu = {"device": "cpu", "host": "AMD EPYC", "cpu_capability": "AVX2", "dtype": "float32", "tf32": False,
           "deterministic": False}
    for run_dir in (tmp_path / "runs").iterdir():
        (run_dir / "run_info.json").write_text(json.dumps({"numerics": cpu}))
    pair = [("C1", "half", "ref")]
    assert contrasts.family(summary.aggregate(summary.read_runs([str(tmp_path / "runs")])[0]), pair)[0]["n"] == 3
    gpu_run = next(d for d in (tmp_path / "runs").iterdir() if d.name.startswith("24comm-half-"))
    (gpu_run / "run_info.json").write_text(json.dumps({"numerics": {**cpu, "device": "cuda", "host": "NVIDIA H200",
                                                                    "tf32": True}}))
    with pytest.raises(summary.SummaryError, match=r"C1: seed \d+: .* ran in different numerics classes \(device "
                                                   r"'cuda' vs 'cpu', host 'NVIDIA H200' vs 'AMD EPYC', tf32 True vs False\)"):
        contrasts.family(summary.aggregate(summary.read_runs([str(tmp_path / "runs")])[0]), pair)
    # a run begun on another CPU and resumed on this one (provenance.describe_run's earlier_parts) is of neither class
    (gpu_run / "run_info.json").write_text(json.dumps({"numerics": cpu, "earlier_parts": [
        {"numerics": cpu}, {"numerics": {**cpu, "host": "Intel Xeon", "cpu_capability": "AVX512"}}]}))
    with pytest.raises(summary.SummaryError, match=r"ran in different numerics classes \(resumed_from \[\{.*Intel Xeon"):
        contrasts.family(summary.aggregate(summary.read_runs([str(tmp_path / "runs")])[0]), pair)
    assert summary.class_label(json.loads((gpu_run / "run_info.json").read_text())) == \
        "cpu AMD EPYC AVX2, float32 (resumed from cpu Intel Xeon AVX512, float32)"
    (gpu_run / "run_info.json").unlink()  # one run without a class, its twin with one: cannot be checked
    with pytest.raises(summary.SummaryError, match="has no numerics class"):
        contrasts.family(summary.aggregate(summary.read_runs([str(tmp_path / "runs")])[0]), pair)
    result = run_tool("bench.contrasts", str(tmp_path / "runs"), "--contrast", "C1", "half", "ref")
    assert_one_line_error(result, "has no numerics class")
    # the summary and the frontier pair every setting with 24comm: they refuse the same pair
    for tool in (["bench.summarize", "--out", str(tmp_path / "summary")], ["bench.frontier", "--gpu", ""]):
        result = run_tool(tool[0], str(tmp_path / "runs"), *tool[1:])
        assert_one_line_error(result, "has no numerics class")


def test_a_summary_of_two_classes_refuses_to_pair_them_and_describes_them_when_asked(tmp_path):
    """A tuning grid may span hosts (a choice is not a contrast): `bench.summarize --describe` writes the rows,
    means and curves, each row naming its class(es), and pairs nothing; without it the same runs are refused."""
    fabricate(tmp_path / "runs")
    cpu = {"device": "cpu", "host": "AMD EPYC", "cpu_capability": "AVX2", "dtype": "float32", "tf32": False,
           "deterministic": False}
    intel = {**cpu, "host": "Intel Xeon", "cpu_capability": "AVX512"}
    half = sorted(d for d in (tmp_path / "runs").iterdir() if d.name.startswith("24comm-half-"))
    for run_dir in (tmp_path / "runs").iterdir():
        (run_dir / "run_info.json").write_text(json.dumps({"numerics": intel if run_dir == half[0] else cpu}))
    assert_one_line_error(run_tool("bench.summarize", str(tmp_path / "runs"), "--out", str(tmp_path / "a")),
                          "ran in different numerics classes")
    result = run_tool("bench.summarize", str(tmp_path / "runs"), "--describe", "--out", str(tmp_path / "b"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "nothing paired" in result.stdout and "cpu Intel Xeon AVX512, float32" in result.stdout
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["experiment_summary.csv"]
    with open(tmp_path / "b" / "experiment_summary.csv") as f:
        rows = list(csv.DictReader(f))
    by_run = {r["run"]: r for r in rows}
    assert by_run[half[0].name]["numerics_class"] == "cpu Intel Xeon AVX512, float32"
    assert by_run[half[1].name]["numerics_class"] == "cpu AMD EPYC AVX2, float32"
    (mean,) = [r for r in rows if r["kind"] == "aggregate" and r["run"].startswith("24comm-half")]
    assert mean["numerics_class"] == "cpu AMD EPYC AVX2, float32; cpu Intel Xeon AVX512, float32"
    assert float(mean["final_val_loss"]) == pytest.approx(sum(float(by_run[d.name]["final_val_loss"]) for d in half)
                                                          / len(half))
    assert all(r[c] == "" for r in rows for c in ("paired_reference", "paired_diff", "paired_p", "iters_to_1pct"))
    assert_one_line_error(run_tool("bench.summarize", str(tmp_path / "runs"), "--describe", "--reference", "ref"),
                          "--describe pairs nothing")


def test_a_family_over_seeds_of_two_classes_reports_each_class_beside_the_pooled(tmp_path):
    """Seeds 1 and 3 on one CPU, seed 2 (both its runs) on a TF32 GPU: the pooled contrast as before, and
    each class's own interval beside it (issue 47 item 3); seeds of one class add nothing."""
    fabricate(tmp_path / "runs")
    cpu = {"device": "cpu", "host": "AMD EPYC", "cpu_capability": "AVX2", "dtype": "float32", "tf32": False,
           "deterministic": False}
    gpu = {**cpu, "device": "cuda", "host": "NVIDIA H200", "tf32": True}
    for run_dir in (tmp_path / "runs").iterdir():
        (run_dir / "run_info.json").write_text(json.dumps({"numerics": cpu}))
    pair = [("C1", "half", "ref")]
    assert "by_class" not in contrasts.family(summary.aggregate(summary.read_runs([str(tmp_path / "runs")])[0]), pair)[0]
    for run_dir in (tmp_path / "runs").glob("*-s2"):
        (run_dir / "run_info.json").write_text(json.dumps({"numerics": gpu}))
    (c1,) = contrasts.family(summary.aggregate(summary.read_runs([str(tmp_path / "runs")])[0]), pair)
    assert c1["n"] == 3 and c1["mean"] == pytest.approx(0.05 / 3)  # half - ref: +0.01, +0.02, +0.02
    assert c1["by_class"]["cpu AMD EPYC AVX2, float32"]["seeds"] == [1, 3]
    assert c1["by_class"]["cpu AMD EPYC AVX2, float32"]["mean"] == pytest.approx(0.015)
    assert c1["by_class"]["NVIDIA H200, float32, TF32"]["seeds"] == [2]
    assert c1["by_class"]["NVIDIA H200, float32, TF32"]["mean"] == pytest.approx(0.02)
    # bench.summarize prints the same split under each paired row
    result = run_tool("bench.summarize", str(tmp_path / "runs"), "--out", str(tmp_path / "summary"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "    of which NVIDIA H200, float32, TF32, seeds 2: +0.0200" in result.stdout
    assert "    of which cpu AMD EPYC AVX2, float32, seeds 1,3: +0.0150" in result.stdout
    # runs recorded before the class: labelled from the device they did record
    assert summary.class_label({"device": "NVIDIA H100 80GB HBM3", "cpu_capability": "AVX512"}) == \
        "NVIDIA H100 80GB HBM3 (as recorded then)"
    assert summary.class_label({"device": "cpu", "cpu_capability": "AVX2"}) == "cpu AVX2 (as recorded then)"


def test_a_holm_p_of_exactly_the_level_is_not_resolved():
    """Holm's rule rejects below 0.05; 1 - 0.95 is 0.050000000000000044 in floats, which let 0.05 itself through."""
    from bench.stats import holm
    assert holm([0.025, 0.9])[0] == 0.05
    at_level = dict(paired_p_holm=0.05, paired_diff_mean=0.01, within_noise_floor=False)
    assert summary.verdict(at_level) == "unresolved (interval wider than the noise floor)"


def test_a_log_still_being_written_reads_and_a_broken_one_is_one_line(tmp_path):
    """A run killed mid-write, or still writing, ends its metrics.jsonl in a torn line: the tools read the
    records before it (checkpoint.read_log, as a resume does). A broken line before the last is no torn write:
    one line naming the file and line. Runs without result.json (bench.sweep writes it at a run's end) are
    unfinished, and an error that lists no settings says why."""
    runs = tmp_path / "runs"
    fabricate(runs)
    before = {r["run"]: r["final_val_loss"] for r in summary.read_runs([str(runs)])[0]}
    log = next(runs.glob("*-half-s*")) / "metrics.jsonl"
    log.write_text(log.read_text() + '{"iter": 310, "train_lo')
    assert {r["run"]: r["final_val_loss"] for r in summary.read_runs([str(runs)])[0]} == before
    result = run_tool("bench.summarize", str(runs), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-2000:]
    log.write_text('{"iter": 0, "val_lo\n' + log.read_text())
    assert_one_line_error(run_tool("bench.contrasts", str(runs), "--contrast", "C1", "half", "ref"),
                          f"{log}: line 1 is not a JSON record")
    plain = tmp_path / "plain"
    (plain / "a").mkdir(parents=True)
    (plain / "a" / "config.json").write_text((next(runs.glob("*-ref-s*")) / "config.json").read_text())
    result = run_tool("bench.summarize", str(plain), "--out", str(tmp_path / "out2"))
    assert result.returncode == 0 and "1 runs (1 unfinished)" in result.stdout and "result.json" in result.stdout
    assert_one_line_error(run_tool("bench.contrasts", str(plain), "--contrast", "C1", "a", "b"),
                          "settings: none (no run has the result.json bench.sweep writes at its end)")
