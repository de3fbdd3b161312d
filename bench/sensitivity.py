"""
Block-wise sync sensitivity of a trained TP model (the SPD paper's method, Kim et al. ICML 2025).

Every pattern of one tp_size has the same weights, so a trained `tp` model can be evaluated under
any other pattern with no training (zero-shot). For each block i, convert only block i tp -> spd
(and, separately, tp -> parallel) and measure the val-loss increase on a fixed val sample; rank
the blocks (least sensitive first); then build greedy patterns with k = 2n, 2n-2, ..., n syncs, and
n+1 (every block spd but the most sensitive), by converting the least sensitive blocks to spd
first, and evaluate them against the uniform patterns
(24comm, 18comm, 16comm, 12comm, 7comm, 5comm, 2comm, 1comm at 12 layers) on the same sample.
--finetune_iters N also trains every pattern N steps (AdamW at the run's min_lr) and evaluates again.

$ python -m bench.sensitivity runs/24comm_s1/ckpt.pt runs/24comm_s2/ckpt.pt --out bench/studies/sensitivity/char64_s1-3
$ python -m bench.sensitivity out-gpt2-24comm/ckpt.pt --device=cuda --eval_batches=50 --batch_size=8   # GPT-2 124M
$ python -m bench.sensitivity gpt2 --tp_size=2 --device=cuda --eval_batches=50 --batch_size=8   # OpenAI's weights

A source is a trained all-tp checkpoint (a ckpt.pt or run directory), or pretrained GPT-2 as
train.py's init_from takes it (gpt2, gpt2-medium, ..., or a save_pretrained directory; through
transformers), cut into --tp_size shards, all blocks tp, evaluated on --data_dir (default
data/openwebtext), with train.py's default fine-tune settings.

Writes per checkpoint <out>/<name>.json (deltas, ranking, every pattern's loss), and over all of
them sensitivity.csv, patterns.csv and sensitivity.png; prints the tables.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import csv
import json
import os
import statistics
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import checkpoint as ckpt
from model import GPT, GPTConfig, count_sync_points, describe_pattern, parse_block_types
from configurator import train_defaults
from bench.stats import paired_stats

UNIFORM = {"24comm": "tp", "18comm": "tp,spd", "16comm": "tp,spd,spd", "12comm": "spd", "7comm": "spd,parallel",
           "5comm": "spd,parallel,parallel", "2comm": "parallel*5,spd", "1comm": "parallel"}


def val_sample(data_dir, block_size, batches, batch_size, seed):
    """A fixed sample of val windows, the same for every pattern and checkpoint: (batches, B, L+1)."""
    data = np.memmap(os.path.join(data_dir, "val.bin"), dtype=np.uint16, mode="r")
    g = torch.Generator().manual_seed(seed)
    ix = torch.randint(len(data) - block_size - 1, (batches * batch_size,), generator=g)
    windows = torch.stack([torch.from_numpy(data[i:i + block_size + 1].astype(np.int64)) for i in ix])
    return windows.view(batches, batch_size, block_size + 1)


@torch.no_grad()
def evaluate(model, sample, device):
    """Mean cross-entropy over the sample (TP rank 0's logits, lossless), as train.py's eval."""
    model.eval()
    losses = [model(w[:, :-1].to(device), w[:, 1:].to(device))[1].item() for w in sample]
    return sum(losses) / len(losses)


def finetune(model, pattern, state, run_config, iters, data_dir, device, seed):
    """Train the model, converted to pattern, for iters steps from state (AdamW at the run's min_lr)."""
    model.load_state_dict(state)
    model.set_block_types(pattern)
    model.train()
    optimizer = model.configure_optimizers(run_config["weight_decay"], run_config["min_lr"],
                                           (run_config["beta1"], run_config["beta2"]), device.split(":")[0])
    data = np.memmap(os.path.join(data_dir, "train.bin"), dtype=np.uint16, mode="r")
    g, L = torch.Generator().manual_seed(seed), model.config.block_size
    for _ in range(iters):  # the same batches for every pattern
        ix = torch.randint(len(data) - L - 1, (run_config["batch_size"],), generator=g)
        w = torch.stack([torch.from_numpy(data[i:i + L + 1].astype(np.int64)) for i in ix]).to(device)
        loss = model(w[:, :-1], w[:, 1:])[1]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), run_config["grad_clip"] or float("inf"))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def load_source(path, args):
    """(model on args.device, model_args, run config, iteration) of a trained tp checkpoint or of
    pretrained GPT-2 (ckpt.init_source says which); CheckpointError for anything else."""
    if ckpt.init_source(path)[0] == "transformers":
        weights = ckpt.read_weights(path)
        model_args = dict(weights.shape, tp_size=args.tp_size, block_types="tp", dropout=0.0)
        model = GPT(GPTConfig(**model_args)).to(args.device)
        model.load_dense_state_dict(weights.dense)  # shards cut from the dense weights
        return model, model_args, dict(train_defaults(), dataset="openwebtext", seed=None), None
    checkpoint = ckpt.load(ckpt.init_source(path)[1], "cpu")
    model = ckpt.model_as_run(checkpoint, args.device)  # a schedule's pattern in force, its sync width and dtype
    model_args = dict(checkpoint["model_args"], dropout=0.0, block_types=",".join(model.config.block_types))
    if set(model.config.block_types) != {"tp"} or model_args["tp_size"] < 2:
        sys.exit(f"error: {path} is not a tp model with tp_size > 1 (blocks {model_args['block_types']}, "
                 f"tp_size={model_args['tp_size']}): the study converts tp blocks")
    return model, model_args, checkpoint["config"], checkpoint.get("iter_num")


