"""
Memory per rank with ZeRO-1 (zero_stage 0/1) and activation checkpointing (none/block), for the
char config and the GPT-2 124M and medium shapes: what one GPU of a `dist` launch holds during a
training step, dp=2 x tp=2, rank 0 (TP rank 0, data-parallel rank 0).

Nothing is computed: the step runs under FakeTensorMode (tensors with shapes, no storage) on a
fake process group of 4 ranks, and torch's MemTracker records the peak of what the step holds,
by kind: parameters, gradients, activations (saved for the backward), optimizer state and
temporaries. One step is taken before the measured one, so AdamW's moments exist, as in every
step of a real run. The counts are the allocator's view of tensors; a real GPU adds the CUDA
context, the allocator's fragmentation and NCCL buffers, which this does not model.

    python -m bench.memory                    # the table (a few minutes on 2 cores)
    python -m bench.memory --shapes char      # one shape
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from torch.testing._internal.distributed.fake_pg import FakeStore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from comms import DistComm
from step import process_grid
from model import GPT, GPTConfig

# name -> (model shape, micro-batch size, sequence length): the configs' own batch shapes
SHAPES = {
    "char": (dict(n_layer=12, n_head=4, n_embd=64, block_size=128, vocab_size=65), 32, 128),
    "gpt2": (dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50304), 12, 1024),
    "gpt2-medium": (dict(n_layer=24, n_head=16, n_embd=1024, block_size=1024, vocab_size=50304), 12, 1024),
}
KINDS = ("PARAM", "GRAD", "ACT", "OPT", "TEMP")
TP, DP = 2, 2


def measure(shape, batch, length, pattern, zero, checkpointing, tp_group, dp_group, sequence_parallel=False):
    """Peak bytes by kind of one training step (after a first one) on rank 0, in fake tensors."""
    with FakeTensorMode():
        torch.manual_seed(0)
        comm = DistComm(TP, group=tp_group, rank=0, sequence_parallel=sequence_parallel)
        model = GPT(GPTConfig(**shape, tp_size=TP, block_types=pattern), comm)
        model.activation_checkpointing = checkpointing
        optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cuda", zero, dp_group)
        idx = torch.randint(shape["vocab_size"], (batch, length))

        def step():
            _, loss = model(idx, idx)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        step()  # AdamW's state exists from the first step on
        tracker = MemTracker()
        tracker.track_external(model, getattr(optimizer, "optim", optimizer))  # ZeRO-1: its local AdamW holds the state
        with tracker:
            step()
        peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
    by_kind = {str(k).rpartition(".")[2]: v for k, v in peak.items()}
    return {kind: by_kind.get(kind, 0) for kind in KINDS} | {"Total": by_kind["Total"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, from {', '.join(SHAPES)}")
    parser.add_argument("--block_types", default="tp", help="the pattern (memory barely depends on it)")
    parser.add_argument("--sequence_parallel", action="store_true",
                        help="add rows with sequence_parallel=True (zero_stage 0, with and without checkpointing)")
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        sys.exit(f"error: --shapes: unknown shape {unknown[0]!r}; allowed: {', '.join(SHAPES)}")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=TP * DP)
    grid = process_grid(TP)
    tp_group, dp_group = grid.tp_group, grid.dp_group
    print(f"memory per rank, MiB (dp={DP} x tp={TP}, `dist` layout, rank 0; block_types={args.block_types}; "
          f"fake tensors, MemTracker peak of one step)\n")
    print("| shape | zero_stage | activation checkpointing | sequence parallel | params | grads | activations | "
          "optimizer | temp | peak total | vs plain |")
    print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = [(zero, checkpointing, False) for zero in (False, True) for checkpointing in (False, True)]
    rows += [(False, checkpointing, True) for checkpointing in (False, True)] if args.sequence_parallel else []
    for name in shapes:
        shape, batch, length = SHAPES[name]
        plain = None
        for zero, checkpointing, sp in rows:
            m = measure(shape, batch, length, args.block_types, zero, checkpointing, tp_group, dp_group, sp)
            plain = plain or m["Total"]
            mib = [f"{m[k] / 2 ** 20:,.1f}" for k in (*KINDS, "Total")]
            print(f"| {name} (B={batch}, T={length}) | {int(zero)} | {'block' if checkpointing else 'none'} | "
                  f"{'yes' if sp else 'no'} | {' | '.join(mib)} | {m['Total'] / plain:.2f} |", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
