"""
Every way of cutting TP communication, timed side by side in `dist` (issue 50 item 5): each scheme's real
step time against 24comm's on the same processes, in interleaved rounds, split into compute, exposed
communication and codec time.

    OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node=2 -m bench.scheme_time --rounds 8

Schemes (12 layers, TP=2, gloo): 24comm, 12comm and 5comm (dropped syncs), ladder (hidden: its all-reduces,
forward and backward, in flight behind the next sublayer), half the channels (sync_fraction=0.5), and
bfloat16, int8 and float8 messages (moved as their wire bytes, quantize.pack), and 24comm and 12comm under
sequence parallelism (issue 51: each sync a reduce-scatter and an all-gather). Per round each scheme runs
`steps` steps; a round's ratio is its seconds per step over 24comm's in the same round, and the table
gives the mean ratio with its 95% t interval over rounds (bench.stats). Time inside collectives is the
comm's own timer (issue and wait); codec time is the time inside the codec (quantize.wire_encode, to_bytes,
from_bytes, decode: timed here around them), which the collectives' timer also holds, so exposed communication = that timer - codec.
Lossless network: a Hadamard rotation acts only where packets are lost, so int8 with Hadamard is not a
scheme of its own here.

The time model checked (issue 50 item 6): the process group's own latency (a ping-pong of one float,
half the round trip) and bandwidth (an all-reduce of --big_mb, less that latency) are measured first,
then fed with the measured compute (24comm's compute in the same round: every scheme computes the same)
and each scheme's measured codec time into the frontier's model (bench/frontier.exposed_sync_seconds:
latency + bytes / bandwidth per sync all-reduce, both passes, ladder hiding what a sublayer, a 72nd of
the compute, covers; + the replicated gradients' all-reduce). Its predicted step against the measured
one, per round: the mean ratio and its 95% interval, for the model as the frontier takes it (ladder's
backward exposed) and with the backward hidden too, with an all-reduce's latency measured as the
all-reduce of one float instead of the one-way ping, and with the latency and bandwidth a step really
pays per all-reduce, fitted by least squares to the measured communication of the unquantized
exposed schemes (in-sample for those; ladder and the codecs out of sample), and with ladder's overlap
(the share of the coverable time it really hides) fitted at the other batch size. Results: stdout
(markdown) and --out (json).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import math
import os
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

import comms
from bench.frontier import exposed_sync_seconds
from bench.harness import add_step_args, build, random_batch, train_steps
from bench.stats import paired_stats

SCHEMES = {"24comm": dict(block_types="tp"), "12comm": dict(block_types="spd"),
           "5comm": dict(block_types="spd,parallel,parallel"), "ladder": dict(block_types="ladder"),
           "half": dict(block_types="tp", sync_fraction=0.5), "bf16": dict(block_types="tp", sync_dtype="bfloat16"),
           "int8": dict(block_types="tp", sync_dtype="int8"), "float8": dict(block_types="tp", sync_dtype="float8_e4m3fn"),
           "24comm SP": dict(block_types="tp", sequence_parallel=True), "12comm SP": dict(block_types="spd", sequence_parallel=True)}
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
    """(seconds per step, seconds in collectives per step, seconds in the codec per step, what a step sent:
    (syncs per pass, bytes of one message, bytes of the replicated gradients))."""
    counter = model.comm.counter
    counter.reset()
    CODEC["seconds"] = 0.0
    seconds = train_steps(model, optimizer, x, x, steps, reduce_and_clip=True)
    sent = (counter.forward // steps, counter.sync_bytes / (counter.forward + counter.backward),
            counter.replicated_bytes / steps)
    return seconds, counter.comm_seconds / steps, CODEC["seconds"] / steps, sent


def network(group, repeats=40, big_mb=16):
    """The TP group's own terms, medians over repeats: the one-way latency (half a ping-pong of one float),
    the seconds of an all-reduce of one float, and the bandwidth (bytes/s) of an all-reduce of big_mb."""
    rank, one, big = dist.get_rank(), torch.zeros(1), torch.zeros(big_mb * 2 ** 20 // 4)

    def median_seconds(op, n):
        times = []
        for _ in range(n):
            dist.barrier(group=group)
            start = time.perf_counter()
            op()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def ping():  # rank 0 sends one float, rank 1 sends it back
        if rank == 0:
            dist.send(one, 1, group=group)
            dist.recv(one, 1, group=group)
        else:
            dist.recv(one, 0, group=group)
            dist.send(one, 0, group=group)
    latency = median_seconds(ping, repeats) / 2
    small = median_seconds(lambda: dist.all_reduce(one, group=group), repeats)
    large = median_seconds(lambda: dist.all_reduce(big, group=group), max(3, repeats // 8))
    return dict(latency_s=latency, all_reduce_one_float_s=small, bandwidth_Bps=big.numel() * 4 / (large - latency))


def predicted_seconds(sent, compute, codec, ladder, net, latency, backward_hidden, overlap=1.0):
    """The frontier's model of one step from measured terms (module docstring)."""
    syncs, message, replicated = sent
    all_reduce = latency + message / net["bandwidth_Bps"]
    comm = exposed_sync_seconds(syncs, all_reduce, ladder, compute / 72, backward_hidden, overlap)
    return compute + codec + comm + latency + replicated / net["bandwidth_Bps"]


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
    net = network(group)
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
        report(rounds, args, net)
    dist.destroy_process_group()