def study(path, args):
    model, model_args, run_config, iter_num = load_source(path, args)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    data_dir = args.data_dir or run_config.get("data_dir") or os.path.join(ROOT, "data", run_config["dataset"])
    sample = val_sample(data_dir, model_args["block_size"], args.eval_batches, args.batch_size, args.sample_seed)
    n, T = model_args["n_layer"], model_args["tp_size"]

    def loss_of(pattern):
        model.load_state_dict(state)  # the trained weights, whatever a fine-tune did
        model.set_block_types(pattern)
        return evaluate(model, sample, args.device)

    base = loss_of(("tp",) * n)
    delta = {kind: [loss_of(("tp",) * i + (kind,) + ("tp",) * (n - i - 1)) - base for i in range(n)]
             for kind in ("spd", "parallel")}
    ranking = sorted(range(n), key=lambda i: delta["spd"][i])  # least sensitive first
    patterns = []  # (family, name, pattern)
    # k = 2n - j syncs: the j least sensitive blocks become spd; j = n - 1 keeps only the most
    # sensitive block tp (one sync more than spd everywhere: what the sensitive block alone is worth)
    for j in sorted(set(range(0, n + 1, 2)) | {n - 1}):
        kinds = tuple("spd" if i in ranking[:j] else "tp" for i in range(n))
        patterns.append(("greedy", f"greedy{2 * n - j}", kinds))
    for name, spec in UNIFORM.items():
        try:
            patterns.append(("uniform", name, parse_block_types(spec, n)))
        except ValueError:
            pass  # a unit that does not tile this depth
    rows = []
    for family, name, kinds in patterns:
        loss = base if kinds == ("tp",) * n else loss_of(kinds)
        row = dict(family=family, name=name, pattern=describe_pattern(kinds), kinds=list(kinds),
                   syncs=count_sync_points(kinds, T), val_loss=loss, delta=loss - base)
        if args.finetune_iters:
            finetune(model, kinds, state, run_config, args.finetune_iters, data_dir, args.device, args.sample_seed)
            row["val_loss_ft"] = evaluate(model, sample, args.device)
        rows.append(row)
        print(f"  {family:7s} {row['syncs']:3d} syncs {row['pattern']:40s} val {loss:.4f} ({loss - base:+.4f})"
              + (f" fine-tuned {row['val_loss_ft']:.4f}" if args.finetune_iters else ""), flush=True)
    return dict(checkpoint=path, iter_num=iter_num, seed=run_config.get("seed"), base=base,
                block_size=model_args["block_size"], eval_batches=args.eval_batches, batch_size=args.batch_size,
                delta=delta, ranking=ranking, patterns=rows, eval_tokens=args.eval_batches * args.batch_size *
                model_args["block_size"], sample_seed=args.sample_seed, finetune_iters=args.finetune_iters)


