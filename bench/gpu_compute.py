"""
The compute terms of the GPT-2 124M TP=2 projection, measured on a GPU instead of assumed.

bench/step_time.py projects a micro-step of GPT-2 124M with TP=2 across two nodes (12 x 1024 tokens,
bf16) as compute + communication, with the compute ASSUMED: FLOPs at 40% MFU of an H100, halved for
one rank, a sublayer's forward a 72nd of it, and the codecs of DESIGN section 8 free. This times
each of those on the GPU it runs on, no communication involved:

- one TP=2 rank's micro-step, forward and backward: 12 blocks with 6 of the 12 heads and 1536 of
  the 3072 MLP units (a rank's shard), and the replicated parts in full (embeddings, LayerNorms, the
  tied LM head over 50304 tokens, the loss), as model.py runs a rank; beside it the whole model
  (TP=1), the reference the 40% MFU is read against;
- the forward of one attention and one MLP sublayer of that shard (what ladder hides a sync behind);
- what a sync's message costs to encode and decode: int8 (quantize.quantized: per-token absmax scale,
  round, scale back) and the Hadamard rotation (rotation.Rotation: rotate, then rotate back), on one
  rank's 12 x 1024 x 768 bf16 partial sum (18.9 MB), run eagerly as the lossy path runs.

    python -m bench.gpu_compute --out bench/gpu_compute.json            # on a GPU (bf16, compiled)
    python -m bench.gpu_compute --scale tiny --device cpu --dtype float32 --compile off   # smoke test

Each time is the median over --rounds rounds of --steps timed calls (after --warmup), CUDA events on
a GPU. Prints a markdown table and writes the numbers, the device and torch's version to --out.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import platform
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from quantize import quantized
from rotation import Rotation

SCALES = {  # (n_layer, n_head, n_embd, block_size, vocab_size, micro-batch)
    "gpt2": (12, 12, 768, 1024, 50304, 12),
    "tiny": (2, 4, 64, 64, 256, 2),
}
PACKET_BYTES = 1500


class Attention(nn.Module):
    def __init__(self, d, heads, shards):
        super().__init__()
        self.heads, self.hs = heads // shards, d // heads
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * self.heads * self.hs)  # column-parallel: this rank's heads
        self.proj = nn.Linear(self.heads * self.hs, d)  # row-parallel: a partial sum of the output

    def forward(self, x):  # (B, T, C) -> (B, T, C), the partial this rank would sync
        B, T, _ = x.shape
        q, k, v = self.qkv(self.ln(x)).view(B, T, 3, self.heads, self.hs).unbind(2)  # (B, T, nh, hs) each
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, -1))  # (B, nh, T, hs) -> (B, T, nh * hs) -> (B, T, C)


class MLP(nn.Module):
    def __init__(self, d, shards):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc, self.proj = nn.Linear(d, 4 * d // shards), nn.Linear(4 * d // shards, d)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(self.ln(x)), approximate="tanh"))


class RankModel(nn.Module):
    """What one rank of a TP group of `shards` computes (no sync: its partials are added locally)."""

    def __init__(self, n_layer, n_head, d, block_size, vocab, shards):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block_size, d)
        self.blocks = nn.ModuleList(nn.ModuleList([Attention(d, n_head, shards), MLP(d, shards)]) for _ in range(n_layer))
        self.ln_f, self.lm_head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, replicated on every rank

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))  # (B, T, C)
        for attn, mlp in self.blocks:
            x = x + attn(x)
            x = x + mlp(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, vocab)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def timer(device, fn, args):
    """Median ms per call of fn over rounds of steps calls."""
    for _ in range(args.warmup):
        fn()
    rounds = []
    for _ in range(args.rounds):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.steps):
                fn()
            end.record()
            torch.cuda.synchronize()
            rounds.append(start.elapsed_time(end) / args.steps)
        else:
            t0 = time.perf_counter()
            for _ in range(args.steps):
                fn()
            rounds.append((time.perf_counter() - t0) * 1e3 / args.steps)
    return statistics.median(rounds), min(rounds), max(rounds)


def add_timing_args(parser, rounds):
    """The model size, device, dtype and rounds of a GPU timing tool (this one, bench/gpu_overlap.py)."""
    parser.add_argument("--scale", choices=SCALES, default="gpt2")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default="")


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    add_timing_args(parser, rounds=5)
    parser.add_argument("--compile", choices=["on", "off"], default="on")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("bench/gpu_compute.py: --device cuda but torch sees no GPU; pass --device cpu for a smoke test")
    device = torch.device(args.device)
    n_layer, n_head, d, T, vocab, B = SCALES[args.scale]
    dtype = getattr(torch, args.dtype)
    autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    idx = torch.randint(vocab, (B, T), device=device)
    targets = torch.randint(vocab, (B, T), device=device)
    compile_ = torch.compile if args.compile == "on" else (lambda m: m)
    rows = {}

    def micro_step(shards):
        model = RankModel(n_layer, n_head, d, T, vocab, shards).to(device)
        step_model = compile_(model)

        def fn():
            with autocast:
                loss = step_model(idx, targets)
            loss.backward()
        return model, fn

    for shards, name in ((1, "micro-step fwd+bwd, whole model (TP=1)"), (2, "micro-step fwd+bwd, one TP=2 rank")):
        model, fn = micro_step(shards)
        rows[name] = timer(device, fn, args)
        if shards == 2:
            attn, mlp = model.blocks[0]
            x = torch.randn(B, T, d, device=device)
            for part, module in (("attention", attn), ("MLP", mlp)):
                f = compile_(module)

                def forward(f=f):
                    with torch.no_grad(), autocast:
                        f(x)
                rows[f"forward of one {part} sublayer, one TP=2 rank"] = timer(device, forward, args)
        del model, fn

    message = torch.randn(B, T, d, device=device, dtype=dtype)  # one rank's partial sum
    flat = message.view(-1)  # a sync rotates its message flat
    n_packets = -(-message.numel() * message.element_size() // PACKET_BYTES)
    per_packet = PACKET_BYTES // message.element_size()
    rotation = Rotation(seed=0)
    rows["message: int8 encode + decode (quantize.quantized)"] = timer(device, lambda: quantized(message, torch.int8), args)
    arrived = torch.ones(n_packets, dtype=torch.bool, device=device)
    rows["message: Hadamard rotate + rotate back (rotation.Rotation.received)"] = timer(
        device, lambda: rotation.received(flat, arrived, 0, 0, per_packet), args)

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    print(f"# {name}, torch {torch.__version__}, {args.dtype}, compile {args.compile}, scale {args.scale} "
          f"(B={B}, T={T}); medians of {args.rounds} rounds x {args.steps} calls, ms")
    print("| what | ms (median) | min | max |\n| --- | ---: | ---: | ---: |")
    for what, (med, lo, hi) in rows.items():
        print(f"| {what} | {med:.3f} | {lo:.3f} | {hi:.3f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=name, torch=torch.__version__, dtype=args.dtype, compile=args.compile,
                           scale=args.scale, batch=B, block_size=T, message_bytes=message.numel() * message.element_size(),
                           rounds=args.rounds, steps=args.steps,
                           ms={what: dict(median=m, min=lo, max=hi) for what, (m, lo, hi) in rows.items()}), f, indent=1)


if __name__ == "__main__":
    main()
