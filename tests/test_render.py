"""bench/render.py: every number a reader sees in a rendered region (the findings, RESULTS.md's answers and
summary, the README's answers table and its figure) is the one its study's files hold today; a number edited
by hand, a template naming a number no file provides and a result typed into a template all fail here."""

import glob
import os
import re

import jinja2
import pytest

from bench import render

# decimals a template may write itself: settings and definitions, not results
SETTINGS = {"1.01", "1.02", "0.6M", "2.5M", "2.4M", "12.3M", "0.3%", "0.99%", "1.4M"}  # sizes, token counts, a target factor, a rate


def regions():
    """(document, template) for every rendered region."""
    out = []
    for path in render.documents():
        with open(path) as f:
            out += [(os.path.relpath(path, render.ROOT), m.group(1)) for m in render.START.finditer(f.read())]
    return out


def test_every_rendered_region_is_what_its_template_and_the_studies_give_today():
    differ = render.render_all(write=False)
    assert differ == [], f"{differ} differ from their templates and the studies' files: run `python -m bench.render`"


def test_every_findings_and_the_first_screens_are_rendered():
    """Each study's findings.md is one rendered region (a template beside it), and so are RESULTS.md's
    answers and the README's answers table: no study number outside a template."""
    rendered = {document for document, _ in regions()}
    findings = {os.path.relpath(p, render.ROOT) for p in render.documents() if p.endswith("findings.md")}
    assert findings and findings <= rendered, sorted(findings - rendered)
    assert {"README.md", os.path.join("bench", "RESULTS.md")} <= rendered
    for path in findings:
        assert open(os.path.join(render.ROOT, path)).read().startswith("<!-- rendered from "), path


def test_a_number_edited_by_hand_fails_the_check(tmp_path):
    path = os.path.join(render.ROOT, "bench", "studies", "frontier", "findings.md")
    text = open(path).read()
    number = re.search(r"[-+]\d\.\d{4} \[", text).group(0)  # the first interval's mean
    edited = tmp_path / "findings.md"
    edited.write_text(text.replace(number, number.replace("0", "9", 1), 1))
    assert render.render_all(write=False, paths=[str(edited)]) == [os.path.relpath(edited, render.ROOT)]
    assert edited.read_text() != text  # the check wrote nothing
    edited.write_text(text)
    assert render.render_all(write=False, paths=[str(edited)]) == []


def test_a_template_naming_a_number_no_study_provides_fails_with_its_line():
    env = render.environment()
    env.loader = jinja2.DictLoader({"t.md.j2": "H9 {{ cliff.H9 | ci }}\nH99 {{ cliff.H99 | ci }}\n"})
    with pytest.raises(render.RenderError, match=r"t.md.j2, line 2: names a number no study file provides"):
        render.render_template("t.md.j2", env)
    env.loader = jinja2.DictLoader({"t.md.j2": "{{ cliff.H9 | ci }} p {{ cliff.H9.p_holm | p }}"})
    h9 = render.numbers()["cliff"]["H9"]
    assert render.render_template("t.md.j2", env) == \
        f"{h9['mean']:+.4f} [{h9['ci_low']:+.4f}, {h9['ci_high']:+.4f}] p {render.p(h9['p_holm'])}"


def templates():
    """Every template a document renders: those its regions name, and every one in bench/templates/ (one is
    included by another: RESULTS.md's one-paragraph summary)."""
    import glob
    named = {template for _, template in regions()}
    return sorted(named | {os.path.relpath(p, render.ROOT) for p in glob.glob(os.path.join(render.ROOT, "bench", "templates", "*.j2"))})


@pytest.mark.parametrize("template", templates())
def test_a_template_types_no_result(template):
    """Prose stays prose, every figure in it comes from a file: outside its {{ }} and code, a template
    writes no decimal but a setting's (SETTINGS)."""
    text = open(os.path.join(render.ROOT, template)).read()
    prose = re.sub(r"{{.*?}}|{%.*?%}|{#.*?#}|```.*?```|`[^`\n]*`|\([^()\s]*\.(?:md|png|json|csv)\)|\"[^\"\n]*\"", " ",
                   text, flags=re.S)  # names, code, links, and a quoted (withdrawn) claim
    typed = [d for d in re.findall(r"(?<![\w.])[-+]?\d+\.\d+(?![.\d])[%M]?", prose) if d.lstrip("+-") not in SETTINGS]
    assert not typed, f"{template} types {typed}: name them from a study's file (bench/render.py)"


