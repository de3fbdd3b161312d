"""
Training throughput of the dense model and of every sync-count config in `sim` mode,
side by side in one run: the cost of simulating TP ranks in one process.

    python bench/throughput.py                                  # CPU scale (char configs), fp32
    python bench/throughput.py --set n_embd=256 n_head=8 batch_size=8     # a wider model
    python bench/throughput.py --scale gpt2 --device cuda --dtype bfloat16 --compile on
    python bench/throughput.py --compile both       # every config eager and compiled, side by side

Each measurement is `--steps` full training steps (forward, backward, AdamW) on a
fixed random batch, after `--warmup` untimed steps. The configs take turns, round
after round, so drift on a noisy machine hits them alike; a config's ratio to dense
is the median over rounds of (its tokens/s / dense tokens/s in the same round), and the
mean of those per-round ratios with its 95% t interval: a goal such as ">= 0.98 of dense" is
met only when the interval's low end clears it.
With --compile both, every config runs eager and torch.compile'd (a separate model of the
same seed), and the table adds compiled / eager, the median over rounds of the same ratio.
With --partials, every TP config also runs the way `sim` did before a synced sublayer summed
its ranks in one GEMM (comms.SimComm.sums_in_gemm): per-rank partials, then the sync's sum.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import configurator  # noqa: E402
from bench.harness import autocast, build, random_batch, train_steps  # noqa: E402
from bench.stats import paired_stats  # noqa: E402
from comms import SimComm  # noqa: E402
from mfu import flops_per_token, peak_flops_per_device  # noqa: E402
from model import describe_pattern, model_args_from  # noqa: E402

SCALES = {  # config file prefixes; 'dense' is the tp_size=1 file
    "char": "config/train_shakespeare_char",
    "gpt2": "config/train_gpt2",
}
SYNC_COUNTS = (24, 18, 16, 12, 8, 7, 6, 5, 2, 1)
SCHEMES = ("ladder", "24comm_half", "24comm_bf16", "24comm_int8")  # hide and shrink (DESIGN section 8), on request


class PartialsSimComm(SimComm):
    """The `sim` path before the fused sum: every sublayer writes its per-rank partials, the sync sums them."""
    sums_in_gemm = False


def build_entry(path, args, compiled, partials=False):
    config, _ = configurator.configure(configurator.train_defaults(), [path] + [f"--{kv}" for kv in args.set])
    if args.batch_size:
        config["batch_size"] = args.batch_size
    sync = dict(sync_fraction=config["sync_fraction"], sync_dtype=config["sync_dtype"])
    comm = (PartialsSimComm if partials else SimComm)(config["tp_size"], **sync)
    model, optimizer = build(model_args_from(config, vocab_size=args.vocab_size), comm, device=args.device)
    if compiled:
        # every model here is compiled from the same GPT.forward code, and dynamo's recompile limit
        # (8) counts them all together: at a graph per model (2 before the sync tally was made ahead
        # of the first trace) the ninth compiled config would silently run eager. One run compiles one model.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    step_model = torch.compile(model) if compiled else model
    x, y = random_batch(args.vocab_size, config["batch_size"], config["block_size"], device=args.device)
    return dict(model=model, step_model=step_model, optimizer=optimizer, x=x, y=y)


def run_steps(entry, n, args):
    """n timed steps; seconds per step."""
    return train_steps(entry["step_model"], entry["optimizer"], entry["x"], entry["y"], n,
                       autocast(args.device, args.dtype), args.device)


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--scale", choices=sorted(SCALES), default="char")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--compile", choices=("off", "on", "both"), default="off",
                        help="torch.compile the models; 'both' times every config eager and compiled")
    parser.add_argument("--steps", type=int, default=5, help="timed training steps per measurement")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=7, help="measurements per config, interleaved")
    parser.add_argument("--batch_size", type=int, default=0, help="override the configs' batch size")
    parser.add_argument("--vocab_size", type=int, default=0, help="default: 65 (char) or 50304 (gpt2)")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's)")
    parser.add_argument("--partials", action="store_true",
                        help="also time every TP config without the fused sum (per-rank partials, then the sync)")
    parser.add_argument("--configs", nargs="*", default=[], metavar="NAME",
                        help="only these configs (and dense), e.g. --configs 24comm 12comm; the schemes "
                             f"{', '.join(SCHEMES)} run only when named")
    parser.add_argument("--base", default="dense", metavar="NAME",
                        help="the config every ratio is to (paired per round), e.g. --base 24comm")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides for every config, e.g. --set n_embd=256 n_head=8")
    args = parser.parse_args()
    if args.steps < 1 or args.rounds < 1 or args.warmup < 0:
        parser.error(f"--steps and --rounds must be at least 1, --warmup at least 0 "
                     f"(got {args.steps}, {args.rounds}, {args.warmup})")
    args.vocab_size = args.vocab_size or (65 if args.scale == "char" else 50304)
    if args.threads:
        torch.set_num_threads(args.threads)

    prefix = SCALES[args.scale]
    counts = ["dense"] + [f"{n}comm" for n in SYNC_COUNTS]
    known = counts + [s for s in SCHEMES if os.path.exists(f"{prefix}_{s}.py")]
    unknown = sorted(set(args.configs + [args.base]) - set(known))
    if unknown:
        parser.error(f"--configs/--base: unknown {', '.join(unknown)}; allowed: {', '.join(known)}")
    configs = ["dense"] + [c for c in known[1:] if c in args.configs or c == args.base] if args.configs else counts
    paths = {"dense": prefix + ".py", **{name: f"{prefix}_{name}.py" for name in known[1:]}}
    variants = {"off": [False], "on": [True], "both": [False, True]}[args.compile]
    names = [(config, compiled) for config in configs for compiled in variants]
    entries = {name: build_entry(paths[name[0]], args, name[1]) for name in names}
    if args.partials:  # each TP config also as per-rank partials summed at the sync, side by side
        for config, compiled in list(names):
            if config != "dense":
                names.insert(names.index((config, compiled)) + 1, (config + " partials", compiled))
                entries[config + " partials", compiled] = build_entry(paths[config], args, compiled, partials=True)
    for name in names:
        if args.warmup:
            run_steps(entries[name], args.warmup, args)  # compiles, where compiled

    tokens = {name: entries[name]["x"].numel() * args.steps for name in names}
    rate = {name: [] for name in names}
    for _ in range(args.rounds):
        for name in names:
            rate[name].append(tokens[name] / (run_steps(entries[name], args.steps, args) * args.steps))

    device_type = args.device.split(":")[0]
    peak = peak_flops_per_device(device_type, args.dtype)
    dense = entries["dense", variants[0]]["model"]
    base = args.base
    print(f"# throughput, scale={args.scale}, device={args.device} ({torch.get_num_threads()} threads), "
          f"dtype={args.dtype}, compile={args.compile}, batch {tuple(entries['dense', variants[0]]['x'].shape)}, "
          f"n_embd {dense.config.n_embd}, "
          f"{dense.get_num_params() / 1e6:.2f}M params, {args.rounds} rounds x {args.steps} steps, torch {torch.__version__}")
    both = args.compile == "both"
    print(f"| config | blocks | syncs | exposed | sync_fraction, sync_dtype | compiled | tokens/s (median) | ms/step | "
          f"ratio to {base} (median) | ratio: mean [95% CI] | MFU |" + (" compiled / eager (median) |" if both else ""))
    print("| --- | --- | ---: | ---: | --- | --- | ---: | ---: | ---: | --- | ---: |" + (" ---: |" if both else ""))
    for config, compiled in names:
        model, rates = entries[config, compiled]["model"], rate[config, compiled]
        median = statistics.median(rates)
        ratios = [r / d for r, d in zip(rates, rate[base, compiled])]
        ratio, stats = statistics.median(ratios), paired_stats(ratios)
        interval = "" if stats["ci_low"] is None else f"{stats['mean']:.3f} [{stats['ci_low']:.3f}, {stats['ci_high']:.3f}]"
        ms = 1000 * entries[config, compiled]["x"].numel() / median
        mfu = f"{flops_per_token(model) * median / peak * 100:.1f}%" if peak else "n/a"
        blocks = describe_pattern(model.config.block_types) if model.config.tp_size > 1 else "dense"
        gain = ""
        if both and compiled:
            gain = f" {statistics.median(c / e for c, e in zip(rates, rate[config, False])):.3f} |"
        elif both:
            gain = " |"
        comm = model.comm
        shrink = f"{comm.sync_fraction:g}, {comm.sync_dtype or '-'}".replace("torch.", "")
        print(f"| {config} | {blocks} | {model.sync_points} | {model.exposed_syncs} | {shrink} | {'yes' if compiled else 'no'} | "
              f"{median:,.0f} | {ms:.1f} | {ratio:.3f} | {interval} | {mfu} |{gain}")


if __name__ == "__main__":
    main()
