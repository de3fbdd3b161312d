"""
Numbers rendered, not typed (issue 47): every figure in a study's findings, in RESULTS.md's answers and
summary, and in the README's answers table and figure comes from a file its analysis wrote.

A document holds rendered regions. Each starts with a marker naming its template and ends with
`<!-- end rendered -->`; its text is the template (Jinja2) rendered with the numbers of every study:

    <!-- rendered from bench/studies/cliff/findings.md.j2 by `python -m bench.render`: edit the template -->

    python -m bench.render            # rewrite every region of every document, and the README's figure
    python -m bench.render --check    # exit 1 naming each document that differs (the fast tier checks it)

The README's figure (docs/costs_vs_24comm.svg, bench/figure.py) is drawn from the same numbers and checked
with the documents: by the numbers it plots, and by its bytes where this matplotlib drew it.

What a template can name, per study folder `bench/studies/<study>/` (as `<study>.`, e.g. `cliff.H9`):
    <name>           a planned contrast: the records of every family*.json (bench.contrasts --json) by name
                     (where one family file uses the name; family_w512.drop1 always)
    <file stem>      any other json the analysis wrote (noise_floor, trend_min5 from bench.trend --json, ...)
                     and any other csv's rows (bench.sensitivity's sensitivity.csv)
    summary[<name>]  a setting's row of experiment_summary.csv (bench.summarize), by setting name
    runs[<run>]      a run's row there, by run name (shakespeare_char_24comm-bern0.01-s5)
    logged[<run>]    a run's first training-step record in its metrics.jsonl (bytes and syncs as logged)
    final_val_loss   {folder: last val loss} of loose runs kept beside the study (a rerun)
    classes          {numerics class: seeds} of its runs (bench.summary.class_label)
    classes_by_width {n_embd: {numerics class: seeds}} of its runs, for a study over widths (scale)
    commits          {setting: [commit, 7 characters]} each setting's runs recorded (run_info.json git_commit)
    budget_by_width  {n_embd: {params, iters, tokens}}: the parameters its runs logged, their iterations and
                     the tokens one run trains on, of its shortest runs (a longer arm's: `longer`)
    run_learning_rates  the learning rates its runs trained at (config.json), lowest first
    has_plan         whether its plan.md is written (a study folder begun before its plan has none)
    <subfolder>      the same for a subfolder's outputs (an interim: frontier.interim_cliff.frontier)
Functions, which compute from those numbers what the tools would: `best(frontier, network, gbps)` and
`setting(frontier, name)` (rows of a frontier.json), `costs(study, config, setting)` (lossy minus
lossless twin, per seed), `minus(a, b)`, `paired(diffs)`, `holm(ps)`, `power_at`, `seeds_needed`,
`t_quantile` (bench.stats), `welch(a, b)`, `correlation(a, b)`, `gpt2_projection` (bench.step_time).
A name that no file provides stops the rendering with the template's line: a sentence cannot outlive
its data.

Filters say how a number is written: `x | ci` "+0.0258 [+0.0107, +0.0410]" (a dict with mean, ci_low,
ci_high, or a summary row's paired columns), `x | num(4)` and `x | signed(4)` fixed decimals, `x | sig(2)` significant digits, `x | p` a
p value, `x | seeds` "9-18", `x | classes` each class's seeds, `[a, b] | span` the lowest to highest
bound of several intervals, `x | flip` B - A from A - B, `name | short` without the dataset,
`x | mean`. Templates type no result: tests/test_render.py fails on a decimal written into a
template's prose (settings such as the 1.02 target excepted).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import csv
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDIES = os.path.join(ROOT, "bench", "studies")
DOCUMENTS = ("README.md", "docs/*.md", "bench/RESULTS.md", "bench/studies/*/findings.md", "bench/studies/*/plan.md")
START = re.compile(r"<!-- rendered from (\S+) by `python -m bench.render`: edit the template -->\n")
END = "<!-- end rendered -->"


class RenderError(Exception):
    """A template naming a number no study provides, or a broken region: one line, the file named."""


class Study(dict):
    """One study's numbers: its contrasts by name, its other json files by stem, `summary` by setting."""

    def __init__(self, folder):
        super().__init__()
        self.folder = folder
        named = {}  # contrast name -> its record, or None where two family files use the name
        for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
            stem = os.path.splitext(os.path.basename(path))[0]
            with open(path) as f:
                data = json.load(f)
            if stem.startswith("family") and isinstance(data, list):
                self[stem] = {record["name"]: record for record in data}  # family_w512.drop1: always one
                for record in data:  # by name alone only where one family file names it
                    named[record["name"]] = None if record["name"] in named else record
            else:
                self[stem] = data
        self.update({name: record for name, record in named.items() if record is not None and name not in self})
        for path in sorted(glob.glob(os.path.join(folder, "*.csv"))):  # another tool's table: its rows
            if not path.endswith("experiment_summary.csv"):
                with open(path) as f:
                    self[os.path.splitext(os.path.basename(path))[0]] = list(csv.DictReader(f))
        path = os.path.join(folder, "experiment_summary.csv")
        if os.path.exists(path):
            with open(path) as f:
                every = list(csv.DictReader(f))
            self["runs"] = {row["run"]: row for row in every if row["kind"] == "run"}  # by run name: one seed's
            rows = [row for row in every if row["kind"] == "aggregate"]
            # by setting name without train_: shakespeare_char_24comm/bern0.01 (bench.summary.setting_name)
            stem = lambda row: os.path.splitext(os.path.basename(row["config"]))[0].removeprefix("train_")  # noqa: E731
            self["summary"] = {prefix + stem(row) + (f"/{row['setting']}" if row["setting"] else ""): row
                               for row in rows for prefix in ("", "train_")}  # as bench.contrasts names it too
        self["name"] = os.path.basename(folder)
        self["has_plan"] = os.path.exists(os.path.join(folder, "plan.md"))  # a study is planned once its plan is written
        self["classes"] = run_classes(os.path.join(folder, "runs"))
        self["classes_by_width"] = run_classes(os.path.join(folder, "runs"), by="n_embd")
        self["budget_by_width"] = run_budgets(os.path.join(folder, "runs"))
        self["commits"] = run_commits(os.path.join(folder, "runs"))
        self["run_learning_rates"] = sorted({json.load(open(c))["learning_rate"]
                                             for c in glob.glob(os.path.join(folder, "runs", "*", "config.json"))})
        self["logged"] = {}  # each run's first training-step record (what it logged: bytes, exposed syncs)
        for log in sorted(glob.glob(os.path.join(folder, "runs", "*", "metrics.jsonl"))):
            with open(log) as f:
                step = next((json.loads(line) for line in f if '"val_loss"' not in line and line.strip()), None)
            self["logged"][os.path.basename(os.path.dirname(log))] = step
        finals = {}  # a loose run kept beside the study (a rerun): its last logged val loss, by folder name
        for log in sorted(glob.glob(os.path.join(folder, "*", "metrics.jsonl"))):
            with open(log) as f:
                evals = [json.loads(line) for line in f if '"val_loss"' in line]
            finals[os.path.basename(os.path.dirname(log))] = evals[-1]["val_loss"] if evals else None
        if finals:
            self["final_val_loss"] = finals
        for sub in sorted(glob.glob(os.path.join(folder, "*", ""))):  # an interim's or a part's outputs
            name = os.path.basename(os.path.dirname(sub))
            if name != "runs" and any(glob.glob(os.path.join(sub, pattern)) for pattern in ("*.json", "*.csv", "*/metrics.jsonl")):
                self[name] = Study(os.path.dirname(sub))