def test_the_filters_write_numbers_as_the_findings_do():
    assert render.ci({"mean": 0.02584, "ci_low": 0.01071, "ci_high": 0.04104}) == "+0.0258 [+0.0107, +0.0410]"
    assert render.ci({"paired_diff_mean": "-0.5", "paired_ci_low": "-0.61", "paired_ci_high": "-0.4"}, 1) == \
        "-0.5 [-0.6, -0.4]"
    assert (render.p(0.00015), render.p(0.0426), render.p(6.7e-6), render.p(1.0)) == ("0.00015", "0.043", "6.7e-06", "1")
    assert render.seeds([9, 10, 11, 12, 18, 20, 21]) == "9-12, 18, 20-21"
    assert render.span([{"ci_low": -0.01, "ci_high": 0.02}, {"ci_low": -0.024, "ci_high": 0.005}]) == "[-0.0240, +0.0200]"
    with pytest.raises(render.RenderError, match="empty"):
        render.num(None)


def test_a_contrast_name_two_family_files_use_is_named_by_its_file(tmp_path):
    """The scale study names its contrasts alike at every width (family_w64.json and family_w512.json both
    hold drop1): each is reached through its file's stem; the bare name, which would be either, is not."""
    import json
    for width, mean in ((64, 0.04), (512, 0.002)):
        (tmp_path / f"family_w{width}.json").write_text(json.dumps([{"name": "drop1", "mean": mean}, {"name": f"only{width}", "mean": 1}]))
    study = render.Study(str(tmp_path))
    assert study["family_w64"]["drop1"]["mean"] == 0.04 and study["family_w512"]["drop1"]["mean"] == 0.002
    assert "drop1" not in study and study["only64"]["mean"] == 1


