"""bench/studies/width_alone/repro.py and land.py --repro (plan.md amendment 3): a rerun reproduces its committed run
only if every logged row is equal in every field but the clock's, in the same class, from P's clean tree; a seed's
runs from a host that joined the class by its ISA variables land only when the record shows both widths reproduced.
Fake run folders: no training run."""

import glob
import json
import os
import subprocess
import sys

import pytest

from bench.studies.width_alone import land, repro
from conftest import ROOT

P = land.plan_commit()
AVX2 = {"device": "cpu", "host": "AMD EPYC", "cpu_capability": "AVX2", "dtype": "float32", "tf32": False,
        "deterministic": False}
ROWS = [{"iter": 0, "train_loss": 4.4244434356689455, "val_loss": 4.410616683959961, "time_s": 14.9},
        {"iter": 10, "train_loss": 3.4234657287597656, "grad_norm": 0.7142568826675415, "ms_per_iter": 350.1,
         "tokens_per_s": 11698.0, "mfu": 0.65}]


def run_folder(path, rows=ROWS, numerics=AVX2, commit=P, dirty=False):
    path.mkdir(parents=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "run_info.json").write_text(json.dumps({"git_commit": commit, "git_dirty": dirty, "numerics": numerics}))
    (path / "train.log").write_text("log\n")
    return str(path)


def with_clock_changed(rows):
    return [{k: (v * 2 if k in repro.CLOCK else v) for k, v in r.items()} for r in rows]


def test_a_rerun_that_differs_only_in_its_clock_reproduces(tmp_path):
    r = repro.compare(run_folder(tmp_path / "a"), run_folder(tmp_path / "b", with_clock_changed(ROWS)), [P])
    assert r["reproduced"] and r["differing"] == 0 and r["rows"] == [2, 2] and r["provenance"] == "P, clean"


@pytest.mark.parametrize("case, why", [
    ("one bit of a gradient norm", lambda r: r["first_difference"] == {"row": 1, "fields": {"grad_norm": [
        0.7142568826675415, 0.7144322991371155]}}),
    ("a row missing", lambda r: r["rows"] == [2, 1] and r["first_difference"]["row"] == 1),
    ("another class", lambda r: r["differing"] == 0 and r["classes"][1] == "cpu AMD EPYC AVX512, float32"),
    ("a dirty tree", lambda r: r["differing"] == 0 and "not recorded clean" in r["provenance"][0]),
])
def test_a_rerun_that_differs_in_anything_but_the_clock_does_not_reproduce(tmp_path, case, why):
    rows = [dict(r) for r in ROWS]
    if case == "one bit of a gradient norm":
        rows[1]["grad_norm"] = 0.7144322991371155
    rerun = run_folder(tmp_path / "b", rows[:1] if case == "a row missing" else rows,
                       numerics={**AVX2, "cpu_capability": "AVX512"} if case == "another class" else AVX2,
                       dirty=case == "a dirty tree")
    r = repro.compare(run_folder(tmp_path / "a"), rerun, [P])
    assert not r["reproduced"] and why(r), r


VARIABLES = "ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2"


def record(entries, folder=None, started="2026-12-08T01:00:00"):
    """A repro record {(setting, seed): reproduced}, from P under all three ceilings; with folder, written there as
    r.json with each rerun's run_info.json (its start) in r-reruns/."""
    label = "cpu AMD EPYC AVX2, float32"
    rec = {"P": P, "variables": VARIABLES, "runs": {f"shakespeare_char_24comm-{setting}-s{seed}": {
        "reproduced": ok, "classes": [label, label]} for (setting, seed), ok in entries.items()}}
    if folder:
        for run_id in rec["runs"]:
            (folder / "r-reruns" / run_id).mkdir(parents=True)
            (folder / "r-reruns" / run_id / "run_info.json").write_text(json.dumps({"started": started}))
        (folder / "r.json").write_text(json.dumps(rec))
    return rec


def arm_run(folder, seed, started="2026-12-08T02:00:00"):
    """One landing run of the seed, as land.check gives it."""
    d = folder / f"f{seed}"
    d.mkdir()
    (d / "run_info.json").write_text(json.dumps({"started": started, "numerics": AVX2}))
    return ({"seed": seed}, str(d), "cpu AMD EPYC AVX2, float32", True)