def run_classes(runs, by=None):
    """{numerics class: [seeds]} of a study's runs (bench.summary.class_label of each run_info.json);
    by: a config key to split them by first, {value: {numerics class: [seeds]}} (by='n_embd': per width)."""
    from bench.summary import class_label
    out = {}
    for config in sorted(glob.glob(os.path.join(runs, "*", "config.json"))):
        info = os.path.join(os.path.dirname(config), "run_info.json")
        with open(config) as f:
            config = json.load(f)
        label = class_label(json.load(open(info)) if os.path.exists(info) else {})
        found = out.setdefault(config[by], {}) if by else out
        if config["seed"] not in found.setdefault(label, []):
            found[label].append(config["seed"])
    if by:
        return {value: {label: sorted(seeds) for label, seeds in found.items()} for value, found in sorted(out.items())}
    return {label: sorted(found) for label, found in out.items()}


def run_commits(runs):
    """{setting: sorted commits (7 characters)} that a study's runs recorded: which code each setting ran
    (a rerun's setting at a later commit than the runs it pairs with, said so where the findings cite it)."""
    out = {}
    for info in sorted(glob.glob(os.path.join(runs, "*", "run_info.json"))):
        result = os.path.join(os.path.dirname(info), "result.json")
        if os.path.exists(result):
            setting = json.load(open(result)).get("setting") or ""
            commit = json.load(open(info)).get("git_commit")
            out.setdefault(setting, set()).add(commit[:7] if commit else "unrecorded")
    return {setting: sorted(commits) for setting, commits in sorted(out.items())}


