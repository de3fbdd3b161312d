"""
The frontier (issue 33, item 6): what each way of cutting TP communication costs in val loss, against
what it buys in projected time to a target loss, on each network.

    python -m bench.frontier bench/studies/cliff/runs bench/studies/schemes/runs bench/studies/lost_packets/runs \
        --out bench/studies/frontier

MEASURED, in the runs given (char scale, `sim`): a setting's cost is its final val loss minus that of
lossless 24comm (Megatron's all-tp pattern, every sync whole and unquantized) of the same seed, with a
95% Student t interval over the seeds both ran. Its iterations to target are the first (interpolated)
iteration at which its val loss reaches that 24comm run's final val loss x (1 + --target).

PROJECTED, GPT-2 124M with TP=2 across two nodes (5 micro-steps of 12 x 1024 tokens per iteration,
bf16 messages), at 25, 100 and 400 Gb/s; a network is a bandwidth and the setting's own link (lossless,
or its loss rate). A micro-step is
    compute + exposed all-reduces (latency + bytes / bandwidth each) + encode/decode + resends
    + the replicated gradients' all-reduce / 5,
with each sync's forward all-reduce and backward mirror exchange; `sync_fraction` sends that share of
the channels; `int8`/`float8` one byte an element plus a float32 scale per token (`bfloat16` saves
nothing: the messages are bf16 already); `ladder` exposes its first forward all-reduce and of the others
only what outlasts a sublayer's forward (--ladder_overlap below 1: only that share of what it covers hides); the Hadamard rotation is paid on each lossy direction;
`transport='reliable'` waits E[rounds - 1] x (RTO + latency) for resends plus the resent bytes
(bench/step_time.py part 4). Compute, a sublayer's forward and the codecs are MEASURED on a GPU
(--gpu, bench/gpu_compute.py: an H100 by default); --gpu '' uses step_time's ASSUMED 40% MFU and free codecs.
Assumed throughout: that GPT-2 124M needs its iterations in the proportions these runs do.

Per network: every setting's time to target, its paired difference from 24comm on the same network (the
all-tp run of the same seed over that link with zero fill), the Pareto set (no other setting is both
lower in mean cost and faster in mean time; among settings that reached the target at every seed) and
the fastest of them, named with both intervals. Writes frontier.md, frontier.json and frontier.png to --out.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import os
import statistics
import sys

import torch

from bench.stats import CONFIDENCE, paired_stats
from bench.step_time import MICRO_STEPS, PACKET_BYTES, expected_resend_rounds, gpt2_projection, gpt2_sublayer_ms
from bench.summary import (SummaryError, aggregate, check_one_class, find_references, iters_to_target, parse_seeds,
                           read_runs, reference_for)
from links import link_from
from model import parse_block_types
from quantize import packets

BANDWIDTHS = (25, 100, 400)  # Gb/s
TOKENS, WIDTH = 12 * 1024, 768  # a GPT-2 124M micro-batch and its width
DEFAULT_GPU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_compute", "h100_compiled.json")
GPU_KEYS = {"compute": "micro-step fwd+bwd, one TP=2 rank", "attention": "forward of one attention sublayer, one TP=2 rank",
            "mlp": "forward of one MLP sublayer, one TP=2 rank", "int8": "message: int8 encode + decode (quantize.quantized)",
            "hadamard": "message: Hadamard rotate + rotate back (rotation.Rotation.received)"}


def compute_terms(path, mfu=0.4, gpu_peak=989e12):
    """ms of a rank's micro-step, of a sublayer's forward and of encoding + decoding one whole message."""
    if not path:
        return dict(compute=gpt2_projection(0, 25, mfu, gpu_peak)[0], sublayer=gpt2_sublayer_ms(mfu, gpu_peak), int8=0.0, hadamard=0.0,
                    source=f"ASSUMED: {mfu:.0%} MFU of {gpu_peak / 1e12:.0f} TFLOP/s, codecs free")
    try:
        with open(path) as f:
            measured = json.load(f)
        ms = {key: measured["ms"][name]["median"] for key, name in GPU_KEYS.items()}
    except (OSError, ValueError, KeyError) as e:
        raise SummaryError(f"--gpu={path!r} is not a bench/gpu_compute.py result ({e})")
    return dict(compute=ms["compute"], sublayer=(ms["attention"] + ms["mlp"]) / 2, int8=ms["int8"],
                hadamard=ms["hadamard"], source=f"MEASURED on {measured['device']} ({os.path.basename(path)})")


def ladder_overlap(value):
    """--ladder_overlap: a share in [0, 1], or bench/gpu_overlap.py's json, whose hidden share of a sublayer's
    forward (the mean of its attention and MLP rows, clipped to [0, 1]) is the forward overlap measured on a GPU."""
    try:
        share = float(value)
    except ValueError:
        try:
            with open(value) as f:
                forward = [r["hidden"] for r in json.load(f)["rows"] if r["passes"] == "forward"]
            share = min(1.0, max(0.0, statistics.fmean(forward)))
        except (OSError, ValueError, KeyError, TypeError, statistics.StatisticsError) as e:
            raise SummaryError(f"--ladder_overlap={value!r} is neither a share nor a bench/gpu_overlap.py result ({e})")
    if not 0 <= share <= 1:
        raise SummaryError(f"--ladder_overlap={value} must be in [0, 1]: a share of the coverable time")
    return share


def scheme_of(cfg, sync_points):
    """What a setting's config makes of a micro-step's communication."""
    kinds = set(parse_block_types(cfg["block_types"], cfg["n_layer"]))
    link = link_from(cfg)
    fraction = cfg.get("sync_fraction", 1.0)
    elements = round(fraction * WIDTH) * TOKENS
    quantized = cfg.get("sync_dtype", "") in ("int8", "float8_e4m3fn")
    rotated = cfg.get("sync_rotation", "none") == "hadamard"
    dtype = getattr(torch, cfg["sync_dtype"]) if quantized else torch.bfloat16
    return dict(syncs=sync_points, ladder=kinds == {"ladder"}, fraction=fraction, quantized=quantized,
                message=elements + 4 * TOKENS if quantized else 2 * elements,
                # what a reliable link resends, in quantize.py's wire format (int8: a 772-byte row a packet)
                packets=packets(TOKENS, round(fraction * WIDTH), dtype, PACKET_BYTES, rotated)[0],
                lossy_directions=(cfg["loss_fwd"] + cfg["loss_bwd"]) if link.lossy else 0, rotated=rotated,
                reliable=cfg.get("transport", "unreliable") == "reliable",
                model=link.model if link.lossy else None)


def exposed_sync_seconds(syncs, all_reduce, ladder, sublayer, backward_hidden=False, overlap=1.0):
    """Seconds of a pass pair's sync all-reduces (all_reduce seconds each) that no compute hides: every
    one, or for `ladder` the first forward one in full and of the others what outlasts a sublayer's forward
    (`sublayer` seconds); backward_hidden: its mirror exchanges likewise, behind a sublayer's backward
    (twice its forward). The frontier's plan models the forward only (`dist` hides both since issue 50).
    overlap: the share of the coverable time that overlapping really hides (1: a GPU's own communication
    engine, ASSUMED; on two shared CPU cores it is measured, bench/scheme_time.py)."""
    def hidden(behind):
        return all_reduce + (syncs - 1) * (all_reduce - overlap * min(all_reduce, behind))
    forward = hidden(sublayer) if ladder else syncs * all_reduce
    return forward + (hidden(2 * sublayer) if ladder and backward_hidden else syncs * all_reduce)


def micro_step_ms(scheme, gbps, terms, latency=1e-5, rto=1e-3):
    """PROJECTED ms of one GPT-2 124M micro-step of a scheme at gbps (module docstring)."""
    bandwidth = gbps * 1e9 / 8
    syncs, ms = scheme["syncs"], 1e3
    all_reduce = latency + scheme["message"] / bandwidth  # seconds; TP=2: each rank sends its message once
    comm = exposed_sync_seconds(syncs, all_reduce, scheme["ladder"], terms["sublayer"] / ms, overlap=terms.get("overlap", 1.0))
    codec = 2 * syncs * terms["int8"] * scheme["fraction"] if scheme["quantized"] else 0.0
    if scheme["rotated"]:
        codec += scheme["lossy_directions"] * syncs * terms["hadamard"] * scheme["fraction"]
    resend = 0.0
    if scheme["reliable"] and scheme["model"] is not None:
        n, q = scheme["packets"], scheme["model"].stationary_loss  # a resent packet: the message's bytes / n
        extra = expected_resend_rounds(scheme["model"], n) * (rto + latency) + q / (1 - q) * scheme["message"] / bandwidth
        resend = scheme["lossy_directions"] * syncs * extra
    replicated = gpt2_projection(0, gbps, net_latency=latency)[2]
    shared = (latency + replicated / bandwidth) / MICRO_STEPS
    return terms["compute"] + codec + (comm + resend + shared) * ms


def network_reference(a, aggregates):
    """The all-tp setting of a's group over a's own link with zero fill (24comm on that network), or None."""
    link = lambda c: {k: c.get(k) for k in ("loss_model", "loss_rate", "ge_preset", "loss_fwd", "loss_bwd")}  # noqa: E731
    for b in aggregates:
        if b["_megatron"] and b["_comparable"] == a["_comparable"] and link(b["_cfg"]) == link(a["_cfg"]):
            return b
    return None


def frontier(rows, curves, target, terms, latency=1e-5, rto=1e-3):
    """Per setting: its cost against lossless 24comm, its iterations and projected minutes to target per
    bandwidth, and the paired minutes against 24comm on its network. Returns (settings, networks)."""
    aggregates = aggregate(rows)
    for a in aggregates:
        a["_cfg"] = json.loads(a["_setting"])
    references = find_references(aggregates, "")
    if not references:
        raise SummaryError("no lossless 24comm runs (all-tp, whole unquantized syncs): the reference of every cost")
    stopped = {}  # seeds whose run ended before its last iteration (diverged, crashed, cut off): none reached the target
    for r in rows:
        if r["status"] != "done":
            stopped.setdefault(r["_setting"], set()).add(r["seed"])
    out = []
    for a in aggregates:
        if a["tp_size"] == 1:
            continue  # dense: no TP pair to project
        ref = reference_for(a, references)
        if ref is None:  # e.g. the placement study: no 24comm of its own data, model and schedule
            print(f"note: {a['_name']} has no lossless 24comm run of its group to pair with; left out", file=sys.stderr)
            continue
        seeds = sorted(set(a["_by_seed"]) & set(ref["_by_seed"]))
        for s in seeds:
            check_one_class(f"{a['_name']} - {ref['_name']}", a["_by_seed"][s], ref["_by_seed"][s])
        cost = paired_stats([a["_by_seed"][s]["final_val_loss"] - ref["_by_seed"][s]["final_val_loss"] for s in seeds])
        iters = {s: iters_to_target(curves[a["_by_seed"][s]["_dir"]],
                                    ref["_by_seed"][s]["final_val_loss"] * (1 + target)) for s in seeds}
        unfinished = sorted(stopped.get(a["_setting"], set()) & set(ref["_by_seed"]) - set(seeds))
        if unfinished:  # counted as seeds that did not reach the target, never silently dropped
            print(f"note: {a['_name']}: seed(s) {','.join(map(str, unfinished))} did not finish: counted as not reaching "
                  "the target", file=sys.stderr)
            iters.update({s: None for s in unfinished})
            seeds = sorted(iters)
        scheme = scheme_of(a["_cfg"], a["sync_points"])
        net_ref = network_reference(a, aggregates)
        net_scheme = scheme_of(net_ref["_cfg"], net_ref["sync_points"]) if net_ref else None
        per_bw = {}
        for gbps in BANDWIDTHS:
            step = micro_step_ms(scheme, gbps, terms, latency, rto)
            minutes = {s: None if i is None else i * MICRO_STEPS * step / 6e4 for s, i in iters.items()}
            reached = [m for m in minutes.values() if m is not None]
            entry = dict(ms_per_micro_step=step, minutes=statistics.fmean(reached) if reached else None,
                         all_reached=len(reached) == len(seeds) and bool(seeds), vs_24comm=None)
            if net_ref is not None:
                ref_step = micro_step_ms(net_scheme, gbps, terms, latency, rto)
                ref_curves = {s: curves[m["_dir"]] for s, m in net_ref["_by_seed"].items()}
                diffs = []
                for s in seeds:
                    if s in net_ref["_by_seed"] and s in a["_by_seed"]:
                        check_one_class(f"{a['_name']} - {net_ref['_name']}", a["_by_seed"][s], net_ref["_by_seed"][s])
                    ref_iters = iters_to_target(ref_curves[s], ref["_by_seed"][s]["final_val_loss"] * (1 + target)) \
                        if s in ref_curves else None
                    if minutes[s] is not None and ref_iters is not None:
                        diffs.append(minutes[s] - ref_iters * MICRO_STEPS * ref_step / 6e4)
                entry["vs_24comm"] = paired_stats(diffs)
            per_bw[gbps] = entry
        out.append(dict(name=a["_name"].removeprefix("train_"), aliases=[n.removeprefix("train_") for n in a["_aliases"]],
                        syncs=a["sync_points"], loss_rate=a["loss_rate"],
                        network="lossless" if a["loss_model"] == "none" else network_name(a), n=len(seeds),
                        message_mb=scheme["message"] / 1e6, exposed=1 if scheme["ladder"] else a["sync_points"],
                        cost=cost, reached=sum(i is not None for i in iters.values()),
                        reached_share_ci=share_interval(sum(i is not None for i in iters.values()), len(seeds)),
                        iters=statistics.fmean([i for i in iters.values() if i is not None]) if any(
                            i is not None for i in iters.values()) else None,
                        bandwidths=per_bw, network_reference=net_ref["_name"].removeprefix("train_") if net_ref else None))
    networks = {}
    for s in out:
        networks.setdefault(s["network"], []).append(s)
    for members in networks.values():
        members.sort(key=lambda s: (-s["syncs"], s["name"]))
        for gbps in BANDWIDTHS:
            pareto_marks(members, gbps)
    return out, networks


def share_interval(k, n):
    """The exact (Clopper-Pearson) 95% interval of the share of seeds that reached the target: how far
    "reached at every seed" rests on the seeds run (10 of 10 still allows a true share of 0.69)."""
    from scipy.stats import binomtest
    ci = binomtest(k, n).proportion_ci(CONFIDENCE) if n else None
    return [ci.low, ci.high] if ci else None


def display_name(s):
    """A setting's name and, where several config files train it, the others: '5comm (= 24comm/drop5)'."""
    others = [a for a in s["aliases"] if a != s["name"]]
    return s["name"] + (f" (= {', '.join(others)})" if others else "")


