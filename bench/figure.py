"""
The README's figure: each setting's cost against 24comm (its final val loss minus 24comm's, same seed; mean
and 95% interval) by sync count and by width, drawn from the studies' committed analysis files.

    python -m bench.render            # draws it with the rendered text (docs/costs_vs_24comm.svg)
    python -m bench.render --check    # exit 1 if it is not what today's files give
    python -m bench.figure            # print the plotted numbers (what the check compares)

By sync count: the cliff study's planned family (H2-H10, each N-comm pattern against 24comm) and the first
sync_count study's paired columns (its experiment_summary.csv), each at the char config's learning rate.
By width: the scale study's per-width families (family_w<width>.json), one group per width, labelled with
what else differs there (its numerics class, the learning rate tuned for 24comm there, the tokens per
parameter of its 600 iterations); no line joins the widths, since a difference between them is not an
effect of width alone (DESIGN.md section 11).

The check compares the plotted numbers, which the SVG carries in its description (JSON): matplotlib's SVG
bytes change between its versions, the numbers do not. Where the matplotlib that drew the file is the one
installed, the bytes are compared too (the drawing is deterministic: a fixed svg.hashsalt, no date, text
as text).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import html
import io
import json
import os
import re

PATH = os.path.join("docs", "costs_vs_24comm.svg")  # from the repository root
SETTINGS = (("drop12", "12comm"), ("drop5", "5comm"), ("drop2", "2comm"), ("drop1", "1comm"),
            ("half", "half the channels"), ("ladder", "ladder"))  # the scale study's cut settings, in its names
DIGITS = 6  # the plotted numbers are rounded to this many decimals: far below any interval, stable in JSON


def _r(x):
    return round(float(x), DIGITS)


def _syncs(config):
    """'train_shakespeare_char_12comm' (or a config path) -> 12."""
    found = re.search(r"_(\d+)comm(?:\.py)?$", config)
    return int(found.group(1)) if found else None


def numerics(labels):
    """'CPU float32' / 'GPU bfloat16' from bench.summary.class_label's labels of one width's runs."""
    out = []
    for label in labels:
        where = "CPU" if label.startswith("cpu") else "GPU"
        dtype = label.split(", ")[1].split(" ")[0] if ", " in label else "dtype not recorded"
        if f"{where} {dtype}" not in out:
            out.append(f"{where} {dtype}")
    return " + ".join(out)


def points(data):
    """The plotted numbers, from every study's files (bench.render.numbers()): a dict of plain lists."""
    from bench.render import RenderError
    cliff, sync_count, scale = data["cliff"], data["sync_count"], data["scale"]
    family = cliff["family_H2-H10"]
    series = [dict(label=f"cliff (planned), seeds {_seeds(next(iter(family.values()))['seeds'])}",
                   n_embd=_one(cliff, "budget_by_width"), learning_rate=_one(cliff, "run_learning_rates"),
                   points=sorted((dict(syncs=_syncs(r["a"]), mean=_r(r["mean"]), ci_low=_r(r["ci_low"]),
                                       ci_high=_r(r["ci_high"]), n=r["n"]) for r in family.values()),
                                 key=lambda p: -p["syncs"]))]
    rows = [row for row in sync_count["summary"].values() if row["paired_diff_mean"] and _syncs(row["config"])
            and row["config"].startswith("config/")]  # each setting once (the summary holds two names for each)
    rows = {row["config"]: row for row in rows if int(row["tp_size"] or 2) > 1}.values()  # not dense (tp_size 1)
    series.append(dict(label=f"sync_count, seeds {_seeds(sorted({s for v in sync_count['classes'].values() for s in v}))}",
                       n_embd=_one(sync_count, "budget_by_width"), learning_rate=_one(sync_count, "run_learning_rates"),
                       points=sorted((dict(syncs=_syncs(row["config"]), mean=_r(row["paired_diff_mean"]),
                                           ci_low=_r(row["paired_ci_low"]), ci_high=_r(row["paired_ci_high"]),
                                           n=int(row["paired_n"])) for row in rows), key=lambda p: -p["syncs"])))
    widths = []
    for width in sorted(int(k.removeprefix("family_w")) for k in scale if re.fullmatch(r"family_w\d+", k)):
        fam, budget = scale[f"family_w{width}"], scale["budget_by_width"].get(width)
        if budget is None or width not in scale["classes_by_width"]:
            raise RenderError(f"scale: family_w{width}.json has no runs of n_embd {width} beside it")
        widths.append(dict(width=width, numerics=numerics(scale["classes_by_width"][width]),
                           learning_rate=scale["learning_rates"][str(width)],
                           tokens_per_parameter=_r(budget["tokens"] / budget["params"]),
                           settings=[dict(setting=label, mean=_r(fam[name]["mean"]), ci_low=_r(fam[name]["ci_low"]),
                                          ci_high=_r(fam[name]["ci_high"]), n=fam[name]["n"])
                                     for name, label in SETTINGS]))
    return dict(by_sync_count=series, by_width=widths)