def test_land_takes_only_the_seeds_reproduced_at_both_widths_in_the_runs_class(tmp_path):
    rec = record({("w64_ref24", 612): True, ("w128_ref24", 612): True,  # both: lands
                  ("w64_ref24", 613): True,  # one width only: refused
                  ("w64_ref24", 614): True, ("w128_ref24", 614): False}, tmp_path)  # a rerun differed: refused
    name = str(tmp_path / "r.json")
    assert land.reproduced_seeds(rec, "cpu AMD EPYC AVX2, float32") == {612}
    assert land.reproduced_seeds(rec, "cpu AMD EPYC AVX512, float32") == set()  # the record's class, not another
    landing = [arm_run(tmp_path, 612)]
    land.check_reproduced(landing, rec, name, P)
    with pytest.raises(land.LandError, match=r"f613: .*r.json does not show seed 613's w64_ref24 and w128_ref24 reproduced"):
        land.check_reproduced(landing + [arm_run(tmp_path, 613)], rec, name, P)
    with pytest.raises(land.LandError, match="its reruns ran at 8d2508d00000, not P"):
        land.check_reproduced(landing, {**rec, "P": "8d2508d" + "0" * 33}, name, P)
    with pytest.raises(land.LandError, match="its variables name no MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA"):
        land.check_reproduced(landing, {**rec, "variables": "ATEN_CPU_CAPABILITY=avx2"}, name, P)
    (tmp_path / "early").mkdir()
    early = [arm_run(tmp_path / "early", 612, started="2026-12-08T00:30:00")]  # before its seed's reruns
    with pytest.raises(land.LandError, match=r"started 2026-12-08T00:30:00, not after .*w\d+_ref24-s612's rerun"):
        land.check_reproduced(early, rec, name, P)


def test_runs_under_ceilings_land_only_with_a_committed_record(tmp_path):
    landing = [arm_run(tmp_path, 612)]
    assert land.under_ceilings(landing, "AVX512") == (landing[0][1], "AVX2")  # a host reaching more: ceilings
    assert land.under_ceilings(landing, "AVX2") is None  # the host's own ISA: none
    record({("w64_ref24", 612): True, ("w128_ref24", 612): True}, tmp_path)
    with pytest.raises(land.LandError, match=r"r.json: not committed as it is"):
        land.check_committed(str(tmp_path / "r.json"))


def test_the_command_writes_the_record_and_the_reruns_logs_beside_it(tmp_path):
    run_id = "shakespeare_char_24comm-w64_ref24-s612"
    run_folder(tmp_path / "runs" / run_id), run_folder(tmp_path / "rerun" / run_id, with_clock_changed(ROWS))
    out = tmp_path / "repro" / "2026-12-08.json"
    command = [sys.executable, "-m", "bench.studies.width_alone.repro", "--rerun", str(tmp_path / "rerun"),
               "--runs", str(tmp_path / "runs"), "--json", str(out), "--variables", "ATEN_CPU_CAPABILITY=avx2", "--ids"]
    done = subprocess.run(command + [run_id], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"{run_id}: reproduced (2 of 2 rows, 0 differ" in done.stdout
    written = json.loads(out.read_text())
    assert written["P"] == P and written["variables"] == "ATEN_CPU_CAPABILITY=avx2" and written["runs"][run_id]["reproduced"]
    assert sorted(os.listdir(tmp_path / "repro" / "2026-12-08-reruns" / run_id)) == ["metrics.jsonl", "run_info.json", "train.log"]
    again = subprocess.run(command + [run_id], cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 1 and "exists: a record is never rewritten" in again.stderr  # landed runs name it
    command[command.index(str(out))] = str(out.with_name("other.json"))
    missing = subprocess.run(command + ["shakespeare_char_24comm-w128_ref24-s612"], cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode == 1 and missing.stderr.strip().count("\n") == 0 and "has no metrics.jsonl" in missing.stderr


def test_the_committed_records_recompute_from_the_committed_logs():
    """Each record under repro/ against its reruns' committed logs: repro.compare gives the record again, and a plain
    loop over the two metrics.jsonl (every field but the clock's, line by line) agrees with its verdict."""
    study = os.path.join(ROOT, "bench", "studies", "width_alone")
    records = sorted(glob.glob(os.path.join(study, "repro", "*.json")))
    assert records, "no record under repro/"
    for path in records:
        with open(path) as f:
            rec = json.load(f)
        assert rec["P"] == P
        land.check_committed(path)  # committed as it is: what lets its seeds' runs land
        for run_id, r in rec["runs"].items():
            committed, rerun = os.path.join(study, "runs", run_id), os.path.join(path[:-len(".json")] + "-reruns", run_id)
            assert repro.compare(committed, rerun, [P]) == json.loads(json.dumps(r)), run_id
            lines = []
            for folder in (committed, rerun):
                with open(os.path.join(folder, "metrics.jsonl")) as f:
                    lines.append([{k: v for k, v in json.loads(x).items() if k not in ("time_s", "ms_per_iter", "tokens_per_s", "mfu")}
                                  for x in f if x.strip()])
            assert (lines[0] == lines[1]) == (r["differing"] == 0), run_id
