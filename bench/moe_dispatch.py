"""
Training tokens/s of the MoE MLP's dispatch (moe.py) against the per-expert loop it replaced, side
by side in one run: the loop found each expert's tokens with a `nonzero` of its own, a device-to-host
sync per expert and layer; the dispatch sorts the (expert, token) pairs once and syncs once per layer.

    python -m bench.moe_dispatch                                   # CPU, the char 24comm config, 8 experts
    python -m bench.moe_dispatch --device cuda --dtype bfloat16 --set n_embd=768 n_head=12

Both models start from the same draw (seed 0) and train on the same fixed batch; they take turns,
round after round, and the table gives the mean over rounds of the per-round ratio (dispatch tokens/s
over loop tokens/s) with its 95% t interval. The first step's losses are printed: the two compute
the same function, so they agree to rounding.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import types

import torch

import configurator
from bench.harness import autocast, build, random_batch, train_steps
from bench.stats import paired_stats
from comms import SimComm
from model import model_args_from
from moe import MoEMLP


def loop_forward(self, x, summed=False):
    """MoEMLP.forward as it was before the one-sort dispatch: the routing as now, then each expert's tokens
    found by a `nonzero` of their own and its output added in, expert by expert."""
    Rx, B, L, C = x.size()
    x = x.view(Rx, B * L, C)
    logits = self.router(x)
    probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)  # (Rx, N, E)
    top_p, top_e = probs.topk(self.top_k, dim=-1)
    chosen = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, top_e, True)
    weights = top_p / top_p.sum(-1, keepdim=True) if self.top_k > 1 else top_p
    gates = torch.zeros_like(probs).scatter(-1, top_e, weights)
    load = chosen.float().mean(1) / self.top_k
    self.aux_loss = (len(self.experts) * (load * probs.mean(1)).sum(-1)).mean()
    out = None
    for e, expert in enumerate(self.experts):
        tokens = chosen[..., e].any(0).nonzero().squeeze(1)  # (n,): a host sync per expert
        y = expert(x[:, tokens]) * gates[:, tokens, e, None].to(x.dtype)
        out = torch.zeros(y.size(0), B * L, C, dtype=y.dtype, device=y.device) if out is None else out
        out = out.index_add(1, tokens, y)
    out = self.dropout(out).view(-1, B, L, C)
    return out.sum(0, keepdim=True) if summed else out


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--config", default="config/train_shakespeare_char_24comm.py")
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top_k", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--steps", type=int, default=3, help="timed training steps per measurement")
    parser.add_argument("--rounds", type=int, default=7, help="measurements per dispatch, interleaved")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = [f"--n_experts={args.experts}", f"--experts_top_k={args.top_k}"] + [f"--{kv}" for kv in args.set]
    config, _ = configurator.configure(configurator.train_defaults(), [args.config] + overrides)
    ctx = autocast(args.device, args.dtype)
    x, y = random_batch(65, config["batch_size"], config["block_size"], device=args.device)
    entries = {}
    for name in ("loop", "dispatch"):
        model, optimizer = build(model_args_from(config, vocab_size=65), SimComm(config["tp_size"]), args.device)
        if name == "loop":
            for module in model.modules():
                if isinstance(module, MoEMLP):
                    module.forward = types.MethodType(loop_forward, module)
        with torch.no_grad(), ctx:
            first_loss = model(x, y)[1].item()
        train_steps(model, optimizer, x, y, 1, ctx, args.device)  # warm-up
        entries[name] = dict(model=model, optimizer=optimizer, first_loss=first_loss, rate=[])
    for _ in range(args.rounds):
        for entry in entries.values():
            entry["rate"].append(x.numel() / train_steps(entry["model"], entry["optimizer"], x, y, args.steps,
                                                         ctx, args.device))
    ratio = paired_stats([d / lp for d, lp in zip(entries["dispatch"]["rate"], entries["loop"]["rate"])])
    print(f"# MoE dispatch, {args.config}, {args.experts} experts, top_k {args.top_k}, device={args.device} "
          f"({torch.get_num_threads()} threads), dtype={args.dtype}, batch {tuple(x.shape)}, "
          f"{args.rounds} rounds x {args.steps} steps, torch {torch.__version__}")
    print("| dispatch | first loss | tokens/s (median) | / loop: mean [95% CI] |\n| --- | ---: | ---: | --- |")
    for name, entry in entries.items():
        rates = sorted(entry["rate"])
        cell = "1" if name == "loop" else f"{ratio['mean']:.3f} [{ratio['ci_low']:.3f}, {ratio['ci_high']:.3f}]"
        print(f"| {name} | {entry['first_loss']:.6f} | {rates[len(rates) // 2]:.0f} | {cell} |")


if __name__ == "__main__":
    main()