def plot(results, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    n = len(results[0]["delta"]["spd"])
    width = 0.8 / len(results)
    for s, res in enumerate(results):
        ax1.bar([i + s * width for i in range(n)], res["delta"]["spd"], width, label=f"seed {res['seed']}")
    ax1.set(xlabel="block converted tp -> spd (alone)", ylabel="val loss increase (nats)",
            title="block-wise sensitivity (zero-shot)")
    ax1.legend()
    plotted = []
    for family, marker in (("greedy", "o-"), ("uniform", "s")):
        by_syncs = {}
        for res in results:
            for row in res["patterns"]:
                if row["family"] == family:
                    by_syncs.setdefault(row["syncs"], []).append(row["delta"])
        xs = [x for x in sorted(by_syncs) if x < 2 * n]  # 24comm is the reference: zero by definition
        plotted += [statistics.fmean(by_syncs[x]) for x in xs]
        ax2.plot(xs, plotted[len(plotted) - len(xs):], marker, label=f"{family} (mean over seeds)")
    log = bool(plotted) and min(plotted) > 0  # a pattern that costs nothing (or helps) has no log
    ax2.set(xlabel="sync points per pass", ylabel=f"val loss increase over all-tp (nats{', log' if log else ''})",
            yscale="log" if log else "linear", title="zero-shot: greedy vs uniform patterns")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "sensitivity.png"), dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", help="ckpt.pt files (or run directories) of trained all-tp runs "
                        "(one per seed), or pretrained GPT-2: gpt2, gpt2-medium, ... or a save_pretrained directory")
    parser.add_argument("--tp_size", type=int, default=2, help="pretrained GPT-2 only: its TP shards")
    parser.add_argument("--out", default="runs/sensitivity", help="folder for the tables and plot (default runs/sensitivity: "
                        "never a committed study's folder unless named)")
    parser.add_argument("--eval_batches", type=int, default=16)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--sample_seed", type=int, default=0, help="the fixed val sample (and fine-tune batches)")
    parser.add_argument("--finetune_iters", type=int, default=0)
    parser.add_argument("--data_dir", default="", help="default: the run's data_dir or data/<dataset>")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for path in args.checkpoints:
        try:
            print(f"{path}:", flush=True)
            res = study(path, args)
        except (ckpt.CheckpointError, ValueError) as e:  # a foreign checkpoint, a tp_size that does not divide n_head
            sys.exit(f"error: {e}")
        name = os.path.basename(os.path.abspath(path) if ckpt.init_source(path)[0] == "transformers" or
                                os.path.isdir(path) else os.path.dirname(os.path.abspath(path)))
        with open(os.path.join(args.out, f"{name}.json"), "w") as f:
            json.dump(res, f, indent=1)
    # every study in --out with the same sample and fine-tune (earlier calls: one seed at a time)
    results = []
    for name in sorted(os.listdir(args.out)):
        if name.endswith(".json"):
            with open(os.path.join(args.out, name)) as f:
                res = json.load(f)
            same = ("eval_batches", "batch_size", "sample_seed", "finetune_iters")
            if all(res.get(k) == getattr(args, k) for k in same):
                results.append(res)
    with open(os.path.join(args.out, "sensitivity.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seed", "block", "delta_spd", "delta_parallel", "rank_spd"])
        for res in results:
            for i, (ds, dp) in enumerate(zip(res["delta"]["spd"], res["delta"]["parallel"])):
                w.writerow([res["seed"], i, f"{ds:.5f}", f"{dp:.5f}", res["ranking"].index(i)])
    with open(os.path.join(args.out, "patterns.csv"), "w", newline="") as f:
        keys = ["seed", "family", "name", "pattern", "syncs", "val_loss", "delta"] + \
            (["val_loss_ft"] if args.finetune_iters else [])
        w = csv.DictWriter(f, keys, extrasaction="ignore")
        w.writeheader()
        for res in results:
            for row in res["patterns"]:
                w.writerow({**row, "seed": res["seed"], "val_loss": f"{row['val_loss']:.5f}",
                            "delta": f"{row['delta']:.5f}"})
    # paired over seeds: greedy minus uniform at the same sync count
    print("\npaired (same seed) greedy - uniform at equal sync counts, 95% t interval:")
    for k in sorted({r["syncs"] for res in results for r in res["patterns"] if r["family"] == "greedy"}, reverse=True):
        diffs = []
        for res in results:
            g = [r for r in res["patterns"] if r["family"] == "greedy" and r["syncs"] == k]
            u = [r for r in res["patterns"] if r["family"] == "uniform" and r["syncs"] == k]
            if g and u:  # a seed whose greedy pattern is the uniform one counts, as a difference of 0
                diffs.append(g[0]["val_loss"] - u[0]["val_loss"])
        if diffs:
            s = paired_stats(diffs)
            ci = "" if s["ci_low"] is None else f" [{s['ci_low']:+.4f}, {s['ci_high']:+.4f}]"
            print(f"  k={k}: n={s['n']} mean {s['mean']:+.4f}{ci}")
    plot(results, args.out)
    print(f"wrote {args.out}/sensitivity.csv, patterns.csv, sensitivity.png")


if __name__ == "__main__":
    main()
