"""The width-alone study's readings as they will be reported: each family recomputed from the run logs by a plain
loop (not by the study's tools), findings.md and the first screens rendered from the analysis files, and the
budget tool's projection of the arms left. On fake runs where the study has none yet; on the committed files once
they exist (the parametrized tests)."""

import json
import math
import os
import re
import shutil
import sys

import pytest

from bench.studies.width_alone import design, family, rates
from test_width_alone import RATES, SCALE, STUDY, fill_tuning, final, state  # noqa: F401 (state: a fixture)


TUNING_RUN = re.compile(r"shakespeare_char_24comm-w(\d+)_([a-z0-9]+)_lr([0-9.e-]+)-s(\d+)")


def recompute_tuning(state, runs, width):
    """A decided width's tuning recomputed from its run logs with a plain loop, not with rates.py: each run's final
    val loss (metrics.jsonl's eval at max_iters; a run train.py stopped on a non-finite value is diverged, +inf),
    per setting and rate the mean, sd, min and max over the tuning seeds, the stable band, and the rate the plan's
    rule picks. Asserts they are what tuning/sensitivity_w<W>.json and chosen_rates.json say; returns the bands."""
    with open(os.path.join(state, "tuning", f"sensitivity_w{width}.json")) as f:
        written = json.load(f)
    with open(os.path.join(state, "chosen_rates.json")) as f:
        chosen = json.load(f)[str(width)]
    finals, bands = {}, {}
    for name in sorted(os.listdir(runs)):
        match = TUNING_RUN.fullmatch(name)
        if not match or int(match[1]) != width or int(match[4]) not in design.TUNING_SEEDS:
            continue
        with open(os.path.join(runs, name, "config.json")) as f:
            max_iters = json.load(f)["max_iters"]
        with open(os.path.join(runs, name, "metrics.jsonl")) as f:
            evals = [json.loads(line) for line in f if '"val_loss"' in line]
        if evals and evals[-1]["iter"] == max_iters:  # ended: its final loss, +inf where not finite (diverged)
            value = evals[-1]["val_loss"] if math.isfinite(evals[-1]["val_loss"]) else math.inf
        else:
            with open(os.path.join(runs, name, "train.log")) as f:
                errors = [line for line in f if line.startswith("error:")]
            assert errors and ("not finite" in errors[-1] or "non-finite" in errors[-1]), f"{name}: neither ended nor diverged"
            value = math.inf
        finals.setdefault(match[2], {}).setdefault(float(match[3]), []).append(value)
    assert written["seeds"] == design.TUNING_SEEDS and sorted(finals) == sorted(written["curves"]) == sorted(chosen)
    for setting, by_rate in finals.items():
        points, means = written["curves"][setting]["points"], {}
        assert sorted(float(lr) for lr in points) == sorted(by_rate)
        assert all(chosen["ref24"] in finals[s] for s in finals)  # the rule's step 4: 24comm's rate in every grid
        for lr, values in by_rate.items():
            point, ok = points[f"{lr:g}"], [v for v in values if math.isfinite(v)]
            assert len(values) == point["n"] == len(design.TUNING_SEEDS) and point["diverged"] == len(values) - len(ok)
            means[lr] = sum(values) / len(values) if len(ok) == len(values) else math.inf
            assert point["mean"] == pytest.approx(means[lr], abs=1e-12)
            if ok:
                assert (point["min"], point["max"]) == pytest.approx((min(ok), max(ok)), abs=1e-12)
            if len(ok) > 1:
                sd = math.sqrt(sum((v - sum(ok) / len(ok)) ** 2 for v in ok) / (len(ok) - 1))
                assert point["sd"] == pytest.approx(sd, abs=1e-12)
        best = min(means.values())
        band = sorted(lr for lr, m in means.items() if m <= best + 0.1) if math.isfinite(best) else []
        assert written["curves"][setting]["band"] == pytest.approx(band)
        bands[setting] = band
        pick = max(lr for lr, m in means.items() if m <= best + 0.005) if math.isfinite(best) else None
        assert chosen[setting] == pick, (setting, chosen[setting], pick)
    return bands


