"""Exploratory, not a planned test: each planned contrast's paired difference at the GPU seed (39)
beside the CPU seeds' (38, 40-48), as the amended host rule of plan.md asks ("shown apart").

    python -m bench.studies.lost_packets.apart bench/studies/lost_packets/experiment_summary.csv [apart.json]
"""
import csv
import json
import sys

from bench.stats import paired_stats

GPU_SEED, SEEDS = 39, range(38, 49)
CONFIGS = ("shakespeare_char_24comm", "shakespeare_char_2comm")


def main(path):
    rows = [r for r in csv.DictReader(open(path)) if r["kind"] == "run"]
    loss = {(r["config"].removeprefix("config/train_").removesuffix(".py"), r["setting"], int(r["seed"])):
            float(r["final_val_loss"]) for r in rows}
    contrasts = [(f"A {c[17:]} {rate} {opt} - zero", c, f"{rate}_{opt}", f"{rate}_zero")
                 for c in CONFIGS for rate in ("b1", "b3") for opt in ("rescale", "hadamard")]
    contrasts += [(f"B {c[17:]} {s} - lossless", c, s, "lossless") for c in CONFIGS
                  for s in ("b1_zero", "b1_rescale", "b1_hadamard", "b3_zero", "b3_rescale", "b3_hadamard")]
    found = {}
    print(f"| contrast | seed {GPU_SEED} (GPU) | CPU seeds: mean [95% CI] | CPU seeds: range | GPU seed inside the range |")
    print("| --- | ---: | --- | --- | --- |")
    for name, config, a, b in contrasts:
        diff = {s: loss[(config, a, s)] - loss[(config, b, s)] for s in SEEDS}
        cpu = [d for s, d in diff.items() if s != GPU_SEED]
        st, inside = paired_stats(cpu), min(cpu) <= diff[GPU_SEED] <= max(cpu)
        found[name] = dict(gpu=diff[GPU_SEED], cpu=st, cpu_min=min(cpu), cpu_max=max(cpu), inside=inside)
        print(f"| {name} | {diff[GPU_SEED]:+.4f} | {st['mean']:+.4f} [{st['ci_low']:+.4f}, {st['ci_high']:+.4f}] "
              f"(n={st['n']}) | [{min(cpu):+.4f}, {max(cpu):+.4f}] | {'yes' if inside else 'no'} |")


    if len(sys.argv) > 2:  # a json path: the same numbers for bench/render.py
        with open(sys.argv[2], "w") as f:
            json.dump(found, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