MODELS = {"frontier": ("latency_s", False), "ladder backward hidden": ("latency_s", True),
          "all-reduce latency, backward hidden": ("all_reduce_one_float_s", True),
          "in-step fit, backward hidden": ("in_step", True), "in-step fit, overlap from the other batch": ("in_step", True)}
FITTED = ("24comm", "12comm", "5comm", "half")  # the in-step fit's schemes: whole or partial syncs, unquantized, exposed


def fit_overlap(rounds, b, net):
    """The share of its coverable time ladder's overlapping really hides at batch b: the model's step with
    none hidden (overlap 0) and all (1), against ladder's measured median step (clipped to [0, 1])."""
    rows, computes = rounds["ladder", b], [r[0] - r[1] for r in rounds["24comm", b]]
    terms = {**net, "bandwidth_Bps": net["in_step_bandwidth_Bps"]}
    none, full = (statistics.median(predicted_seconds(r[3], c, r[2], True, terms, net["in_step"], True, overlap)
                                    for r, c in zip(rows, computes)) for overlap in (0.0, 1.0))
    return min(1.0, max(0.0, (none - statistics.median(r[0] for r in rows)) / (none - full)))


def fit_in_step(rounds, batches):
    """The per-all-reduce cost a step really pays: comm seconds = n x alpha + bytes / beta, least squares over
    the medians of FITTED's schemes at every batch (their sync all-reduces, both passes, and the replicated one)."""
    rows, seconds = [], []
    for b in batches:
        for name in FITTED:
            syncs, message, replicated = rounds[name, b][0][3]
            rows.append([2 * syncs + 1, 2 * syncs * message + replicated])
            seconds.append(statistics.median(r[1] - r[2] for r in rounds[name, b]))
    (alpha, inverse_beta), *_ = np.linalg.lstsq(np.array(rows, dtype=float), np.array(seconds), rcond=None)
    return alpha, 1.0 / inverse_beta


def report(rounds, args, net):
    print(f"# measured: TP=2 over gloo, 2 processes x 1 thread, torch {torch.__version__}, n_layer 12, n_embd "
          f"{args.n_embd}, seq {args.block_size}; {args.rounds} interleaved rounds x {args.steps} steps; ms are medians")
    print("| batch | scheme | ms/step | step / 24comm: mean [95% CI] | compute ms | exposed comm ms | codec ms |")
    print("| ---: | --- | ---: | --- | ---: | ---: | ---: |")
    out, check = [], []
    net["in_step"], net["in_step_bandwidth_Bps"] = fit_in_step(rounds, args.batch_sizes)
    net["overlap"] = {b: fit_overlap(rounds, b, net) for b in args.batch_sizes}  # used at the other batch
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
            computes = [r[0] - r[1] for r in rounds["24comm", b]]  # 24comm's compute in the same round
            other = [net["overlap"][o] for o in args.batch_sizes if o != b]
            for model, (latency, backward_hidden) in MODELS.items():
                ladder = SCHEMES[name]["block_types"] == "ladder"
                terms = {**net, "bandwidth_Bps": net["in_step_bandwidth_Bps"]} if latency == "in_step" else net
                overlap = statistics.fmean(other) if "overlap" in model and other else 1.0
                errors = paired_stats([math.log(predicted_seconds(r[3], c, r[2], ladder, terms, net[latency], backward_hidden,
                                                                  overlap) / r[0]) for r, c in zip(rows, computes)])
                check.append(dict(batch=b, scheme=name, model=model, error=math.expm1(errors["mean"]),
                                  ci=(math.expm1(errors["ci_low"]), math.expm1(errors["ci_high"]))))
    print(f"\n# the time model checked: latency {net['latency_s'] * 1e6:.0f} us (ping-pong / 2), an all-reduce of one "
          f"float {net['all_reduce_one_float_s'] * 1e6:.0f} us, bandwidth {net['bandwidth_Bps'] / 1e9:.2f} GB/s "
          f"(all-reduce of 16 MB); in a step (fitted to {', '.join(FITTED)}): {net['in_step'] * 1e6:.0f} us an "
          f"all-reduce, {net['in_step_bandwidth_Bps'] / 1e9:.2f} GB/s; ladder's overlap "
          f"{', '.join(f'{v:.2f} at batch {b}' for b, v in net['overlap'].items())}; predicted / measured step - 1, "
          f"mean over rounds [95% CI]")
    print("| batch | scheme | " + " | ".join(MODELS) + " |\n| ---: | --- |" + " --- |" * len(MODELS))
    for b in args.batch_sizes:
        for name in SCHEMES:
            cells = [f"{c['error']:+.1%} [{c['ci'][0]:+.1%}, {c['ci'][1]:+.1%}]" for c in check
                     if (c["batch"], c["scheme"]) == (b, name)]
            print(f"| {b} | {name} | " + " | ".join(cells) + " |")
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "rows": out, "network": net, "time_model": check}, f, indent=2)


if __name__ == "__main__":
    main()
