"""
What simulating a lossy network costs: training step time lossless vs Bernoulli vs
Gilbert-Elliott (loss on forward and backward), side by side in one run, and the
throughput of mask generation alone in packets per second.

    python -m bench.lossy_overhead                          # CPU scale: the 12comm char config
    python -m bench.lossy_overhead --config config/train_gpt2_12comm.py --device cuda --dtype bfloat16

Step times: the link settings take turns, round after round, each measurement
`--steps` full training steps on a fixed batch; a setting's ratio is the median
over rounds of its step time / the lossless step time of the same round.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import statistics
import time

import torch

import configurator
from bench.harness import autocast, build, random_batch, synchronize, train_steps
from comms import SimComm
from links import FWD, link_from
from model import model_args_from

SETTINGS = {  # name -> link config keys (links.link_from)
    "lossless": dict(loss_model="none"),
    "bernoulli 1%": dict(loss_model="bernoulli", loss_rate=0.01),
    "GE bursty": dict(loss_model="gilbert_elliott", ge_preset="bursty"),
    "GE noisy": dict(loss_model="gilbert_elliott", ge_preset="noisy"),
}


def step_times(args):
    config, _ = configurator.configure(configurator.train_defaults(), [args.config])
    vocab = 50304 if config["dataset"] == "openwebtext" else 65
    entries = {}
    for name, kwargs in SETTINGS.items():
        link = link_from({**kwargs, "seed": 0, "packet_bytes": config["packet_bytes"]})
        model, optimizer = build(model_args_from(config, vocab), SimComm(config["tp_size"], link), args.device)
        x, _ = random_batch(vocab, config["batch_size"], config["block_size"], device=args.device)
        entries[name] = (model, optimizer, x)
    ctx = autocast(args.device, args.dtype)

    def run(name, n):
        model, optimizer, x = entries[name]
        return train_steps(model, optimizer, x, x, n, ctx, args.device)

    for name in entries:
        run(name, 2)  # warm up
    times = {name: [] for name in entries}
    for _ in range(args.rounds):
        for name in entries:
            times[name].append(run(name, args.steps))
    model, _, x = entries["lossless"]
    print(f"# step time, {args.config}, batch {tuple(x.shape)}, tp={model.config.tp_size}, "
          f"{model.sync_points} sync points, device={args.device} ({torch.get_num_threads()} threads), "
          f"dtype={args.dtype}, {args.rounds} rounds x {args.steps} steps, torch {torch.__version__}")
    print("| link (fwd+bwd) | ms/step (median) | ratio to lossless (median) | packets per step |")
    print("| --- | ---: | ---: | ---: |")
    for name in entries:
        ratio = statistics.median(t / base for t, base in zip(times[name], times["lossless"]))
        link = entries[name][0].comm.link
        per_step = link.stats()["total"]["packets_sent"] / ((args.rounds * args.steps) + 2) if link.lossy else 0
        print(f"| {name} | {statistics.median(times[name]) * 1000:.1f} | {ratio:.3f} | {per_step:,.0f} |")


def mask_throughput(args):
    print(f"\n# mask generation alone, device={args.device}, {args.rounds} rounds, median")
    print("| link model | packets per message | messages | packets/s (median) | cost vs bernoulli |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for n_packets, messages in ((1_000_000, 4), (700, 2000)):
        rates = {}
        for name, kwargs in list(SETTINGS.items())[1:]:
            link = link_from({**kwargs, "seed": 0})
            link.arrived(0, 1, FWD, "p", n_packets, args.device)  # create the stream
            samples = []
            for _ in range(args.rounds):
                synchronize(args.device)
                t0 = time.perf_counter()
                for _ in range(messages):
                    link.arrived(0, 1, FWD, "p", n_packets, args.device)
                synchronize(args.device)
                samples.append(n_packets * messages / (time.perf_counter() - t0))
            rates[name] = statistics.median(samples)
        for name, rate in rates.items():
            print(f"| {name} | {n_packets:,} | {messages:,} | {rate / 1e6:.1f}M | {rates['bernoulli 1%'] / rate:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--config", default="config/train_shakespeare_char_12comm.py")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    step_times(args)
    mask_throughput(args)


if __name__ == "__main__":
    main()
