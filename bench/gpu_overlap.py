"""
How much of a sync's transfer one GPU hides behind the next sublayer (issue 50 item 5, its single-GPU part).

The frontier ASSUMES that a ladder sync's transfer is hidden in full behind the next sublayer where it
fits (overlap 1: a GPU's copy engines move data while its SMs compute); on two shared CPU cores
bench/scheme_time.py measures about half. One GPU cannot run a collective between ranks, so the
transfer is stood in for by what a NIC's DMA does to GPU memory: one sync's message (one TP=2 rank's
partial sum, GPT-2 124M: 12 x 1024 x 768 in bf16, 18.9 MB) copied to pinned host memory and back on a
side CUDA stream, while a sublayer of that rank's shard runs on the main stream: its forward (where a
ladder sync's forward transfer hides) and its forward and backward (the backward mirror behind a
sublayer's backward). Each round times `steps` calls of the sublayer alone, the copy alone, and both
launched together (the copy first, on its stream); hidden = (sublayer + copy - together) / the shorter
of the two: the share of what could be hidden that was (1: all). Mean and 95% t interval over rounds.

    python -m bench.gpu_overlap --out bench/gpu_overlap.json                  # on a GPU
    python -m bench.gpu_overlap --scale tiny --device cpu --dtype float32    # smoke test: a CPU has no
                                                                             # streams, hidden is about 0
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time

import torch

from bench.gpu_compute import MLP, SCALES, Attention, add_timing_args
from bench.stats import paired_stats


def seconds(device, fn, steps):
    """Wall seconds per call of fn over `steps` calls, the device drained before and after."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    sync()
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    add_timing_args(parser, rounds=10)
    args = parser.parse_args()
    if args.rounds < 2:
        sys.exit(f"error: --rounds={args.rounds}: at least 2 rounds give an interval")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("error: --device cuda but torch sees no GPU; pass --device cpu for a smoke test")
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    _, n_head, d, T, _, B = SCALES[args.scale]
    torch.manual_seed(0)
    gpu = device.type == "cuda"
    side = torch.cuda.Stream(device) if gpu else None
    on_side = (lambda: torch.cuda.stream(side)) if gpu else contextlib.nullcontext
    message = torch.randn(B, T, d, device=device, dtype=dtype)  # one rank's partial sum, as a sync sends it
    host = torch.empty(message.shape, dtype=dtype, pin_memory=gpu)
    back = torch.empty_like(message)

    def transfer():  # out through the copy engine and back, as a NIC reads and writes GPU memory
        with on_side():
            host.copy_(message, non_blocking=True)
            back.copy_(host, non_blocking=True)

    x = torch.randn(B, T, d, device=device, dtype=dtype, requires_grad=True)
    rows = []
    for part, module in (("attention", Attention(d, n_head, 2)), ("MLP", MLP(d, 2))):
        module = module.to(device, dtype)
        for passes in ("forward", "forward + backward"):
            def sublayer(module=module, passes=passes):
                if passes == "forward":
                    with torch.no_grad():
                        module(x)
                else:
                    module(x).sum().backward()

            def together(sublayer=sublayer):
                transfer()  # launched first, on its own stream; the sublayer then runs on the main one
                sublayer()
            for _ in range(args.warmup):
                together()
            times = [[seconds(device, f, args.steps) for f in (sublayer, transfer, together)] for _ in range(args.rounds)]
            hidden = paired_stats([(s + c - t) / min(s, c) for s, c, t in times])
            ms = [statistics.median(r[i] for r in times) * 1e3 for i in range(3)]
            rows.append(dict(sublayer=part, passes=passes, sublayer_ms=ms[0], transfer_ms=ms[1], together_ms=ms[2],
                             hidden=hidden["mean"], hidden_ci=[hidden["ci_low"], hidden["ci_high"]]))
    name = torch.cuda.get_device_name(device) if gpu else platform.processor() or platform.machine()
    nbytes = message.numel() * message.element_size()
    print(f"# {name}, torch {torch.__version__}, {args.dtype}, scale {args.scale} (B={B}, T={T}): one TP=2 rank's "
          f"sublayer, a {nbytes / 2 ** 20:.1f} MiB message to pinned host memory and back on a side stream; "
          f"{args.rounds} rounds x {args.steps} calls, ms are medians" + ("" if gpu else "; a CPU has no streams"))
    print("| sublayer | passes | sublayer ms | transfer ms | together ms | hidden: mean [95% CI] |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for r in rows:
        print(f"| {r['sublayer']} | {r['passes']} | {r['sublayer_ms']:.3f} | {r['transfer_ms']:.3f} | "
              f"{r['together_ms']:.3f} | {r['hidden']:.2f} [{r['hidden_ci'][0]:.2f}, {r['hidden_ci'][1]:.2f}] |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=name, torch=torch.__version__, dtype=args.dtype, scale=args.scale, batch=B,
                           block_size=T, message_bytes=nbytes, rounds=args.rounds, steps=args.steps, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
