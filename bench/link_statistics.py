"""
The link models' loss statistics against theory: observed loss rate (with its z-score),
mean loss-burst length, and for Gilbert-Elliott the mean bad-state and good-state run
lengths against 1/r and 1/p, over millions of packets drawn as training draws them
(one directed link, consecutive messages, the chain carried across messages).

    python -m bench.link_statistics                   # 4M packets per model, 1,000-packet messages
    python -m bench.link_statistics --packets 20000000 --message 700

tests/test_lossy.py asserts the same quantities within 4 standard errors, with the same helpers
(bench/harness.py).
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse

import numpy as np

from bench.harness import draw, runs, standard_error
from links import FWD, GE_PRESETS, BernoulliLoss, GilbertElliottLoss, LossyLink


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--packets", type=int, default=4_000_000, help="packets per model")
    parser.add_argument("--message", type=int, default=1000, help="packets per message")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    models = {f"bernoulli {rate:g}": BernoulliLoss(rate) for rate in (0.001, 0.01, 0.1)}
    models.update({f"GE {name}": GilbertElliottLoss(*GE_PRESETS[name]) for name in GE_PRESETS if name != "zero"})
    messages = args.packets // args.message
    print(f"# {messages * args.message:,} packets per model in {messages:,} messages of {args.message:,}, "
          f"seed {args.seed}")
    print("| model | loss rate: theory | observed | z | mean burst: theory | observed "
          "| bad run: 1/r | observed | good run: 1/p | observed |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    worst = 0.0
    for i, (name, model) in enumerate(models.items()):
        seed = args.seed + 1000 * i  # a stream per model: rows sharing one seed would share their uniforms
        link = LossyLink(model, seed=seed)
        lost = draw(link, messages * args.message, messages)
        z = (lost.mean() - model.stationary_loss) / standard_error(model, len(lost))
        worst = max(worst, abs(z))
        bursts, _ = runs(lost)
        row = [name, f"{model.stationary_loss:.5f}", f"{lost.mean():.5f}", f"{z:+.2f}",
               f"{model.mean_burst:.3f}", f"{bursts.mean():.3f}"]
        if isinstance(model, GilbertElliottLoss):
            stream = LossyLink(model, seed=seed).stream(0, 1, FWD, "cpu")
            bad = np.concatenate([model.bad_states(args.message, stream).numpy() for _ in range(messages)])
            bad_runs, good_runs = runs(bad)
            row += [f"{1 / model.r:.1f}", f"{bad_runs.mean():.2f}", f"{1 / model.p:.0f}", f"{good_runs.mean():.1f}"]
        else:
            row += ["", "", "", ""]
        print("| " + " | ".join(row) + " |")
    print(f"\nlargest |z| of the observed loss rates: {worst:.2f} (|z| > 4 would fail tests/test_lossy.py)")


if __name__ == "__main__":
    main()
