"""
Checks every config file in config/: it loads with no unknown keys; its model and
link build; a GPT-2 config has its GPT-2 size's parameters (124M, 355M, 774M, within 1%); the sync
count in its name equals the model's analytic count and the count measured by
comms.py over one forward and one backward pass; and a short forward pass works. The GPT-2 sizes are
built on the meta device (their parameters) and run as a narrow twin: the same layers, heads, pattern
and link at n_embd 8 x n_head (a sync count depends on the pattern, not the width).

    python test_configs.py        # prints a table; exit status 1 if any check fails
    python -m pytest test_configs.py
"""

import glob
import os
import re
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)
import configurator  # noqa: E402
from comms import SimComm  # noqa: E402
from links import link_from  # noqa: E402
from model import GPT, GPTConfig, describe_pattern, model_args_from  # noqa: E402

CONFIGS = sorted(glob.glob(os.path.join(ROOT, "config", "*.py")))
GPT2_PARAMS = {"medium": 355e6, "large": 774e6}  # GPT-2's published sizes; small (no size in the name): 124M


def expected_syncs(path):
    """The count a config's file name promises: train_gpt2_12comm.py -> 12, _ladder -> 24 (ladder x12: tp's
    syncs, one exposed), no suffix -> 0 (dense)."""
    if path.endswith("_ladder.py"):
        return 24
    match = re.search(r"_(\d+)comm(_[a-z0-9]+)?\.py$", path)
    return int(match.group(1)) if match else 0


def check_config(path):
    """Run every check on one config file; return a row for the table (raises on failure)."""
    config, _ = configurator.configure(configurator.train_defaults(), [path])
    vocab_size = 96 if config["dataset"].endswith("_char") else 50304  # char vocabularies are < 96; else GPT-2's
    configurator.check_train_config(config)  # the values train.py checks before it runs
    link = link_from(config)
    assert not (link.lossy and config["tp_size"] == 1), f"{path}: a lossy link needs tp_size > 1"
    torch.manual_seed(0)
    # GPT-2 shapes on the meta device: their parameters, no arithmetic (initialising 124M weights on a CPU,
    # or running them through meta's decompositions, was most of this file's time)
    args = model_args_from(config, vocab_size)
    big = config["n_layer"] * config["n_embd"] ** 2 > 1e6
    with torch.device("meta" if big else "cpu"):
        model = GPT(GPTConfig(**args), SimComm(config["tp_size"], None if big else link))
    n_params = model.get_num_params()
    if "gpt2" in os.path.basename(path):
        size = next((k for k in GPT2_PARAMS if f"gpt2_{k}" in os.path.basename(path)), None)
        expected = GPT2_PARAMS.get(size, 124e6)
        assert abs(n_params - expected) / expected < 0.01, f"{path}: {n_params / 1e6:.2f}M parameters"
    if big:  # the syncs are the pattern's, not the width's: counted on a narrow twin (same layers, heads,
        # pattern, link), with numbers
        vocab_size = 96
        model = GPT(GPTConfig(**{**args, "n_embd": 8 * args["n_head"], "vocab_size": vocab_size}),
                    SimComm(config["tp_size"], link))
    assert model.exposed_syncs == (1 if path.endswith("_ladder.py") else model.sync_points), path
    assert model.sync_points == expected_syncs(path), \
        f"{path}: the name says {expected_syncs(path)} syncs, the model counts {model.sync_points}"
    idx = torch.randint(vocab_size, (1, 8))
    model.comm.counter.reset()
    logits, loss = model(idx, idx)
    loss.backward()
    counter = model.comm.counter
    assert counter.forward == counter.backward == model.sync_points, \
        f"{path}: measured {counter.forward} forward / {counter.backward} backward, expected {model.sync_points}"
    assert logits.shape == (1, 8, vocab_size) and torch.isfinite(loss)
    blocks = describe_pattern(model.config.block_types) if model.config.tp_size > 1 else "dense"
    loss = f"{link.model.name} {link.model.stationary_loss:.2%}" if link.lossy else "none"
    return (os.path.relpath(path, ROOT), blocks, model.config.tp_size, model.sync_points,
            counter.forward, counter.backward, f"{n_params / 1e6:.2f}M", loss)


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_config(path):
    check_config(path)


def test_larger_gpt2_sizes_have_their_patterns():
    names = {os.path.basename(p) for p in CONFIGS}
    for size, layers in (("medium", 24), ("large", 36)):  # all tp, all spd, [spd,parallel]
        for n in (2 * layers, layers, layers // 2 + 1):
            assert f"train_gpt2_{size}_{n}comm.py" in names, (size, n)


def test_every_sync_count_has_both_scales():
    names = {os.path.basename(p) for p in CONFIGS}
    for n in (24, 18, 16, 12, 8, 7, 6, 5, 2, 1):
        assert f"train_gpt2_{n}comm.py" in names and f"train_shakespeare_char_{n}comm.py" in names
    assert {"train_gpt2.py", "train_shakespeare_char.py"} <= names


def table_row(path):
    """check_config's row as table cells, or the failure in the row (a worker process reports every config)."""
    try:
        return "| " + " | ".join(str(c) for c in check_config(path)) + " |", True
    except Exception as e:
        return f"| {os.path.relpath(path, ROOT)} | FAILED: {e} |", False


if __name__ == "__main__":
    from concurrent.futures import ProcessPoolExecutor
    print("| config | blocks | tp | syncs (analytic) | fwd measured | bwd measured | params | packet loss |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    # one config per core, one thread each: building the GPT-2-sized models (weight init) is most of the time
    with ProcessPoolExecutor(os.cpu_count(), initializer=torch.set_num_threads, initargs=(1,)) as pool:
        failed = 0
        for row, ok in pool.map(table_row, CONFIGS):  # in CONFIGS' order, each row as soon as it is ready
            print(row, flush=True)
            failed += not ok
    sys.exit(1 if failed else 0)
