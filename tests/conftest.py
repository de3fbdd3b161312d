import os
import random
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import bench.harness  # noqa: E402
from bench.harness import run  # noqa: E402  (the harness launches every subprocess of the tests)

bench.harness.IN_PROCESS = True  # run_train without an env of its own runs train.py in the test's process
# One thread per test process: pytest.ini runs one worker per core, and two threads per worker on those cores
# made the in-process tests 3 to 5 times slower (spinning intra-op threads), as run() gives each subprocess one
torch.set_num_threads(1)

# A tiny model for end-to-end runs of train.py: seconds on a CPU.
TINY = ["--n_layer=4", "--n_head=4", "--n_embd=32", "--block_size=32", "--batch_size=8",
        "--eval_iters=2", "--eval_interval=10", "--log_interval=1", "--warmup_iters=2",
        "--learning_rate=3e-3", "--min_lr=3e-4", "--device=cpu", "--compile=False"]
# 12 layers, so that the sync-count patterns (bench.harness.PATTERNS) apply; narrow, so a run takes seconds.
SMALL = ["--n_layer=12", "--n_head=4", "--n_embd=32", "--block_size=32", "--batch_size=4", "--eval_iters=2",
         "--eval_interval=3", "--log_interval=1", "--warmup_iters=2", "--device=cpu", "--compile=False",
         "--max_iters=6"]


def tiny_text(n_words=6000, seed=0):
    """English-like text with strong regularities, so a tiny model's loss falls fast."""
    rng = random.Random(seed)
    subjects = ["the king", "a fool", "my lord", "the queen", "good friend", "this night"]
    verbs = ["speaks of", "dreams of", "fears", "loves", "remembers", "betrays"]
    objects = ["the crown.", "a storm.", "his sword.", "the sea.", "her honour.", "sweet music."]
    words = []
    while len(words) < n_words:
        words += f"{rng.choice(subjects).capitalize()} {rng.choice(verbs)} {rng.choice(objects)}".split()
        if rng.random() < 0.2:
            words[-1] += "\n"
    return " ".join(words)


def assert_one_line_error(result, *needles):
    """A user mistake: non-zero exit, one line on stderr naming the problem, no traceback."""
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="session")
def char_data(tmp_path_factory):
    """A prepared char-level dataset from tiny_text(), via the real prepare script."""
    base = tmp_path_factory.mktemp("char_data")
    text_path = base / "input.txt"
    text_path.write_text(tiny_text())
    out = base / "data"
    result = run([sys.executable, os.path.join(ROOT, "data", "shakespeare_char", "prepare.py"),
                  "--input", str(text_path), "--out_dir", str(out)])
    assert result.returncode == 0, result.stderr
    return str(out)
