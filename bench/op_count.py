"""
The aten calls of one training forward+backward, counted: where a launch-bound GPU step
(small models, eager) spends its launches. Each call that is not a view is at least one
kernel on a GPU; views cost Python and dispatch only. Counted on the CPU: the calls are the
same on any device.

    python -m bench.op_count                                  # dense and 24comm, char config
    python -m bench.op_count --configs 12comm --nanogpt_dir ~/.cache/tp-sync/nanoGPT

With --nanogpt_dir (see bench/vs_nanogpt.py for the pinned checkout), nanoGPT's own model
with the same shape is counted too, and every config's difference from it is printed.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import collections
import contextlib
import importlib.util
import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import configurator
from model import model_args_from
from bench.harness import build, random_batch

# calls that only make a new view of existing memory (no kernel on a GPU)
VIEWS = {"aten.view", "aten._unsafe_view", "aten.t", "aten.transpose", "aten.permute", "aten.expand",
         "aten.squeeze", "aten.unsqueeze", "aten.select", "aten.slice", "aten.split", "aten.unbind",
         "aten.detach", "aten.alias", "aten.as_strided"}


class _Counter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def count_calls(model, x, y):
    """aten call -> how many times one forward+backward of model on (x, y) makes it (after one
    untimed warm-up pass, so lazy initialisations are not counted)."""
    for counting in (False, True):
        model.zero_grad(set_to_none=True)
        counter = _Counter()
        with counter if counting else contextlib.nullcontext():
            _, loss = model(x, y)
            loss.backward()
    return counter.calls


def kernel_calls(calls):
    return collections.Counter({name: n for name, n in calls.items() if name not in VIEWS})


def nanogpt_model(directory, config, vocab_size):
    """nanoGPT's GPT at config's shape, from its model.py in directory."""
    path = os.path.join(os.path.expanduser(directory), "model.py")
    if not os.path.isfile(path):
        sys.exit(f"op_count: no nanoGPT model.py at {path}; see bench/vs_nanogpt.py for the pinned checkout")
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    keys = ("n_layer", "n_head", "n_embd", "block_size", "bias", "dropout")
    return module.GPT(module.GPTConfig(vocab_size=vocab_size, **{k: config[k] for k in keys}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--configs", nargs="*", default=["24comm"], metavar="NAME",
                        help="sync-count configs besides dense, e.g. 24comm 12comm")
    parser.add_argument("--prefix", default="config/train_shakespeare_char", help="config file prefix")
    parser.add_argument("--vocab_size", type=int, default=65)
    parser.add_argument("--nanogpt_dir", help="also count nanoGPT's model (its checkout)")
    args = parser.parse_args()
    paths = {"dense": f"{args.prefix}.py", **{c: f"{args.prefix}_{c}.py" for c in args.configs}}
    for name, path in paths.items():
        if not os.path.isfile(os.path.join(ROOT, path)):
            parser.error(f"--configs: no config file {path}")
    configs = {name: configurator.configure(configurator.train_defaults(), [os.path.join(ROOT, path)])[0]
               for name, path in paths.items()}
    base = configs["dense"]
    x, y = random_batch(args.vocab_size, base["batch_size"], base["block_size"])
    counts = {}
    if args.nanogpt_dir:
        counts["nanoGPT"] = count_calls(nanogpt_model(args.nanogpt_dir, base, args.vocab_size), x, y)
    for name, config in configs.items():
        counts[name] = count_calls(build(model_args_from(config, vocab_size=args.vocab_size))[0], x, y)
    print(f"# aten calls of one forward+backward, {args.prefix}, batch {tuple(x.shape)}, torch {torch.__version__}")
    print("| model | all calls | non-view calls (kernels on a GPU) |")
    print("| --- | ---: | ---: |")
    for name, calls in counts.items():
        print(f"| {name} | {sum(calls.values())} | {sum(kernel_calls(calls).values())} |")
    if "nanoGPT" in counts:
        reference = kernel_calls(counts["nanoGPT"])
        for name, calls in counts.items():
            if name != "nanoGPT":
                mine = kernel_calls(calls)
                print(f"{name}: more than nanoGPT {dict(mine - reference)}; fewer {dict(reference - mine)}")


if __name__ == "__main__":
    main()
