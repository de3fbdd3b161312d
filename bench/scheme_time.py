"""
Every way of cutting TP communication, timed side by side in `dist` (issue 50 item 5): each scheme's real
step time against 24comm's on the same processes, in interleaved rounds, split into compute, exposed
communication and codec time.

    OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node=2 -m bench.scheme_time --rounds 8

Schemes (12 layers, TP=2, gloo): 24comm, 12comm and 5comm (dropped syncs), ladder (hidden: its all-reduces,
forward and backward, in flight behind the next sublayer), half the channels (sync_fraction=0.5), and
bfloat16, int8 and float8 messages (moved as their wire bytes, quantize.pack). Per round each scheme runs
`steps` steps; a round's ratio is its seconds per step over 24comm's in the same round, and the table
gives the mean ratio with its 95% t interval over rounds (bench.stats). Time inside collectives is the
comm's own timer (issue and wait); codec time is the time inside the codec (quantize.wire_encode, to_bytes,
from_bytes, decode: timed here around them), which the collectives' timer also holds, so exposed communication = that timer - codec.
Lossless network: a Hadamard rotation acts only where packets are lost, so int8 with Hadamard is not a
scheme of its own here. Results: stdout (markdown) and --out (json).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.distributed as dist

import comms
from bench.harness import add_step_args, build, random_batch, train_steps
from bench.stats import paired_stats

SCHEMES = {"24comm": dict(block_types="tp"), "12comm": dict(block_types="spd"),
           "5comm": dict(block_types="spd,parallel,parallel"), "ladder": dict(block_types="ladder"),
           "half": dict(block_types="tp", sync_fraction=0.5), "bf16": dict(block_types="tp", sync_dtype="bfloat16"),
           "int8": dict(block_types="tp", sync_dtype="int8"), "float8": dict(block_types="tp", sync_dtype="float8_e4m3fn")}
CODEC = {"seconds": 0.0}  # time inside the codec in this process


def timed_codec(function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            CODEC["seconds"] += time.perf_counter() - start
    return wrapper


def build_scheme(keys, args, group, rank):
    keys = dict(keys)
    block_types = keys.pop("block_types")
    model_args = dict(n_layer=12, n_head=args.n_head, n_embd=args.n_embd, block_size=args.block_size,
                      vocab_size=args.vocab_size, tp_size=2, block_types=block_types)
    model, optimizer = build(model_args, comms.DistComm(2, group=group, rank=rank, **keys))
    model.comm.timing = True
    return model, optimizer


def run_round(model, optimizer, x, steps):
    """(seconds per step, seconds in collectives per step, seconds in the codec per step)."""
    model.comm.counter.reset()
    CODEC["seconds"] = 0.0
    seconds = train_steps(model, optimizer, x, x, steps, reduce_and_clip=True)
    return seconds, model.comm.counter.comm_seconds / steps, CODEC["seconds"] / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    add_step_args(parser, rounds=8)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "scheme_time.json"))
    args = parser.parse_args()
    if args.rounds < 2:
        raise SystemExit(f"error: --rounds={args.rounds}: at least 2 rounds give an interval")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if dist.get_world_size() != 2:
        raise SystemExit("error: run with torchrun --nproc_per_node=2")
    torch.set_num_threads(1)
    for name in ("wire_encode", "to_bytes", "from_bytes", "decode"):  # the codec as comms.py calls it
        setattr(comms, name, timed_codec(getattr(comms, name)))
    group = dist.new_group([0, 1])
    entries = {name: build_scheme(keys, args, group, rank) for name, keys in SCHEMES.items()}
    batches = {b: random_batch(args.vocab_size, b, args.block_size, seed=1)[0] for b in args.batch_sizes}
    for entry in entries.values():
        run_round(*entry, batches[args.batch_sizes[0]], 2)  # warm up
    rounds = {(name, b): [] for b in args.batch_sizes for name in entries}
    for _ in range(args.rounds):
        for name, b in rounds:  # interleaved: every scheme once per round, in the same order
            dist.barrier()
            rounds[name, b].append(run_round(*entries[name], batches[b], args.steps))
    if rank == 0:
        report(rounds, args)
    dist.destroy_process_group()


def report(rounds, args):
    print(f"# measured: TP=2 over gloo, 2 processes x 1 thread, torch {torch.__version__}, n_layer 12, n_embd "
          f"{args.n_embd}, seq {args.block_size}; {args.rounds} interleaved rounds x {args.steps} steps; ms are medians")
    print("| batch | scheme | ms/step | step / 24comm: mean [95% CI] | compute ms | exposed comm ms | codec ms |")
    print("| ---: | --- | ---: | --- | ---: | ---: | ---: |")
    out = []
    for b in args.batch_sizes:
        base = [r[0] for r in rounds["24comm", b]]
        for name in SCHEMES:
            rows = rounds[name, b]
            ratio = paired_stats([math.log(r[0] / s) for r, s in zip(rows, base)])  # log ratio: symmetric
            step, comm, codec = (statistics.median(r[i] for r in rows) * 1e3 for i in range(3))
            row = dict(batch=b, scheme=name, step_ms=step, compute_ms=step - comm, exposed_comm_ms=comm - codec,
                       codec_ms=codec, ratio=math.exp(ratio["mean"]), ci=(math.exp(ratio["ci_low"]), math.exp(ratio["ci_high"])))
            out.append(row)
            print(f"| {b} | {name} | {step:.1f} | {row['ratio']:.3f} [{row['ci'][0]:.3f}, {row['ci'][1]:.3f}] | "
                  f"{row['compute_ms']:.1f} | {row['exposed_comm_ms']:.1f} | {codec:.1f} |")
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "rows": out}, f, indent=2)


if __name__ == "__main__":
    main()
