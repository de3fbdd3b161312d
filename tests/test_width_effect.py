"""bench/width_effect.py: each config's paired cost at two widths and its change with width,
checked on hand-computed numbers."""

import csv

from bench.harness import run_tool
from conftest import assert_one_line_error

FIELDS = ["kind", "status", "config", "setting", "seed", "loss_model", "final_val_loss"]


def write_summary(path, losses):
    """losses: {config stem: [final val loss of seed 1, 2, ...]} -> a summarize.py-shaped CSV."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for stem, values in losses.items():
            for seed, loss in enumerate(values, start=1):
                writer.writerow(dict(kind="run", status="done", config=f"config/{stem}.py", setting="", seed=seed,
                                     loss_model="none", final_val_loss=loss))
            writer.writerow(dict(kind="aggregate", status="done", config=f"config/{stem}.py", setting="", seed="",
                                 loss_model="none", final_val_loss=0.0))  # aggregate rows are skipped
    return str(path)


def width_effect(*args):
    return run_tool("bench.width_effect", *args)


def test_the_change_with_width_by_hand(tmp_path):
    ref = "train_shakespeare_char_24comm"
    narrow = write_summary(tmp_path / "narrow.csv", {ref: [2.0, 2.1, 2.2], "x_1comm": [2.01, 2.12, 2.21],
                                                      "y_7comm": [2.0, 2.1, 2.2, 9.9]})
    wide = write_summary(tmp_path / "wide.csv", {ref: [1.8, 1.9, 2.0], "x_1comm": [1.85, 1.96, 2.04],
                                                  "y_7comm": [1.81, 1.89, 2.0]})
    result = width_effect(narrow, wide)
    assert result.returncode == 0, result.stderr
    rows = {line.split(" | ")[0].strip("| "): line for line in result.stdout.splitlines() if line.startswith("| ")}
    # x: costs 0.01, 0.02, 0.01 (narrow) and 0.05, 0.06, 0.04 (wide); changes 0.04, 0.04, 0.03:
    # mean 0.03667, sd 0.005774, t(0.975, 2) = 4.3027 -> half-width 0.01434; t = 11.0, p = 0.0082
    assert "| x_1comm | 3 | +0.0133 [-0.0010, +0.0277] | +0.0500 [+0.0252, +0.0748] | +0.0367 [+0.0223, +0.0510] | " \
           "0.016 | grows with width |" in rows["x_1comm"]
    # y: seed 4 is only in the narrow summary, so 3 seeds; costs 0, 0, 0 and +0.01, -0.01, 0: unresolved
    assert "| y_7comm | 3 | +0.0000 [+0.0000, +0.0000] |" in rows["y_7comm"] and rows["y_7comm"].endswith("| unresolved |")
    assert "Holm over 2" in result.stdout


def test_bad_input_is_one_line(tmp_path):
    summary = write_summary(tmp_path / "s.csv", {"train_shakespeare_char_24comm": [2.0, 2.1]})
    assert_one_line_error(width_effect(summary, str(tmp_path / "missing.csv")), "missing.csv does not exist")
    assert_one_line_error(width_effect(summary, summary, "--reference=nope"), "--reference='nope' is not among")
    assert_one_line_error(width_effect(summary, summary), "share no config besides the reference")