def network_name(a):
    cfg = a["_cfg"]
    kind = cfg["loss_model"] if cfg["loss_model"] != "gilbert_elliott" else f"gilbert_elliott {cfg['ge_preset']}"
    return f"{kind} {a['loss_rate']:.3g}"


def pareto_marks(members, gbps):
    """Mark the settings no other beats in both mean cost and mean minutes (both reached at every seed)."""
    eligible = [s for s in members if s["bandwidths"][gbps]["all_reached"] and s["cost"]["mean"] is not None]
    for s in members:
        s["bandwidths"][gbps]["pareto"] = s in eligible and not any(
            o is not s and o["cost"]["mean"] <= s["cost"]["mean"] and o["bandwidths"][gbps]["minutes"]
            <= s["bandwidths"][gbps]["minutes"] and (o["cost"]["mean"], o["bandwidths"][gbps]["minutes"])
            != (s["cost"]["mean"], s["bandwidths"][gbps]["minutes"]) for o in eligible)


def interval(stats, spec="+.4f"):
    if stats is None or stats["mean"] is None:
        return "-"
    if stats["ci_low"] is None:
        return f"{stats['mean']:{spec}} (n={stats['n']})"
    return f"{stats['mean']:{spec}} [{stats['ci_low']:{spec}}, {stats['ci_high']:{spec}}] (n={stats['n']})"