def run_budgets(runs):
    """{n_embd: {params, iters, tokens}} of a study's runs: the parameters their startup line logged (train.log's
    `params: 0.61M`) and the tokens a run trains on (its `tokens/iter` times max_iters), for the runs of the fewest
    iterations at that width (the study's budget); a longer arm's (a horizon) under `longer`, {iters: tokens}.
    A width whose runs logged two parameter counts, or two token counts at one length, is an error."""
    out = {}
    for config in sorted(glob.glob(os.path.join(runs, "*", "config.json"))):
        log = os.path.join(os.path.dirname(config), "train.log")
        if not os.path.exists(log):
            continue
        with open(config) as f:
            config = json.load(f)
        with open(log) as f:
            line = next((line for line in f if line.startswith("layout:")), "")
        params, tokens = re.search(r"\| params: ([\d.]+)M \|", line), re.search(r"\| tokens/iter: ([\d,]+) \|", line)
        if not (params and tokens):
            continue
        found = dict(params=float(params.group(1)) * 1e6, iters=config["max_iters"],
                     tokens=int(tokens.group(1).replace(",", "")) * config["max_iters"])
        width = config["n_embd"]
        lengths = out.setdefault(width, {})
        if any(f["params"] != found["params"] for f in lengths.values()) or lengths.setdefault(found["iters"], found) != found:
            raise RenderError(f"{runs}: runs of n_embd {width} logged {lengths.get(found['iters'], next(iter(lengths.values())))} and {found}")
    budgets = {}
    for width, lengths in sorted(out.items()):
        shortest = min(lengths)
        budgets[width] = {**lengths[shortest], **({"longer": {i: f["tokens"] for i, f in sorted(lengths.items()) if i != shortest}}
                                                  if len(lengths) > 1 else {})}
    return budgets


def numbers():
    """Every study's numbers, by the study folder's name."""
    return {os.path.basename(folder): Study(folder) for folder in sorted(glob.glob(os.path.join(STUDIES, "*")))
            if os.path.isdir(folder)}


# helpers a template calls on a frontier.json (bench.frontier): which row, not how it is written
def best(frontier, network, gbps):
    """The fastest eligible setting on a network at a bandwidth."""
    found = [b for b in frontier["best"] if b["network"] == network and b["gbps"] == gbps]
    if not found:
        raise RenderError(f"frontier.json has no best setting for {network!r} at {gbps} Gb/s")
    return found[0]


def costs(study, config, setting, twin="lossless"):
    """{seed: final val loss of a study's run minus its twin's of the same config and seed}, from the
    summary's run rows (bench.tolerance's pairing: a lossy run against the lossless run of its config)."""
    runs, out = study["runs"], {}
    for name, row in runs.items():
        stem, _, seed = name.rpartition("-s")
        if stem == f"shakespeare_char_{config}-{setting}" and f"shakespeare_char_{config}-{twin}-s{seed}" in runs:
            out[int(seed)] = float(row["final_val_loss"]) - float(runs[f"shakespeare_char_{config}-{twin}-s{seed}"]["final_val_loss"])
    if not out:
        raise RenderError(f"{study['name']}: no {config} {setting} run has a {twin} twin")
    return dict(sorted(out.items()))