def test_every_relative_link_in_the_docs_resolves():
    """A reader follows the links from the README, its docs/ pages and RESULTS.md to each study's findings,
    plan and runs: every relative link in a tracked markdown file names a file or folder that exists (the
    templates in bench/templates/ are checked where they render, in the README and RESULTS.md)."""
    import subprocess
    files = subprocess.run(["git", "ls-files", "*.md", "*.md.j2"], cwd=render.ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    assert "README.md" in files and "bench/RESULTS.md" in files and "docs/configs.md" in files
    broken = []
    for name in files:
        if name.startswith("bench/templates/"):
            continue
        with open(os.path.join(render.ROOT, name)) as f:
            text = f.read()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#") or "{{" in target:
                continue  # a web address, an anchor in the page, or a link a template fills in
            if not os.path.exists(os.path.join(render.ROOT, os.path.dirname(name), target.split("#")[0])):
                broken.append(f"{name}: ({target})")
    assert broken == []


def test_the_figure_plots_what_the_studies_give_today(tmp_path):
    """The README's figure (bench/figure.py) carries the numbers it plots; they are today's (the check
    compares them, and the bytes only where this matplotlib drew the file: SVG bytes change between
    matplotlib versions); a drawing is the same bytes twice; a study number changed makes it stale."""
    import json
    import shutil
    from bench import figure
    data = render.numbers()
    today = json.loads(json.dumps(figure.points(data)))
    plotted, version = figure.embedded(open(os.path.join(render.ROOT, figure.PATH)).read())
    assert plotted == today, "the figure is not what the studies' files give: run `python -m bench.render`"
    assert [p["syncs"] for p in today["by_sync_count"][0]["points"]] == [18, 12, 11, 10, 9, 7, 5, 2, 1]
    assert [(w["width"], w["numerics"], w["learning_rate"]) for w in today["by_width"]] == \
        [(64, "CPU float32", 0.02), (128, "CPU float32", 0.01), (512, "GPU bfloat16", 0.00125)]
    ladder = {w["width"]: next(s for s in w["settings"] if s["setting"] == "ladder") for w in today["by_width"]}
    assert ladder[64]["mean"] == round(data["scale"]["family_w64"]["ladder"]["mean"], figure.DIGITS)
    assert figure.draw(today) == figure.draw(today)
    (tmp_path / "docs").mkdir()
    shutil.copy(os.path.join(render.ROOT, figure.PATH), tmp_path / figure.PATH)
    assert not figure.stale(str(tmp_path), data, write=False)
    data["cliff"]["family_H2-H10"]["H10"] = dict(data["cliff"]["family_H2-H10"]["H10"], mean=0.5, ci_low=0.4, ci_high=0.6)
    assert figure.stale(str(tmp_path), data, write=False)
    assert figure.embedded((tmp_path / figure.PATH).read_text())[0] == today  # the check wrote nothing
    assert figure.stale(str(tmp_path), data, write=True)
    assert not figure.stale(str(tmp_path), data, write=False)


def _answers(text):
    """The rows of the first answers table in a markdown text: [(question, the studies its row links)]."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| question |"))
    out = []
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        cells = line.split(" | ")
        out.append((cells[0][2:], sorted(re.findall(r"\[(\w+)\]\(", cells[-1]))))
    return out


def test_the_readme_is_read_in_five_minutes():
    """The README stays under 400 lines (the depth is in docs/, each page linked from it), and its first screen
    holds the two commands for a fresh machine, the figure and the answers table."""
    text = open(os.path.join(render.ROOT, "README.md")).read()
    lines = text.splitlines()
    assert len(lines) < 400, f"README.md has {len(lines)} lines: move the depth to a page in docs/"
    first = "\n".join(lines[:60])
    assert "./install.sh && python data/shakespeare_char/prepare.py && python train.py" in first
    assert "./install.sh test && python -m pytest" in first
    assert "![" in first and "(docs/costs_vs_24comm.svg)" in first
    assert "| question |" in first and lines.index(next(line for line in lines if line.startswith("| Does it hold"))) < 60
    pages = {os.path.basename(p) for p in glob.glob(os.path.join(render.ROOT, "docs", "*.md"))}
    assert pages and all(f"(docs/{page})" in text for page in pages), "a docs/ page the README does not link"


def test_the_readmes_answers_are_results_answers():
    """The README's answers table is RESULTS.md's first-screen table, one line a row: the same questions in the
    same order, each linking the studies RESULTS' row links."""
    readme = _answers(open(os.path.join(render.ROOT, "README.md")).read())
    results = _answers(open(os.path.join(render.ROOT, "bench", "RESULTS.md")).read())
    assert readme and readme == results


def test_the_planned_width_study_is_linked_once_its_plan_is_written(tmp_path):
    """The first screens name the study of width alone; they link it only once its folder holds a plan.md
    (a folder begun before its plan, or none, is named without a link that could point at nothing)."""
    env, data = render.environment(), render.numbers()
    texts = lambda: [render.render_template(f"bench/templates/{t}.md.j2", env, data)  # noqa: E731
                     for t in ("readme_answers", "results_answers")]
    data.pop("width_alone", None)
    assert all("bench/studies/width_alone/" in t and "[width_alone](" not in t for t in texts())
    (tmp_path / "width_alone").mkdir()
    data["width_alone"] = render.Study(str(tmp_path / "width_alone"))
    assert all("[width_alone](" not in t for t in texts())
    (tmp_path / "width_alone" / "plan.md").write_text("# plan\n")
    data["width_alone"] = render.Study(str(tmp_path / "width_alone"))
    readme, results = texts()
    assert "[width_alone](bench/studies/width_alone/plan.md)" in readme
    assert "[width_alone](studies/width_alone/plan.md)" in results


def test_a_studys_budget_per_width_is_its_shortest_runs_with_a_longer_arm_beside(tmp_path):
    """budget_by_width: the parameters and tokens its runs logged, per width; a horizon arm's longer runs in the same
    runs/ are kept under `longer` (not an error), while two parameter counts at one width are one."""
    import json

    def run(name, width, iters, params):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"n_embd": width, "max_iters": iters}))
        (tmp_path / name / "train.log").write_text(f"layout: dp=1 x tp=2 | params: {params}M | tokens/iter: 4,096 | optimizer: adamw\n")

    run("a", 64, 2400, "0.61"), run("b", 64, 600, "0.61"), run("c", 128, 600, "2.40")
    assert render.run_budgets(str(tmp_path)) == {
        64: {"params": 610000.0, "iters": 600, "tokens": 600 * 4096, "longer": {2400: 2400 * 4096}},
        128: {"params": 2400000.0, "iters": 600, "tokens": 600 * 4096}}
    run("d", 128, 2400, "2.39")
    with pytest.raises(render.RenderError, match="runs of n_embd 128 logged"):
        render.run_budgets(str(tmp_path))
    (tmp_path / "d" / "train.log").write_text("layout: dp=1 | params: 2.40M | tokens/iter: 4,096 |\n")
    assert render.run_budgets(str(tmp_path))[128]["longer"] == {2400: 2400 * 4096}
    run("e", 128, 600, "2.40")  # another run of one length that trained on twice the tokens an iteration
    (tmp_path / "e" / "train.log").write_text("layout: dp=1 | params: 2.40M | tokens/iter: 8,192 |\n")
    with pytest.raises(render.RenderError, match="'tokens': 2457600} and .*'tokens': 4915200"):
        render.run_budgets(str(tmp_path))


def test_a_studys_commits_are_what_each_settings_runs_recorded(tmp_path):
    """commits: per setting, the commits its runs' run_info.json recorded, so a rerun setting's later code is named
    beside the runs it pairs with; a run without a result is not counted, one without a commit says so."""
    import json

    def run(name, setting, commit):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run_info.json").write_text(json.dumps({"git_commit": commit} if commit else {}))
        if setting is not None:
            (tmp_path / name / "result.json").write_text(json.dumps({"setting": setting}))

    run("a-s1", "b1", "80241c2" + "0" * 33), run("a-s2", "b1", "80241c2" + "1" * 33)
    run("b-s1", "b1_sp", "5a3f894" + "0" * 33), run("b-s2", "b1_sp", "9b1348d" + "0" * 33)
    run("c-s1", None, "ffffff0" + "0" * 33), run("d-s1", "lossless", None)
    assert render.run_commits(str(tmp_path)) == {"b1": ["80241c2"], "b1_sp": ["5a3f894", "9b1348d"], "lossless": ["unrecorded"]}