def test_the_tuning_is_what_its_run_logs_give_and_renders_from_its_files(state, monkeypatch):
    """The recompute above on a width the rates tool decided (a diverged seed, a grid extended once), then a run's
    logged loss moved: the recompute catches it. findings.md's S1 table and choices come from the written files."""
    from bench.render import Study, render_template
    runs = state / "tuning" / "runs"
    best = {"ref24": 0.01, "drop1": 0.01, "half": 0.005, "ladder": 0.0025}
    monkeypatch.setattr(sys, "argv", ["rates", "--width", "128", "--runs", str(runs), "--write"])
    for _ in range(2):  # the base grid, then ladder's extension to 0.00125
        fill_tuning(runs, 128, best, diverged={("ladder", 0.02, 502)})
        rates.main()
    bands = recompute_tuning(state, runs, 128)
    text = render_template("bench/studies/width_alone/findings.md.j2", data={"width_alone": Study(str(state))})
    assert "n_embd 128: ref24 0.01, drop1 0.01, half 0.005, ladder 0.0025" in text
    row = next(line for line in text.splitlines() if line.startswith("| 0.02 |"))
    assert row.count("diverged (1 of 3)") == 1  # ladder: seed 502 stopped on a non-finite loss
    assert "| 0.01 | 1.8000 (0.0100) [1.7900, 1.8100] |" in text  # 24comm at its best: 1.8 + seed offsets
    assert "- ladder: 0.0025; band 0.00125 to 0.005 (2 factor-2 steps)" in text
    # "narrower" is the plan's rule (fewer factor-2 steps, or a lower highest stable rate), and the line says which
    steps = {s: round(math.log2(max(b) / min(b))) for s, b in bands.items()}
    fewer, lower = steps["ladder"] < steps["ref24"], max(bands["ladder"]) < max(bands["ref24"])
    why = ("fewer factor-2 steps and a lower highest stable rate" if fewer and lower else "fewer factor-2 steps"
           if fewer else "a lower highest stable rate, though its band is " + ("as wide" if steps["ladder"] ==
                                                                               steps["ref24"] else "wider"))
    assert lower and ("Is ladder's stable range narrower than 24comm's at n_embd 128? Narrower on this grid, by the "
                      f"plan's rule ({why}): ladder {steps['ladder']}, 24comm {steps['ref24']} factor-2") in text
    moved = runs / "shakespeare_char_24comm-w128_half_lr0.005-s501" / "metrics.jsonl"
    moved.write_text(moved.read_text().replace('"val_loss": 1.8', '"val_loss": 1.9'))
    with pytest.raises(AssertionError):
        recompute_tuning(state, runs, 128)


TUNED = [w for w in design.CPU if os.path.exists(os.path.join(STUDY, "tuning", f"sensitivity_w{w}.json"))]


@pytest.mark.parametrize("width", TUNED)
def test_each_committed_tuning_is_what_its_run_logs_give(width):
    recompute_tuning(STUDY, os.path.join(STUDY, "tuning", "runs"), width)


def plan_command(writes):
    """The plan's analysis command (plan.md "Analysis") that writes `writes`, as family.py's argv."""
    import shlex
    with open(os.path.join(STUDY, "plan.md")) as f:
        blocks = re.findall(r"^```[a-z]*\n(.*?)^```", f.read(), re.S | re.M)
    commands = [c for b in blocks for c in b.replace("\\\n", " ").splitlines()]
    return next(shlex.split(c)[3:] for c in commands if c.startswith("python -m bench.studies.width_alone.family") and writes in c)