def minus(a, b):
    """[a[seed] - b[seed]] over the seeds both have: one per-seed cost minus another (a contrast)."""
    return [a[seed] - b[seed] for seed in a if seed in b]


def correlation(a, b):
    """Pearson's r of two equal-length lists (numpy)."""
    import numpy as np
    return float(np.corrcoef([float(x) for x in a], [float(y) for y in b])[0, 1])


def mean(values):
    values = [float(v) for v in values]
    return sum(values) / len(values)


def welch(a, b):
    """Welch's t test of two independent samples: {t, p} (scipy)."""
    from scipy.stats import ttest_ind
    result = ttest_ind(list(a), list(b), equal_var=False)
    return dict(t=float(result.statistic), p=float(result.pvalue))


def setting(frontier, name):
    """A frontier row by any of its names (with or without train_)."""
    name = name.removeprefix("train_")
    found = [s for s in frontier["settings"] if name in s.get("aliases", [s["name"]])]
    if len(found) != 1:
        raise RenderError(f"frontier.json has {len(found)} settings named {name!r}")
    return found[0]


# filters: how a number is written; which number it is comes from the template
def _value(x):
    if isinstance(x, str):
        x = float(x)
    if x is None:
        raise RenderError("a number the template names is empty in its file (None)")
    return x


def num(x, digits=4):
    return f"{_value(x):.{digits}f}"


def sig(x, digits=2):
    """`digits` significant digits: 4.03 -> '4', 0.0649 -> '0.065' (a ratio written as "about")."""
    return f"{_value(x):.{digits}g}"


def signed(x, digits=4):
    return f"{_value(x):+.{digits}f}"


def ci(stats, digits=4, sign=True, mean=True):
    """'+0.0258 [+0.0107, +0.0410]' from a dict with mean, ci_low and ci_high (or a summary row's paired_ columns)."""
    keys = ("mean", "ci_low", "ci_high") if "ci_low" in stats else ("paired_diff_mean", "paired_ci_low", "paired_ci_high")
    spec = f"{'+' if sign else ''}.{digits}f"
    m, lo, hi = (_value(stats[k]) for k in keys)
    return (f"{m:{spec}} " if mean else "") + f"[{lo:{spec}}, {hi:{spec}}]"


def p(x, digits=2):
    """A p value as the findings write it: `digits` significant digits, scientific below 1e-4."""
    x = _value(x)
    return f"{x:.{digits - 1}e}" if x < 1e-4 else f"{x:.{digits}g}"


def seeds(values):
    """[9, 10, ..., 18] -> '9-18'; gaps as commas: '1-4, 7'."""
    values, parts = sorted(int(v) for v in values), []
    for v in values:
        if parts and v == parts[-1][1] + 1:
            parts[-1][1] = v
        else:
            parts.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


def short(name):
    """A setting's name without its dataset: 'shakespeare_char_24comm/half_bern1' -> '24comm/half_bern1'."""
    return re.sub(r"^(train_)?shakespeare_char_?", "", name) or "dense"


def verdict(text):
    """bench.contrasts' verdict in a table: 'resolved: A higher' -> 'resolved: higher'."""
    return text.replace("resolved: A ", "resolved: ")


def flip(stats):
    """B - A from A - B (a contrast, or a summary row's paired columns): the mean negated, the interval turned round."""
    m, lo, hi = (stats[k] for k in (("mean", "ci_low", "ci_high") if "ci_low" in stats
                                    else ("paired_diff_mean", "paired_ci_low", "paired_ci_high")))
    return dict(stats, mean=-_value(m), ci_low=-_value(hi), ci_high=-_value(lo))