def _one(study, key):
    """The one width (budget_by_width) or learning rate (run_learning_rates) of a study's runs."""
    from bench.render import RenderError
    values = list(study[key])
    if len(values) != 1:
        raise RenderError(f"{study['name']}: its runs have {len(values)} values of {key}, the figure plots one")
    return values[0]


def _seeds(values):
    from bench.render import seeds
    return seeds(values)


RC = {"svg.hashsalt": "tp-sync", "svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
      "axes.spines.right": False, "path.simplify": False}


def draw(pts):
    """The SVG text of the figure: deterministic for one matplotlib version."""
    import matplotlib
    with matplotlib.rc_context(RC):
        fig = figure(pts)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Description": json.dumps(pts, sort_keys=True)})
    return buf.getvalue()


def figure(pts):
    """The matplotlib Figure (drawn under RC)."""
    from matplotlib.figure import Figure
    if True:
        fig = Figure(figsize=(11, 4.2))
        left, right = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=[1, 1.25]))
        for ax in (left, right):
            ax.axhline(0, color="0.3", lw=0.8)
            ax.set_ylabel("final val loss - 24comm's, same seed (nats)")
        for k, (s, marker, color) in enumerate(zip(pts["by_sync_count"], "os", ("C0", "0.55"))):
            shift = (k - (len(pts["by_sync_count"]) - 1) / 2) * 0.3
            xs = [p["syncs"] + shift for p in s["points"]]
            ys = [p["mean"] for p in s["points"]]
            err = [[p["mean"] - p["ci_low"] for p in s["points"]], [p["ci_high"] - p["mean"] for p in s["points"]]]
            left.errorbar(xs, ys, yerr=err, fmt=marker, color=color, ms=4, capsize=2, lw=1, label=s["label"])
        left.plot([24], [0], "D", color="k", ms=4, label="24comm, the reference")
        left.invert_xaxis()
        counts = sorted({p["syncs"] for s in pts["by_sync_count"] for p in s["points"]} | {24})
        left.set_xticks(counts)
        setup = sorted({(s["n_embd"], s["learning_rate"]) for s in pts["by_sync_count"]})
        left.set_xlabel("TP syncs per forward pass (24: Megatron; " +
                        "; ".join(f"n_embd {w}, lr {lr:g}" for w, lr in setup) + ")")
        left.set_title("By sync count: mean and 95% interval over seeds", loc="left")
        left.legend(frameon=False, loc="upper left")
        groups = pts["by_width"]
        step = len(SETTINGS) + 1.5
        for j, (_, label) in enumerate(SETTINGS):
            xs = [g * step + j for g in range(len(groups))]
            found = [next(s for s in grp["settings"] if s["setting"] == label) for grp in groups]
            right.errorbar(xs, [s["mean"] for s in found],
                           yerr=[[s["mean"] - s["ci_low"] for s in found], [s["ci_high"] - s["mean"] for s in found]],
                           fmt="o", ls="none", color=f"C{j}", ms=4, capsize=2, lw=1, label=label)
        right.set_xticks([g * step + (len(SETTINGS) - 1) / 2 for g in range(len(groups))])
        right.set_xticklabels([f"n_embd {grp['width']}\n{grp['numerics']}, lr {grp['learning_rate']:g}\n"
                               f"tokens per parameter {grp['tokens_per_parameter']:.2g}" for grp in groups])
        for g in range(1, len(groups)):
            right.axvline(g * step - 1.25, color="0.85", lw=0.8)
        right.set_title("By width: rate, progress and arithmetic differ too (no trend)", loc="left")
        right.legend(frameon=False, fontsize=8, ncol=2, loc="upper left")
        fig.tight_layout()
    return fig


def embedded(svg):
    """The plotted numbers an SVG drawn by draw() carries, and the matplotlib version that drew it."""
    found = re.search(r"<dc:description>(.*?)</dc:description>", svg, flags=re.S)
    version = re.search(r"Matplotlib v([\w.]+)", svg)
    return (json.loads(html.unescape(found.group(1))) if found else None), (version.group(1) if version else None)


def stale(root, data, write):
    """Whether the figure at PATH is not what today's files give (its numbers; its bytes where this matplotlib
    drew it); with `write`, draw it afresh when it is."""
    import matplotlib
    path, pts = os.path.join(root, PATH), json.loads(json.dumps(points(data)))
    old = open(path).read() if os.path.exists(path) else ""
    numbers, version = embedded(old)
    if numbers == pts and version != matplotlib.__version__:
        return False  # another matplotlib drew it: its bytes are its own, its numbers are today's
    new = draw(pts)
    if new == old:
        return False
    if write:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(new)
    return True


def main():
    from bench.render import numbers
    print(json.dumps(points(numbers()), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