def fake_study_runs(runs, finals, commit, hosts, suffix="", extra=None):
    """Study runs as train.py and bench.sweep leave them, built from a committed scale run's files: finals
    {(width, setting, seed): final val loss}, each setting at RATES' rate; hosts {seed: its CPU model}; suffix and
    extra: another arm's (the horizon's 'h' and its config keys)."""
    template = os.path.join(SCALE, "runs", "shakespeare_char_24comm-w64_ref24-s300")
    load = lambda name: json.load(open(os.path.join(template, name)))  # noqa: E731
    config, info, result = load("config.json"), load("run_info.json"), load("result.json")
    with open(os.path.join(template, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    last = max(i for i, r in enumerate(records) if "val_loss" in r)
    for (width, setting, seed), loss in finals.items():
        run = runs / f"shakespeare_char_24comm-w{width}{suffix}_{setting}-s{seed}"
        run.mkdir(parents=True)
        shutil.copy(os.path.join(template, "train.log"), run / "train.log")
        write = lambda name, content: (run / name).write_text(json.dumps(content))  # noqa: E731
        own = design.rate(RATES[str(width)][setting]) if setting in RATES[str(width)] else {}  # else: extra's rate
        write("config.json", {**config, **design.SETTINGS.get(setting, {}), **design.shape(width), **own,
                              **(extra or {}), "seed": seed})
        write("run_info.json", {**info, "git_commit": commit, "checkout_commit": commit, "git_dirty": False,
                                "numerics": {**info["numerics"], "host": hosts[seed]}})
        write("result.json", {**result, "id": run.name, "setting": f"w{width}{suffix}_{setting}", "seed": seed,
                              "final": {**result["final"], "val_loss": loss}})
        (run / "metrics.jsonl").write_text("".join(json.dumps({**r, "val_loss": loss} if i == last else r) + "\n"
                                                   for i, r in enumerate(records)))


def recompute_family(study, commit_runs, file, terms):
    """A family file recomputed from the runs' metrics.jsonl with a plain loop (not family.py or bench.stats):
    terms(name) lists the (arm, setting, sign) whose signed final losses sum to the contrast's per-seed number; over
    the seeds with every term's run, the mean, the 95% t interval, the t test's p and Holm's adjustment by hand.
    Asserts they are what the file says."""
    import by_hand
    with open(os.path.join(study, file)) as f:
        records = json.load(f)
    runs = os.path.join(study, commit_runs)
    loss = lambda arm, s, seed: final(os.path.join(runs, f"shakespeare_char_24comm-{arm}_{s}-s{seed}"))  # noqa: E731
    seeds_of = lambda arm, s: {int(n.rsplit("-s", 1)[1]) for n in os.listdir(runs) if f"-{arm}_{s}-" in n}  # noqa: E731
    p_values = []
    for record in records:
        parts = terms(record["name"])
        seeds = sorted(set.intersection(*(seeds_of(arm, s) for arm, s, _ in parts)))
        diffs = [sum(sign * loss(arm, s, seed) for arm, s, sign in parts) for seed in seeds]
        mean, low, high, p = by_hand.paired(diffs)
        assert record["seeds"] == seeds and record["n"] == len(diffs)
        assert (record["mean"], record["ci_low"], record["ci_high"]) == pytest.approx((mean, low, high), abs=1e-9)
        assert record["p"] == pytest.approx(p, rel=1e-6)
        p_values.append(p)
    assert [r["p_holm"] for r in records] == pytest.approx(by_hand.holm(p_values), rel=1e-6)
    return records


def cost_terms(arm, setting, sign=1):
    """A setting's cost against 24comm in one arm (w64, w128, w64h) as signed terms."""
    return [(arm, setting, sign), (arm, "ref24", -sign)]


def recompute_primary(study, commit_runs):
    """family_primary.json: c<W>_S is S's cost at width W, d_S its cost at 128 minus its cost at 64, per seed."""
    def terms(name):
        kind, setting = name.split("_", 1)
        return cost_terms(f"w{kind[1:]}", setting) if kind.startswith("c") else cost_terms("w128", setting) + cost_terms("w64", setting, -1)
    return recompute_family(study, commit_runs, "family_primary.json", terms)


@pytest.fixture
def analysed(tmp_path, monkeypatch):
    """A study folder with fourteen fake seeds over two numerics classes, one of them a single seed (ladder's cost
    rising from 64 to 128, the others not), and family_primary.json written by the plan's own command for it:
    (folder, the runs' finals)."""
    import random
    effect = {64: {"drop1": 0.01, "drop5": 0.005, "half": 0.0, "ladder": 0.02}, 128: {"drop1": 0.01, "half": 0.0, "ladder": 0.09}}
    finals = {(w, s, seed): 1.9 + effect[w].get(s, 0.0) + random.Random(f"{w}{s}{seed}").gauss(0, 0.01)
              for w in (64, 128) for s in design.CPU[w] for seed in design.STUDY_SEEDS}
    hosts = {seed: "AMD EPYC" if seed < 613 else "Intel(R) Xeon(R) Processor @ 2.50GHz" for seed in design.STUDY_SEEDS}
    commit = "a" * 40
    fake_study_runs(tmp_path / "runs", finals, commit, hosts)
    (tmp_path / "chosen_rates.json").write_text(json.dumps(RATES))
    argv = [a.replace("<P>", commit).replace("bench/studies/width_alone/", f"{tmp_path}/") for a in plan_command("family_primary.json")]
    monkeypatch.setattr(sys, "argv", ["family", *argv])
    family.main()
    return tmp_path, finals


def test_the_primary_family_by_the_plans_command_is_what_the_run_logs_give_and_renders(analysed):
    """The plan's command on the fake seeds, the plain-loop recompute, findings.md's table and answer; then a
    run's logged loss moved: the recompute catches it."""
    from bench.render import Study, ci, render_template
    tmp_path, finals = analysed
    records = recompute_primary(tmp_path, "runs")
    assert [r["name"] for r in records] == ["c64_drop1", "c64_drop5", "c64_half", "c64_ladder", "c128_drop1", "c128_half",
                                            "c128_ladder", "d_drop1", "d_half", "d_ladder"]
    by_name = {r["name"]: r for r in records}
    assert by_name["d_ladder"]["verdict"].startswith("resolved") and by_name["d_ladder"]["mean"] > 0
    assert sorted(by_name["c64_half"]["by_class"]) == ["cpu AMD EPYC AVX512, float32",
                                                        "cpu Intel(R) Xeon(R) Processor @ 2.50GHz AVX512, float32"]
    text = render_template("bench/studies/width_alone/findings.md.j2", data={"width_alone": Study(str(tmp_path))})
    row = next(line for line in text.splitlines() if line.startswith("| d_ladder |"))
    assert f"| 64: 0.005, 0.02; 128: 0.0025, 0.01 | 14 | {ci(by_name['d_ladder'])} |" in row
    assert f"Yes, it rises: {ci(by_name['d_ladder'])} nats from 64 to 128" in text
    assert "- c64_half: cpu AMD EPYC AVX512, float32, seeds 600-612: " in text  # a class of one seed: its mean only
    assert "cpu Intel(R) Xeon(R) Processor @ 2.50GHz AVX512, float32, seeds 613: " in text and "(one seed: no interval)" in text
    moved = tmp_path / "runs" / "shakespeare_char_24comm-w128_ladder-s605" / "metrics.jsonl"
    moved.write_text(moved.read_text().replace(f'"val_loss": {finals[(128, "ladder", 605)]}', '"val_loss": 2.5'))
    with pytest.raises(AssertionError):
        recompute_primary(tmp_path, "runs")


def recompute_horizon(study, commit_runs):
    """family_horizon.json: h_S is S's cost at the longer horizon (w64h), hd_S that minus its cost at 600 iterations."""
    def terms(name):
        kind, setting = name.split("_", 1)
        return cost_terms("w64h", setting) + (cost_terms("w64", setting, -1) if kind == "hd" else [])
    return recompute_family(study, commit_runs, "family_horizon.json", terms)


def test_the_horizon_by_the_plans_command_is_what_the_run_logs_give_and_renders(analysed, monkeypatch):
    """S3 on 8 fake seeds at 2,400 iterations (1comm's cost shrinking with training, ladder's growing): the plan's
    command, the plain-loop recompute, findings.md's S3 table with the horizon's length from the run logs; then a
    run's logged loss moved: the recompute catches it."""
    import random
    from bench.render import Study, ci, render_template
    tmp_path, finals = analysed
    effect = {"drop1": -0.005, "half": 0.0, "ladder": 0.06}
    seeds = design.STUDY_SEEDS[:design.HORIZON_N]
    longer = {(64, s, seed): 1.7 + effect.get(s, 0.0) + random.Random(f"h{s}{seed}").gauss(0, 0.005)
              for s in design.HORIZON for seed in seeds}
    hosts = {seed: "AMD EPYC" for seed in seeds}
    fake_study_runs(tmp_path / "runs", longer, "a" * 40, hosts, suffix="h", extra=design.horizon_common())
    argv = [a.replace("<P>", "a" * 40).replace("bench/studies/width_alone/", f"{tmp_path}/") for a in plan_command("family_horizon.json")]
    monkeypatch.setattr(sys, "argv", ["family", *argv])
    family.main()
    records = {r["name"]: r for r in recompute_horizon(tmp_path, "runs")}
    assert sorted(records) == ["h_drop1", "h_half", "h_ladder", "hd_drop1", "hd_half", "hd_ladder"]
    assert records["h_ladder"]["n"] == design.HORIZON_N and records["h_ladder"]["verdict"] == "resolved: A higher"
    text = render_template("bench/studies/width_alone/findings.md.j2", data={"width_alone": Study(str(tmp_path))})
    assert "## S3: the horizon (Holm over 6)" in text and "At n_embd 64 over 2,400 iterations" in text and "S2:" not in text
    assert f"| h_ladder | w64h_ladder | w64h_ref24 | 8 | {ci(records['h_ladder'])} |" in text
    assert f"| hd_drop1 | w64h_drop1 - w64h_ref24 | w64_drop1 - w64_ref24 | 8 | {ci(records['hd_drop1'])} |" in text
    assert f"ladder: it rises, {ci(records['hd_ladder'])}" in text and f"half: unresolved at this power, {ci(records['hd_half'])}" in text
    moved = tmp_path / "runs" / "shakespeare_char_24comm-w64h_half-s603" / "metrics.jsonl"
    moved.write_text(moved.read_text().replace(f'"val_loss": {longer[(64, "half", 603)]}', '"val_loss": 2.5'))
    with pytest.raises(AssertionError):
        recompute_horizon(tmp_path, "runs")


def recompute_floor(study, commit_runs):
    """family_floor.json: f<W> is dense minus 24comm at width W, fd its change from 64 to 128, per seed."""
    def terms(name):
        return cost_terms("w128", "dense") + cost_terms("w64", "dense", -1) if name == "fd" else cost_terms(f"w{name[1:]}", "dense")
    return recompute_family(study, commit_runs, "family_floor.json", terms)


def test_the_noise_floor_by_the_plans_command_is_what_the_run_logs_give_and_is_read_beside_the_primary_family(analysed, monkeypatch):
    """Amendment 2: dense at 24comm's rate on the fourteen fake seeds, the plan's command, the plain-loop recompute,
    the floor's table with each row's largest per-seed |difference|, and which primary rows lie inside it (by hand
    from the two files); then a floor that is not 0 is said to break the primary family's reading."""
    import random
    from bench.render import Study, ci, num, numbers, render_template
    tmp_path, finals = analysed
    hosts = {seed: "AMD EPYC" if seed < 613 else "Intel(R) Xeon(R) Processor @ 2.50GHz" for seed in design.STUDY_SEEDS}  # each seed's study class

    def write_floor(offset):
        for width in (64, 128):
            dense = {(width, "dense", seed): finals[width, "ref24", seed] + offset + random.Random(f"f{width}{seed}").gauss(0, 0.004)
                     for seed in design.STUDY_SEEDS}
            for old in (tmp_path / "runs").glob(f"*-w{width}_dense-*"):
                shutil.rmtree(old)
            fake_study_runs(tmp_path / "runs", dense, "a" * 40, hosts,
                            extra={"tp_size": 1, **design.rate(RATES[str(width)]["ref24"])})
        argv = [a.replace("<P>", "a" * 40).replace("bench/studies/width_alone/", f"{tmp_path}/") for a in plan_command("family_floor.json")]
        monkeypatch.setattr(sys, "argv", ["family", *argv])
        family.main()
        return {r["name"]: r for r in recompute_floor(tmp_path, "runs")}

    floor = write_floor(0.0)
    assert sorted(floor) == ["f128", "f64", "fd"] and all(r["n"] == 14 for r in floor.values())
    assert not any(r["verdict"].startswith("resolved") for r in floor.values())
    largest = {name: max(abs(v) for v in r["per_seed"].values()) for name, r in floor.items()}
    text = render_template("bench/studies/width_alone/findings.md.j2", data={"width_alone": Study(str(tmp_path))})
    assert f"| f128 | dense minus 24comm at n_embd 128 | 14 | {ci(floor['f128'])} | {num(largest['f128'])} |" in text
    assert f"| fd | its change from n_embd 64 to 128 | 14 | {ci(floor['fd'])} | {num(largest['fd'])} |" in text
    primary = json.load(open(tmp_path / "family_primary.json"))
    floor_of = {"c64_drop1": "f64", "c64_drop5": "f64", "c64_half": "f64", "c64_ladder": "f64", "c128_drop1": "f128",
                "c128_half": "f128", "c128_ladder": "f128", "d_drop1": "fd", "d_half": "fd", "d_ladder": "fd"}
    inside = [r["name"] for r in primary if max(abs(r["ci_low"]), abs(r["ci_high"])) <= largest[floor_of[r["name"]]]]
    unresolved = [name for name in inside if not next(r for r in primary if r["name"] == name)["verdict"].startswith("resolved")]
    assert 0 < len(inside) < len(primary)  # the fake effects put some rows inside and some out
    assert (f"Inside the floor (the 95% interval of the row's mean within plus or minus the largest per-seed |floor| at its width;\n"
            f"f64 for the c64 rows, f128 for c128, fd for the d rows): {', '.join(inside)}.") in text
    assert unresolved and f"Unresolved and inside, so each one's mean cost is within this\nhost's noise (not \"no effect\"): {', '.join(unresolved)}." in text
    assert "is resolved from 0" not in text
    assert "and 154 runs in the study's run folder committed (126 study, 28 noise floor).**" in text  # 14 x 9 and 14 x 2
    data = numbers()
    data["width_alone"] = Study(str(tmp_path))
    row = next(line for line in render_template("bench/templates/readme_answers.md.j2", data=data).splitlines()
               if "Does it hold as the model grows?" in line)
    assert f"Noise floor (dense minus 24comm, same seed, plan amendment 2): 64 {ci(floor['f64'])}, 128 {ci(floor['f128'])} |" in row
    floor = write_floor(0.05)  # dense ends 0.05 above 24comm at every seed: not the same function
    assert floor["f64"]["verdict"].startswith("resolved") and floor["fd"]["verdict"] == "unresolved at this power"
    text = render_template("bench/studies/width_alone/findings.md.j2", data={"width_alone": Study(str(tmp_path))})
    assert "**The floor is resolved from 0 (f64, f128): a flag that dense and 24comm may not compute the same function" in text
    assert "verdicts stand as computed but are\nheld, not read, until it is explained" in text
    assert "Inside the floor" not in text and "only the width changes?** Held, not read: the noise floor above is resolved from 0" in text


PRIMARY = [STUDY] if os.path.exists(os.path.join(STUDY, "family_primary.json")) else []


@pytest.mark.parametrize("study", PRIMARY)
def test_the_committed_primary_family_is_what_its_run_logs_give(study):
    recompute_primary(study, "runs")


@pytest.mark.parametrize("study", PRIMARY)
def test_the_committed_per_run_table_is_what_the_run_logs_give(study):
    """findings.md's exploratory table: each study run's last logged val loss (its metrics.jsonl, read here without the
    project's code), each setting's median and its highest run's distance above it, to the 3 decimals it shows."""
    import statistics
    text = open(os.path.join(study, "findings.md")).read()
    rows = [line for line in text.splitlines() if re.match(r"\| w\d+_\w+ \| \d\.\d{3} \|", line)]
    header = next(line for line in text.splitlines() if line.startswith("| setting | 600 |"))
    seeds = [int(cell) for cell in header.strip("| ").split(" | ")[1:-2]]
    assert len(rows) == 9 and seeds == list(range(600, 614))
    for row in rows:
        cells = row.strip("| ").split(" | ")
        logged = {seed: final(os.path.join(study, "runs", f"shakespeare_char_24comm-{cells[0]}-s{seed}")) for seed in seeds}
        assert cells[1:-2] == [f"{logged[seed]:.3f}" for seed in seeds], cells[0]
        median = statistics.median(logged.values())
        assert cells[-2:] == [f"{median:.3f}", f"{max(logged.values()) - median:.3f}"], cells[0]


NAMES = {"drop1": "1comm", "drop5": "5comm", "half": "half the channels", "ladder": "ladder"}


def test_the_first_screens_answer_from_the_primary_family_once_it_is_analysed(analysed):
    """README's and RESULTS' row "Does it hold as the model grows?" come from family_primary.json (the plan's reading
    of d_ladder, the rates each setting ran at) once it exists; the scale study's confounded line is gone from them."""
    from bench.render import Study, ci, numbers, render_template
    data = numbers()
    data["width_alone"] = Study(str(analysed[0]))
    d = {r["name"]: r for r in json.load(open(analysed[0] / "family_primary.json"))}
    for template in ("bench/templates/readme_answers.md.j2", "bench/templates/results_answers.md.j2"):
        row = next(line for line in render_template(template, data=data).splitlines() if "Does it hold as the model grows?" in line)
        said = {k: "resolved" if d[k]["verdict"].startswith("resolved") else "unresolved" for k in ("d_drop1", "d_half")}
        assert (f"ladder's cost rises: {ci(d['d_ladder'])} nats; 1comm {ci(d['d_drop1'])} ({said['d_drop1']}), "
                f"half the channels {ci(d['d_half'])} ({said['d_half']})") in row
        for w in ("64", "128"):  # each width's resolved costs, in the family's order, and none of its unresolved ones
            hits = [f"{NAMES[k.split('_', 1)[1]]} ends {'above' if r['mean'] > 0 else 'below'} 24comm, {ci(r)}"
                    for k, r in d.items() if k.startswith(f"c{w}_") and r["verdict"].startswith("resolved")]
            assert hits or w == "64", "the fake seeds resolve ladder's cost at 128: the clause must list it"
            assert f"at {w} {' and '.join(hits) if hits else 'no cost is resolved'}" in row
        assert "n_embd 64: ref24 0.02, drop1 0.02, drop5 0.01, half 0.02, ladder 0.005; n_embd 128: ref24 0.01" in row
        assert "scale" in row and "rate, progress and arithmetic" not in row and "per doubling" not in row
        assert "Not yet set against a noise floor measured in these classes (plan amendment 2 adds one)" in row
    for template in ("bench/templates/readme_answers.md.j2", "bench/templates/results_answers.md.j2"):
        text = render_template(template, data=data)
        assert "unresolved as an effect of width" not in text.lower() and "not yet a variable" not in text
        assert "grows is unresolved" not in text
        assert "width_alone/findings.md" in text
    readme = render_template("bench/templates/readme_answers.md.j2", data=data)
    assert "seeds 600-612" in readme  # the classes of the study's seeds, named
    for confound in ("at 24comm's rate there", "tokens per parameter at 64", "in bfloat16", "is not an effect of width"):
        assert confound in readme, confound  # the scale study's line, cited with what else changed


def test_the_budget_projects_the_arms_left_from_the_classs_own_run_times_and_cuts_in_the_plans_order(tmp_path, monkeypatch, capsys):
    """bench.studies.width_alone.budget: per-run seconds are the class's medians (another class's runs ignored), a
    width it has not run is scaled by the plan's ratio, a horizon run is 4x; the arms left are cut in the plan's
    order until they fit the sessions left, and the primary arms never."""
    from bench.studies.width_alone import budget
    amd = {"device": "cpu", "host": "AMD EPYC", "cpu_capability": "AVX2", "dtype": "float32", "tf32": False, "deterministic": False}

    def run(folder, name, seconds, numerics=amd, resumed=False):
        (tmp_path / folder / name).mkdir(parents=True)
        (tmp_path / folder / name / "result.json").write_text(json.dumps({"final": {"time_s": seconds}}))
        info = {"numerics": numerics, **({"earlier_parts": [{"numerics": numerics}]} if resumed else {})}
        (tmp_path / folder / name / "run_info.json").write_text(json.dumps(info))

    for i, seconds in enumerate((600, 700, 650)):  # median 650 at n_embd 64
        run("tuning/runs", f"shakespeare_char_24comm-w64_ref24_lr0.01-s{500 + i}", seconds)
    run("tuning/runs", "shakespeare_char_24comm-w64_ladder_lr0.01-s500", 100, dict(amd, cpu_capability="AVX512"))
    run("tuning/runs", "shakespeare_char_24comm-w64_half_lr0.01-s500", 10, resumed=True)  # its clock restarted: not timed
    run("runs", "shakespeare_char_24comm-w64h_drop5-s600", 9999, dict(amd, cpu_capability="AVX512"))  # H5, other class
    (tmp_path / "chosen_rates.json").write_text('{"64": null, "128": null}')
    (tmp_path / "sessions.md").write_text("# Sessions\n\n- 2026-12-02 | ...\n- 2026-12-03 (04:16-06:50 UTC) | ...\n"
                                         "a line that is not a session | ...\n")
    label = "cpu AMD EPYC AVX2, float32"
    monkeypatch.setattr(sys, "argv", ["budget", "--study", str(tmp_path), "--class", label])
    budget.main()
    out = capsys.readouterr().out
    lines = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
    s128 = 650 * 784 / 309
    assert lines["T64"] == f"| T64 | 5 | 64 | 650 | {64 * 650 / 3600:.1f} | {64 * 650 / 3600 / 5:.1f} |"  # 5 done, 3 timed
    assert lines["S128"] == f"| S128 | 0 | 56 | {s128:.0f} | {56 * s128 / 3600:.1f} | {56 * s128 / 3600 / 5:.1f} |"
    assert lines["H5"] == f"| H5 | 1 | 7 | 2600 | {7 * 2600 / 3600:.1f} | {7 * 2600 / 3600 / 5:.1f} |"
    assert "18 of the plan's 20 CPU sessions left (2 used)" in out
    assert lines["F128"] == f"| F128 | 0 | 14 | {s128:.0f} | {14 * s128 / 3600:.1f} | {14 * s128 / 3600 / 5:.1f} |"
    total = (64 * 650 + 57 * s128 + 70 * 650 + 56 * s128 + 32 * 2600 + 14 * 650 + 14 * s128 + 7 * 2600 + 56 * 650
             + 42 * s128) / 3600 / 5
    assert f"all arms: {total:.1f} sessions" in out
    primary = (64 * 650 + 57 * s128 + 70 * 650 + 56 * s128) / 3600 / 5
    assert f"cut, in the plan's order: A128, A64, H5, F, H -> {primary:.1f} sessions" in out and "amended" not in out
    rows, cuts, fits, need, left = budget.project(budget.committed_runs(str(tmp_path)), label, {}, 16)  # 4 sessions left
    assert cuts == ["A128", "A64", "H5", "F", "H", "seeds 612-613"] and not fits  # the primary arms stay
    assert need == pytest.approx((64 * 650 + 57 * s128 + (60 * 650 + 48 * s128)) / 3600 / 5)  # 612-613's 10 + 8 runs go
    # mid-study: seeds 600-611 whole at both widths, the rates chosen (ladder's and half's own at 128 differ from
    # 24comm's: the second reading at 128 is 2 x 14 runs); cutting seeds 612-613 then leaves nothing of S64 or S128
    rates_chosen = {"64": RATES["64"], "128": RATES["128"]}
    runs = [("S64", 64, label, 600.0, seed, False) for seed in range(600, 612) for _ in design.CPU[64]]
    runs += [("S128", 128, label, 1800.0, seed, False) for seed in range(600, 612) for _ in design.CPU[128]]
    rows, cuts, fits, need, left = budget.project(runs, label, rates_chosen, 19)
    by_arm = {r["arm"]: r for r in rows}
    assert (by_arm["S64"]["left"], by_arm["S128"]["left"], by_arm["A128"]["left"], by_arm["T64"]["left"]) == (10, 8, 28, 0)
    assert cuts == ["A128", "A64", "H5", "F", "H", "seeds 612-613"] and fits and need == 0
    runs = [r for r in runs if r[4] < 606] + [("S64", 64, label, 600.0, 612, False)] * 2 + [("S128", 128, label, 1800.0, 613, False)] * 4
    rows, cuts, fits, need, left = budget.project(runs, label, rates_chosen, 16)  # 612's and 613's runs done save nothing
    assert cuts[-1] == "seeds 612-613" and need == pytest.approx((30 * 600 + 24 * 1800) / 3600 / 5)
    monkeypatch.setattr(sys, "argv", ["budget", "--study", str(tmp_path), "--class", "cpu Intel AVX512, float32"])
    with pytest.raises(SystemExit, match="no committed run of class 'cpu Intel AVX512, float32'"):
        budget.main()


def test_the_budget_says_which_seeds_a_host_of_its_class_may_take_for_the_arms_after_the_study():
    """plan.md: a seed's H, F (amendment 2), H5, A64 and A128 runs run in its study runs' class, and the horizon's 8 seeds are the
    first 8 that a host of their class reaches. A seed counts once its nine study runs are in, all of the class."""
    from bench.studies.width_alone import budget
    x, y = "cpu X AVX2, float32", "cpu Y AVX512, float32"
    runs = []
    for seed, label, n64 in ((600, x, 5), (601, x, 5), (602, x, 3), (603, y, 5), (612, x, 5)):  # 602 is not whole
        runs += [("S64", 64, label, 1.0, seed, False)] * n64 + [("S128", 128, label, 1.0, seed, False)] * 4
    runs += [("S64", 64, y, 1.0, 613, False)] * 5 + [("S128", 128, x, 1.0, 613, False)] * 4  # two classes: no one's
    runs += [("H", 64, y, 1.0, seed, False) for seed in (603, 604, 605, 606, 607, 608, 609) for _ in design.HORIZON]
    runs += [("A64", 64, x, 1.0, 600, False)]  # 600's one run at 24comm's rate at 64 is in
    rates_chosen = {"64": RATES["64"], "128": RATES["128"]}
    assert [s for s, lr in RATES["64"].items() if lr != RATES["64"]["ref24"]] == ["drop5", "ladder"]  # 2 a seed at 64
    assert [s for s, lr in RATES["128"].items() if lr != RATES["128"]["ref24"]] == ["half", "ladder"]  # and at 128
    whole, here = budget.runnable_here(runs, x, rates_chosen)
    assert whole == [600, 601, 612]
    assert here["H"] == ([600], len(design.HORIZON)) and here["H5"] == ([600], 1)  # 7 horizon seeds taken: one left
    assert here["A64"] == ([600, 601, 612], 5) and here["A128"] == ([600, 601, 612], 6)
    assert here["F64"] == here["F128"] == ([600, 601, 612], 3)  # the noise floor (amendment 2): one run a seed a width
    assert budget.next_sweep(here, "/s").endswith("python -m bench.sweep bench/studies/width_alone/sweep_horizon_w64.py "
                                                   "--slots 2 --threads 1 --no_summary --seeds 600")  # H first
    floor_next = budget.next_sweep({**here, "H": ([], 0)}, "/s")
    assert "WIDTH_ALONE_STATE=/s python -m bench.sweep /s/sweep_floor.py" in floor_next and floor_next.endswith("--seeds 600-601,612")
    assert budget.next_sweep({arm: ([], 0) for arm in here}) is None
    ceilings = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "HOME": "/h"}  # amendment 3: they go along
    assert budget.next_sweep(here, "/s", ceilings).startswith(
        f"cd {budget.WORKTREE} && ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 WIDTH_ALONE_STATE=/s python")
    runs += [("H", 64, x, 1.0, 600, False)] * len(design.HORIZON)  # the eighth: no more horizon seeds, 600's H5 stays
    whole, here = budget.runnable_here(runs, x, {"64": None, "128": None})
    assert here["H"] == ([], 0) and here["H5"] == ([600], 1) and here["A64"] == ([600, 601, 612], None)
    assert budget.runnable_here(runs, "cpu Z AVX512, float32", rates_chosen)[0] == []


def test_the_second_reading_and_the_gpu_ladder_render_from_their_files(analysed):
    """S2's table and its cross-check with bench.contrasts (the same means, or said to differ), and S4's trend rows
    with their widths and a "not a line" verdict, from family files as family.py writes them."""
    from bench.render import Study, render_template
    tmp_path, _ = analysed
    record = lambda name, kind, a, b, mean, verdict, **more: dict(  # noqa: E731
        name=name, kind=kind, a=f"train_shakespeare_char_24comm/{a}", b=f"train_shakespeare_char_24comm/{b}", n=14,
        seeds=design.STUDY_SEEDS, mean=mean, ci_low=mean - 0.01, ci_high=mean + 0.01, p=0.01, p_holm=0.03, verdict=verdict, **more)
    at24 = [record("a64_ladder", "cost", "w64_ladder_at24", "w64_ref24", 0.15, "resolved: A higher"),
            record("a128_half", "cost", "w128_half", "w128_ref24", 0.002, "unresolved at this power")]
    (tmp_path / "family_at24.json").write_text(json.dumps(at24))
    (tmp_path / "contrasts_at24.json").write_text(json.dumps(at24))
    (tmp_path / "family_gpu.json").write_text(json.dumps([record("gt_ladder", "trend", "w{W}_ladder", "w{W}_ref24", 0.1,
                                                                 "not a line: the cost does not move by the same amount with each doubling; no trend is read",
                                                                 widths=[64, 128, 256, 512])]))
    text = lambda: render_template("bench/studies/width_alone/findings.md.j2", data={"width_alone": Study(str(tmp_path))})  # noqa: E731
    found = text()
    assert "## S2: the cost at 24comm's rate (Holm over 2)" in found and "S3:" not in found
    assert "| a64_ladder | w64_ladder_at24 | w64_ref24 | 14 | +0.1500 [+0.1400, +0.1600] | 0.03 | resolved: A higher |" in found
    assert "The cross-check with `bench.contrasts` ([contrasts_at24.json](contrasts_at24.json)) gives the same means." in found
    assert "| gt_ladder | w{W}_ladder | widths 64, 128, 256, 512 | 14 | +0.1000 [+0.0900, +0.1100] | 0.03 | not a line:" in found
    at24[1]["mean"] += 1e-6
    (tmp_path / "contrasts_at24.json").write_text(json.dumps(at24))
    assert "gives DIFFERENT means: this table is not read until that is explained" in text()