def report(networks, args, terms):
    overlap = "" if terms.get("overlap", 1.0) == 1 else f", ladder hiding {terms['overlap']:.0%} of what a sublayer covers"
    lines = [f"# The frontier: cost vs projected time to target ({args.target:.0%} above 24comm's final val loss)", "",
             f"Runs: {', '.join(args.sweep_dirs)}{' (seeds ' + args.seeds + ')' if args.seeds else ''}. Cost: final val "
             f"loss minus lossless 24comm's, same seed, {CONFIDENCE:.0%} t interval (MEASURED). Minutes: iterations to "
             f"target (MEASURED) x a projected GPT-2 124M TP=2 iteration ({MICRO_STEPS} micro-steps); compute "
             f"{terms['compute']:.2f} ms, sublayer forward {terms['sublayer']:.3f} ms, int8 {terms['int8']:.3f} ms and "
             f"Hadamard {terms['hadamard']:.3f} ms per whole message: {terms['source']}; all-reduce latency "
             f"{args.net_latency * 1e6:g} us, RTO {args.rto * 1e3:g} ms ASSUMED{overlap}. P: on the Pareto set of its network. "
             "Settings are pooled by what they train (bench/summary.py's fingerprint): one setting run by several "
             "studies under other names counts every seed of each.", ""]
    best, unmet = [], []
    lines += ["| network | setting | syncs | exposed | MB/sync | cost vs 24comm | reached [95% CI of the share] | iterations | "
              + " | ".join(f"{g} Gb/s: ms/micro-step | minutes | vs 24comm here, minutes" for g in BANDWIDTHS) + " |",
              "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | " + " | ".join("---: | ---: | ---" for _ in BANDWIDTHS) + " |"]
    for network, members in networks.items():
        for s in members:
            cells = []
            for g in BANDWIDTHS:
                b = s["bandwidths"][g]
                minutes = "-" if b["minutes"] is None else f"{b['minutes']:.1f}{' P' if b['pareto'] else ''}"
                cells.append(f"{b['ms_per_micro_step']:.1f} | {minutes} | {interval(b['vs_24comm'], '+.1f')}")
            lines.append(f"| {network} | {display_name(s)} | {s['syncs']:g} | {s['exposed']:g} | {s['message_mb']:.2f} | {interval(s['cost'])} | "
                         f"{s['reached']} / {s['n']} [{s['reached_share_ci'][0]:.2f}, {s['reached_share_ci'][1]:.2f}] | {'-' if s['iters'] is None else format(s['iters'], '.0f')} | "
                         + " | ".join(cells) + " |")
        for g in BANDWIDTHS:
            front = [s for s in members if s["bandwidths"][g]["pareto"]]
            if front:
                fast = min(front, key=lambda s: s["bandwidths"][g]["minutes"])
                best.append(dict(network=network, gbps=g, setting=fast["name"], aliases=fast["aliases"],
                                 reached=fast["reached"], n=fast["n"], cost=fast["cost"],
                                 minutes=fast["bandwidths"][g]["minutes"], vs_24comm=fast["bandwidths"][g]["vs_24comm"]))
        if not any(s["bandwidths"][g]["pareto"] for s in members for g in BANDWIDTHS):  # say so, not leave it out
            most = max(members, key=lambda s: s["reached"] / s["n"])
            unmet.append(f"{network} (the most often: {most['name']}, {most['reached']} / {most['n']} seeds)")
    lines += ["", "## Fastest to target per network", "",
              "Among the settings that reached the target at every seed (a setting that missed it at some seed has no "
              "time there); the fastest is on the Pareto set by construction. The Pareto marks compare mean costs: "
              "read them with the cost intervals, which at these seed counts often include 0.", "",
              "| network | Gb/s | setting | minutes | vs 24comm on this network, minutes | cost vs lossless 24comm |",
              "| --- | ---: | --- | ---: | --- | --- |"]
    lines += [f"| {b['network']} | {b['gbps']} | {display_name(dict(name=b['setting'], aliases=b['aliases']))} | {b['minutes']:.1f} | {interval(b['vs_24comm'], '+.1f')} | "
              f"{interval(b['cost'])} |" for b in best]
    if unmet:
        lines += ["", "No setting reached the target at every seed on: " + "; ".join(unmet) + "."]
    return "\n".join(lines) + "\n", best


