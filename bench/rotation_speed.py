"""
The Hadamard rotation's speed: rotation.hadamard (two GEMMs, H_a kron H_b) against the butterfly it
replaced (log2 K passes of sums and differences, kept here as the reference), side by side in
alternating rounds, on one rank's message as a lossy sync sends it (`Rotation.received`: pad, signs,
the blocked transform, the inverse), and both transforms agree to float32 rounding.

    python -m bench.rotation_speed                       # char-size (32 x 128 x 64) and GPT-2 (12 x 1024 x 768) messages
    python -m bench.rotation_speed --device cuda

Prints, per message size: ms per message (median over rounds) for each, and the per-round ratio
butterfly / GEMM (geometric mean and its 95% t interval over rounds).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import math
import statistics
import time

import torch

import rotation
from bench.stats import paired_stats


def butterfly(x):
    """The transform before the GEMMs: x (K, P), K a power of two, log2 K passes."""
    K, P = x.shape
    h = 1
    while h < K:
        y = x.view(K // (2 * h), 2, h, P)
        x = torch.stack((y[:, 0] + y[:, 1], y[:, 0] - y[:, 1]), dim=1).view(K, P)
        h *= 2
    return x * K ** -0.5 if K > 1 else x


def timed(fn, repeats, device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--packet_bytes", type=int, default=1500)
    args = parser.parse_args()
    device = torch.device(args.device)
    gemm = rotation.hadamard
    print(f"# Rotation.received of one float32 message, {args.packet_bytes}-byte packets, {device}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.rounds} rounds x {args.repeats}")
    print("| message | packets | butterfly ms | GEMM ms | butterfly / GEMM: geometric mean [95% CI] | max difference |")
    print("| --- | ---: | ---: | ---: | --- | ---: |")
    for name, shape in (("char 32x128x64", (32, 128, 64)), ("GPT-2 12x1024x768", (12, 1024, 768))):
        message = torch.randn(math.prod(shape), device=device)
        per_packet = args.packet_bytes // 4
        n_packets = -(-message.numel() // per_packet)
        arrived = torch.ones(n_packets, dtype=torch.bool, device=device)
        rot = rotation.Rotation(seed=0)
        outs, times = {}, {"butterfly": [], "gemm": []}
        for impl, fn in (("butterfly", butterfly), ("gemm", gemm)):
            rotation.hadamard = fn
            outs[impl] = rot.received(message, arrived, 0, 0, per_packet)  # also the warm-up
        for _ in range(args.rounds):
            for impl, fn in (("butterfly", butterfly), ("gemm", gemm)):
                rotation.hadamard = fn
                times[impl].append(timed(lambda: rot.received(message, arrived, 0, 0, per_packet), args.repeats, device))
        rotation.hadamard = gemm
        logs = paired_stats([math.log(b / g) for b, g in zip(times["butterfly"], times["gemm"])])
        diff = (outs["butterfly"] - outs["gemm"]).abs().max().item()
        print(f"| {name} | {n_packets} | {statistics.median(times['butterfly']) * 1e3:.3f} | "
              f"{statistics.median(times['gemm']) * 1e3:.3f} | {math.exp(logs['mean']):.2f} "
              f"[{math.exp(logs['ci_low']):.2f}, {math.exp(logs['ci_high']):.2f}] | {diff:.1e} |")


if __name__ == "__main__":
    main()