def classes(found):
    """'cpu AVX512 (as recorded then): seeds 9-18' from {class: [seeds]}, classes joined by '; '."""
    return "; ".join(f"{label}: seeds {seeds(members)}" for label, members in found.items())


def span(records, digits=4):
    """'[-0.0240, +0.0251]': from the lowest interval bound to the highest of several contrasts."""
    return f"[{min(_value(r['ci_low']) for r in records):+.{digits}f}, {max(_value(r['ci_high']) for r in records):+.{digits}f}]"


def environment():
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(ROOT), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    env.filters.update(num=num, sig=sig, signed=signed, ci=ci, p=p, seeds=seeds, span=span, classes=classes, flip=flip, short=short, verdict=verdict, mean=mean)
    from bench.stats import power_at  # a plan's power at the std a study measured: computed, not typed
    from bench.step_time import gpt2_projection  # (compute ms, comm ms, bytes) of a projected micro-step
    from bench.stats import holm, paired_stats, seeds_needed, t_quantile  # the same statistics as the tools'
    env.globals.update(best=best, setting=setting, power_at=power_at, paired=paired_stats, seeds_needed=seeds_needed,
                       costs=costs, welch=welch, minus=minus, correlation=correlation,
                       gpt2_projection=gpt2_projection, t_quantile=t_quantile, holm=holm)
    env.tests["startingwith"] = lambda text, prefix: str(text).startswith(prefix)
    return env


def render_template(name, env=None, data=None):
    """The text of template `name` (a path from the repository root) rendered with every study's numbers."""
    import jinja2
    env, data = env or environment(), data if data is not None else numbers()
    try:
        return env.get_template(name).render(**data)
    except jinja2.TemplateNotFound:
        raise RenderError(f"{name}: no such template") from None
    except jinja2.UndefinedError as e:
        what = (e.message or "").replace("'bench.render.Study object'", "the study's files")
        raise RenderError(f"{name}{_line_of(e)}: names a number no study file provides ({what})") from None
    except (KeyError, TypeError, ValueError) as e:
        raise RenderError(f"{name}{_line_of(e)}: {type(e).__name__}: {e}") from None


def _line_of(error):
    import traceback
    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if f.filename.endswith((".j2", "<template>"))]
    return f", line {lines[-1]}" if lines else ""


def documents():
    return sorted({p for pattern in DOCUMENTS for p in glob.glob(os.path.join(ROOT, pattern))})


def rendered(text, path, env, data):
    """The document's text with every region rendered afresh, and the templates it names."""
    out, names, at = [], [], 0
    for start in START.finditer(text):
        if start.start() < at:
            continue
        end = text.find(END, start.end())
        if end < 0:
            raise RenderError(f"{os.path.relpath(path, ROOT)}: the region of {start.group(1)} has no {END!r}")
        out += [text[at:start.end()], render_template(start.group(1), env, data)]
        names.append(start.group(1))
        at = end
    return "".join(out) + text[at:], names


def render_all(write, paths=None):
    """Render every region of every document (or of `paths`) and, with every document, the README's figure
    (bench/figure.py); write them if `write`. Returns those that differ."""
    from bench import figure
    env, data, differ = environment(), numbers(), []
    for path in paths or documents():
        with open(path) as f:
            text = f.read()
        new, _ = rendered(text, path, env, data)
        if new != text:
            differ.append(os.path.relpath(path, ROOT))
            if write:
                with open(path, "w") as f:
                    f.write(new)
    if paths is None and figure.stale(ROOT, data, write):
        differ.append(figure.PATH)
    return differ


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a document differs")
    args = parser.parse_args()
    try:
        differ = render_all(write=not args.check)
    except RenderError as e:
        sys.exit(f"error: {e}")
    if args.check and differ:
        sys.exit(f"error: {', '.join(differ)}: not what the templates and the studies' numbers give: a number "
                 "typed or edited by hand, or a study file changed; run `python -m bench.render` and review the diff")
    print(("rewrote " if differ else "up to date: ") + (", ".join(differ) or f"{len(documents())} documents"))


if __name__ == "__main__":
    main()