def plot(networks, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(networks), len(BANDWIDTHS), figsize=(5 * len(BANDWIDTHS), 4 * len(networks)),
                             squeeze=False)
    for row, (network, members) in zip(axes, networks.items()):
        for ax, g in zip(row, BANDWIDTHS):
            for s in members:
                b = s["bandwidths"][g]
                if b["minutes"] is None or s["cost"]["mean"] is None:
                    continue
                c = s["cost"]
                err = None if c["ci_low"] is None else [[c["mean"] - c["ci_low"]], [c["ci_high"] - c["mean"]]]
                ax.errorbar(b["minutes"], c["mean"], yerr=err, fmt="o" if b["pareto"] else ".", capsize=2,
                            color="C3" if b["pareto"] else "C0")
                ax.annotate(s["name"].split("_", 2)[-1], (b["minutes"], c["mean"]), fontsize=6)
            ax.axhline(0, color="gray", lw=0.5)
            ax.set(title=f"{network}, {g} Gb/s", xlabel="projected minutes to target (GPT-2 124M, TP=2)")
        row[0].set_ylabel("val loss cost vs 24comm (measured, 95% CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("sweep_dirs", nargs="+", help="directories of runs (a study's runs/, a sweep's <out>/<name>)")
    parser.add_argument("--seeds", default="", help="only the runs of these seeds: 9-18, 1,3,5 (default: all)")
    parser.add_argument("--target", type=float, default=0.02, help="target: 24comm's final val loss x (1 + this)")
    parser.add_argument("--gpu", default=DEFAULT_GPU, help="bench/gpu_compute.py's json; '' for step_time's assumptions")
    parser.add_argument("--net_latency", type=float, default=1e-5, help="all-reduce latency, seconds (assumed)")
    parser.add_argument("--ladder_overlap", default="1", help="share of the all-reduce time a sublayer could cover that "
                        "ladder really hides (1: ASSUMED, a GPU's own communication engine; bench/scheme_time.py measures it "
                        "on a process group), or bench/gpu_overlap.py's json (measured on one GPU)")
    parser.add_argument("--rto", type=float, default=1e-3, help="retransmission timeout per resend round, seconds (assumed)")
    parser.add_argument("--out", default="", help="folder for frontier.md, frontier.json, frontier.png (default: print only)")
    args = parser.parse_args()
    if not 0 < args.target < 1:
        sys.exit(f"error: --target={args.target} must be in (0, 1): a fraction above 24comm's final val loss")
    try:
        terms = {**compute_terms(args.gpu), "overlap": ladder_overlap(args.ladder_overlap)}
        rows, curves = read_runs(args.sweep_dirs, parse_seeds(args.seeds) if args.seeds else None)
        settings, networks = frontier(rows, curves, args.target, terms, args.net_latency, args.rto)
    except SummaryError as e:
        sys.exit(f"error: {e}")
    text, best = report(networks, args, terms)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "frontier.md"), "w") as f:
            f.write(text)
        with open(os.path.join(args.out, "frontier.json"), "w") as f:
            json.dump(dict(terms=terms, target=args.target, settings=settings, best=best), f, indent=1, default=str)
        plot(networks, os.path.join(args.out, "frontier.png"))
        print(f"wrote {args.out}/frontier.md, frontier.json, frontier.png")


if __name__ == "__main__":
    main()
