"""
Real step time of the sync-count patterns in `dist` mode (one process per TP rank), what
the collectives cost, and what that projects to for GPT-2 124M with TP=2 across two nodes.

    torchrun --standalone --nproc_per_node=2 bench/step_time.py            # gloo, CPU, TP=2
    torchrun --standalone --nproc_per_node=2 bench/step_time.py --n_embd=384 --batch_sizes 8 32

1. Measured: dense (tp_size=1, each process the whole model on its own) and the 24, 12,
   6 and 2comm patterns (TP=2), interleaved rounds, medians; each step split into time
   inside collectives (the comm's `timing`) and the rest (compute); bytes per step.
2. An alpha-beta model, time = alpha + bytes / beta per all-reduce, fitted by least
   squares to the communication time measured in those steps (two batch sizes, so
   that message count and message size vary apart), and checked against them:
   predicted / measured in-sample and leave-one-out. For reference, the same model
   fitted to isolated all-reduces of 4 KB to 16 MB on the same group.
3. A projection for GPT-2 124M, TP=2 across two nodes at 25, 100 and 400 Gb/s: compute
   time from FLOPs at an assumed MFU on a stated GPU (no GPU measurement here), comm time
   from the alpha-beta model with the link's bandwidth; speedup of each config over 24comm.
   Ladder (DESIGN section 8) is measured beside 24comm: how much of the syncs' all-reduce time (forward
   and backward) the next sublayer hides on this machine (paired per round), and every scheme (drop, hide, shrink) is
   projected from its bytes and exposed syncs, with what is assumed labelled.
4. The price of reliability (transport='reliable', docs/lossy-links.md, "When packets are lost"): a message of
   n packets is resent in rounds until every packet arrived; for Bernoulli q, P(rounds <= k) =
   (1 - q^k)^n, for Gilbert-Elliott the chain's exact distribution (rounds_cdf), and a sync waits
   for the slowest of its T(T-1) messages. Each resend round costs an ASSUMED retransmission timeout
   (--rto) plus one more all-reduce of the resent packets at the MEASURED alpha-beta (part 2), and
   the projected GPT-2 124M micro-step, lossy (zero fill: no wait) vs reliable, at 25 and 100 Gb/s.
   `--reliability_only` prints part 4 from the alpha-beta already in bench/step_time.json, no torchrun.
Results go to stdout (markdown tables) and bench/step_time.json / bench/step_time.png.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.harness import PATTERNS as TP_PATTERNS  # noqa: E402
from bench.harness import add_step_args, build, random_batch, train_steps  # noqa: E402
from comms import DistComm  # noqa: E402
from links import BernoulliLoss, GilbertElliottLoss  # noqa: E402
from model import count_sync_points, parse_block_types  # noqa: E402

PATTERNS = {"dense": None, **TP_PATTERNS, "ladder": "ladder"}  # dense: tp_size=1, each process the whole model


def build_entry(pattern, args, group, rank):
    tp_size = 1 if pattern is None else 2
    model_args = dict(n_layer=12, n_head=args.n_head, n_embd=args.n_embd, block_size=args.block_size,
                      vocab_size=args.vocab_size, tp_size=tp_size, block_types=pattern or "tp")
    model, optimizer = build(model_args, DistComm(tp_size, group=group, rank=rank) if tp_size > 1 else None)
    model.comm.timing = True
    return model, optimizer


def timed_steps(model, optimizer, x, n):
    """n full steps (train.py's, with the replicated-gradient reduction and clipping):
    (seconds per step, seconds in collectives per step, the sync counter)."""
    counter = model.comm.counter
    counter.reset()
    seconds = train_steps(model, optimizer, x, x, n, reduce_and_clip=True)
    return seconds, counter.comm_seconds / n, counter


def allreduce_sweep(group, repeats):
    """(bytes, seconds) of all-reduces of fp32 messages from 4 KB to 16 MB, median of repeats."""
    rows = []
    for exponent in range(12, 25, 2):
        t = torch.zeros(2 ** exponent // 4)
        samples = []
        for _ in range(repeats):
            dist.barrier(group=group)
            start = time.perf_counter()
            dist.all_reduce(t, group=group)
            samples.append(time.perf_counter() - start)
        rows.append((t.numel() * 4, statistics.median(samples)))
    return rows


def fit_alpha_beta(counts, sizes, seconds):
    """Least squares for seconds = counts * alpha + sizes / beta; returns (alpha s, beta bytes/s)."""
    (alpha, inv_beta), *_ = np.linalg.lstsq(np.stack([counts, sizes], 1).astype(float), np.asarray(seconds, float),
                                            rcond=None)
    return alpha, 1.0 / inv_beta


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    add_step_args(parser, rounds=7)
    parser.add_argument("--mfu", type=float, default=0.4, help="assumed MFU of the projected GPU")
    parser.add_argument("--gpu_peak", type=float, default=989e12, help="bf16 peak of the projected GPU (H100 SXM)")
    parser.add_argument("--net_latency", type=float, default=10e-6,
                        help="seconds per all-reduce across the two nodes in the projection (alpha)")
    parser.add_argument("--rto", type=float, default=1e-3,
                        help="assumed retransmission timeout in seconds, paid once per resend round (part 4)")
    parser.add_argument("--reliability_only", action="store_true",
                        help="print part 4 from the alpha-beta already in OUT.json (no torchrun, no measurement)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "step_time"))
    args = parser.parse_args()
    if args.reliability_only:
        with open(args.out + ".json") as f:
            saved = json.load(f)
        message = max(saved["args"]["batch_sizes"]) * saved["args"]["block_size"] * saved["args"]["n_embd"] * 4
        saved["reliability"] = reliability_tables(saved["alpha_s"], saved["beta_bytes_per_s"], message, args)
        with open(args.out + ".json", "w") as f:
            json.dump(saved, f, indent=2)
        return
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 2, "run with torchrun --nproc_per_node=2"
    torch.set_num_threads(1)
    group = dist.new_group([0, 1])

    entries = {name: build_entry(pattern, args, group, rank) for name, pattern in PATTERNS.items()}
    entries["ladder_fwd"] = build_entry("ladder", args, group, rank)  # ladder, its backward exchanges at once:
    entries["ladder_fwd"][0].comm.hide_backward = False  # each pass's hidden share apart (ladder_overlap)
    batches = {b: random_batch(args.vocab_size, b, args.block_size, seed=1)[0] for b in args.batch_sizes}
    for name in entries:
        timed_steps(*entries[name], batches[args.batch_sizes[0]], 2)  # warm up
    measured = {(name, b): [] for b in args.batch_sizes for name in entries}
    for _ in range(args.rounds):
        for name, b in measured:
            dist.barrier()
            step, comm_s, counter = timed_steps(*entries[name], batches[b], args.steps)
            # the last: hidden backward exchanges (counter.totals(): forward, backward, hidden, hidden_bwd, ...)
            measured[name, b].append((step, comm_s, counter.forward // args.steps,
                                      counter.sync_bytes // args.steps, counter.replicated_bytes // args.steps,
                                      (counter.forward - counter.hidden) // args.steps, counter.totals()[3] // args.steps))
    sweep = allreduce_sweep(group, repeats=15)
    if rank != 0:
        dist.destroy_process_group()
        return

    table = {}
    for (name, b), rows in measured.items():
        step, comm_s = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
        syncs, sync_bytes, repl_bytes, exposed, hidden_bwd = rows[0][2:]
        # per step: every forward sync and backward exchange is one all-reduce of one message,
        # plus one all-reduce of the replicated gradients
        table[name, b] = dict(config=name, batch=b, syncs=syncs, exposed=exposed, hidden_bwd=hidden_bwd,
                              step_ms=step * 1e3, comm_ms=comm_s * 1e3,
                              compute_ms=(step - comm_s) * 1e3, sync_bytes=sync_bytes, replicated_bytes=repl_bytes,
                              reduces=2 * syncs + (1 if repl_bytes else 0))
    points = [k for k in table if table[k]["reduces"] and not k[0].startswith("ladder")]  # async sends: timed otherwise
    counts = [table[k]["reduces"] for k in points]
    sizes = [table[k]["sync_bytes"] + table[k]["replicated_bytes"] for k in points]
    comm = [table[k]["comm_ms"] / 1e3 for k in points]
    alpha, beta = fit_alpha_beta(counts, sizes, comm)
    for i, k in enumerate(points):
        rest = [j for j in range(len(points)) if j != i]  # leave this point out
        a, bw = fit_alpha_beta([counts[j] for j in rest], [sizes[j] for j in rest], [comm[j] for j in rest])
        table[k]["predicted_comm_ms"] = (counts[i] * alpha + sizes[i] / beta) * 1e3
        table[k]["loo_predicted_comm_ms"] = (counts[i] * a + sizes[i] / bw) * 1e3
    sweep_alpha, sweep_beta = fit_alpha_beta([1] * len(sweep), [s for s, _ in sweep], [t for _, t in sweep])

    print(f"# measured: TP=2 over gloo on one machine (2 processes, 1 thread each), torch {torch.__version__}, "
          f"n_layer 12, n_embd {args.n_embd}, seq {args.block_size}, {args.rounds} rounds x {args.steps} steps, medians")
    print("| config | batch | syncs/pass | ms/step | compute ms | comm ms | comm share | sync MB/step "
          "| replicated MB/step | alpha-beta comm ms | predicted/measured | leave-one-out |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in table.values():
        fit = (f"{row['predicted_comm_ms']:.1f} | {row['predicted_comm_ms'] / row['comm_ms']:.2f} | "
               f"{row['loo_predicted_comm_ms'] / row['comm_ms']:.2f}") if "predicted_comm_ms" in row else "- | - | -"
        print(f"| {row['config']} | {row['batch']} | {row['syncs']} | {row['step_ms']:.1f} | {row['compute_ms']:.1f} | "
              f"{row['comm_ms']:.1f} | {row['comm_ms'] / row['step_ms']:.0%} | {row['sync_bytes'] / 1e6:.1f} | "
              f"{row['replicated_bytes'] / 1e6:.2f} | {fit} |")
    print(f"\nalpha-beta fitted to the steps: alpha = {alpha * 1e6:.0f} us per all-reduce, beta = {beta / 1e9:.2f} GB/s. "
          f"Fitted to isolated all-reduces ({sweep[0][0] // 1024} KB to {sweep[-1][0] // 2 ** 20} MB): "
          f"alpha = {sweep_alpha * 1e6:.0f} us, beta = {sweep_beta / 1e9:.2f} GB/s (the difference is time spent "
          f"waiting for the other rank and competing for the 2 cores inside a training step)")

    hidden = ladder_overlap(measured, table, args)

    # projection: GPT-2 124M, one TP=2 pair across two nodes, micro-batch 12 x 1024 in bf16
    compute, _, replicated = gpt2_projection(0, 25, args.mfu, args.gpu_peak, args.net_latency)
    projection = {}
    print(f"\n# projected: GPT-2 124M, TP=2 across two nodes, micro-batch 12x1024 bf16, compute {compute:.1f} ms "
          f"per micro-step (FLOPs at {args.mfu:.0%} MFU of {args.gpu_peak / 1e12:.0f} TFLOP/s, an assumption), "
          f"all-reduce = {args.net_latency * 1e6:.0f} us + bytes/bandwidth; replicated gradients "
          f"({replicated / 1e6:.0f} MB) once per step of {MICRO_STEPS} micro-steps")
    print("| config | syncs/pass | " + " | ".join(f"{bw} Gb/s ms/micro-step | speedup vs 24comm" for bw in (25, 100, 400)) + " |")
    print("| --- | ---: | " + " | ".join("---: | ---:" for _ in range(3)) + " |")
    for name, pattern in PATTERNS.items():
        if pattern is None or name == "ladder":  # ladder's syncs are not all exposed: the scheme table below
            continue
        syncs = count_sync_points(parse_block_types(pattern, 12), 2)
        cells, projection[name] = [], {}
        for bw in (25, 100, 400):
            ms, base = (sum(gpt2_projection(n, bw, args.mfu, args.gpu_peak, args.net_latency)[:2]) for n in (syncs, 24))
            projection[name][bw] = ms
            cells.append(f"{ms:.1f} | {base / ms:.2f}x")
        print(f"| {name} | {syncs} | " + " | ".join(cells) + " |")

    schemes = scheme_projection(args)
    message = args.batch_sizes[-1] * args.block_size * args.n_embd * 4  # one rank's fp32 partial sums, measured steps
    reliability = reliability_tables(alpha, beta, message, args)
    with open(args.out + ".json", "w") as f:
        json.dump({"args": vars(args), "measured": list(table.values()), "allreduce_sweep": sweep, "alpha_s": alpha,
                   "beta_bytes_per_s": beta, "sweep_alpha_s": sweep_alpha, "sweep_beta_bytes_per_s": sweep_beta,
                   "projection_ms_per_micro_step": projection,
                   "projected_compute_ms": compute, "reliability": reliability, "ladder_overlap": hidden,
                   "schemes_ms_per_micro_step": schemes}, f, indent=2)
    plot({k[0]: v for k, v in table.items() if k[1] == args.batch_sizes[-1] and k[0] in projection or k[0] == "dense"},
         projection,
         args.out + ".png")
    dist.destroy_process_group()


# GPT-2 124M (config/train_gpt2.py): 40 micro-batches of 12 x 1024 per iteration, on two nodes of 8 GPUs as 8 TP=2
# pairs, each pair across the two nodes (its syncs cross the network), data parallel over the pairs: 5 micro-steps each
GPT2_MICRO_BATCHES, TP_PAIRS = 40, 8
MICRO_STEPS = GPT2_MICRO_BATCHES // TP_PAIRS


def gpt2_rank_flops():
    """FLOPs of one TP=2 rank's GPT-2 124M micro-step (12 x 1024 tokens, forward and backward) and of one of its
    24 sublayers' forward. The blocks (their weights, and attention over 6 of the 12 heads) are split over
    the two ranks; the tied LM head is replicated (DESIGN section 3), so each rank computes it in full."""
    tokens, n_layer, d, vocab = 12 * 1024, 12, 768, 50304
    head = vocab * d  # the LM head's weights (tied with the token embedding; a lookup costs no FLOPs, nor wpe's)
    weights = n_layer * (12 * d * d + 13 * d)  # a block's: attention 4 d^2, MLP 8 d^2, their biases and LayerNorms
    blocks = 6 * weights * tokens + 12 * n_layer * d * 1024 * tokens  # fwd + bwd, both ranks (nanoGPT's count)
    return blocks / 2 + 6 * head * tokens, blocks / 3 / 2 / (2 * n_layer)  # a forward is a third of fwd + bwd


def gpt2_projection(syncs, gbps, mfu=0.4, gpu_peak=989e12, net_latency=1e-5):
    """Projected (compute ms, communication ms, replicated gradient bytes) of one micro-step of GPT-2
    124M with TP=2 across two nodes at gbps Gb/s: a micro-batch of 12 x 1024 tokens in bf16; compute
    a rank's FLOPs (gpt2_rank_flops) at mfu of gpu_peak (an assumption, not a measurement); each of the
    2 * syncs all-reduces per micro-step (forward syncs and backward mirror exchanges) costs latency +
    message / bandwidth; the replicated gradients' all-reduce is shared by MICRO_STEPS micro-steps."""
    tokens, n_layer, d = 12 * 1024, 12, 768
    compute = gpt2_rank_flops()[0] / (gpu_peak * mfu)
    message = tokens * d * 2  # one rank's partial sums in bf16
    replicated = (50304 * d + 1024 * d + n_layer * (4 * d + 2 * d) + 2 * d) * 4  # embeddings, LNs, row biases (fp32)
    bandwidth = gbps * 1e9 / 8
    comm = 2 * syncs * (net_latency + message / bandwidth) + (net_latency + replicated / bandwidth) / MICRO_STEPS
    return compute * 1e3, comm * 1e3, replicated


def gpt2_sublayer_ms(mfu=0.4, gpu_peak=989e12):
    """ms of one sublayer's forward on a TP=2 rank at the assumed MFU: what a ladder sync can hide behind."""
    return gpt2_rank_flops()[1] / (gpu_peak * mfu) * 1e3


def ladder_overlap(measured, table, args):
    """MEASURED: how much of the sync all-reduce time the next sublayer hides in `ladder` (a sync's forward
    all-reduce sent with async_op and waited for at landing; its backward mirror exchange sent at the
    landing's backward and waited for where the partials' gradient is consumed) against 24comm (the same
    syncs, each waited for at once), per batch size and per pass: `ladder_fwd` is ladder with its backward
    exchanges waited for at once (comm.hide_backward=False), so 24comm - ladder_fwd is what the forward
    hides and ladder_fwd - ladder what the backward hides, each paired per round. A share divides that by
    24comm's all-reduce time of one pass's syncs (half of both passes': the same messages each way); its
    interval is the saving's over that median. And what ladder still waits for (issues and unhidden waits)."""
    from bench.stats import paired_stats
    out = {}
    print("\n# measured: ladder vs 24comm, the same 24 syncs per pass; ladder's all-reduces, forward and backward, run "
          "behind the next sublayer (gloo, 2 processes on this machine's cores, which compute and communication share); "
          "ladder_fwd: ladder with its backward exchanges waited for at once, so each pass's saving stands apart")
    print("| batch | 24comm ms/step | ladder_fwd ms/step | ladder ms/step | pass | saved ms: mean [95% CI] "
          "| 24comm's all-reduce ms of that pass | share hidden [95% CI] | ladder comm ms (issue + wait) |")
    print("| ---: | ---: | ---: | ---: | --- | --- | ---: | --- | ---: |")
    for b in args.batch_sizes:
        row, ladder = table["24comm", b], table["ladder", b]
        per_pass = row["comm_ms"] * row["syncs"] / row["reduces"]
        pairs = {"forward": ("24comm", "ladder_fwd"), "backward": ("ladder_fwd", "ladder"), "both": ("24comm", "ladder")}
        out[b] = dict(ladder_comm_ms=ladder["comm_ms"], pass_all_reduce_ms=per_pass)
        for name, (slow, fast) in pairs.items():
            stats = paired_stats([1e3 * (s[0] - f[0]) for s, f in zip(measured[slow, b], measured[fast, b])])
            whole = per_pass * (2 if name == "both" else 1)
            share = [stats[k] / whole for k in ("mean", "ci_low", "ci_high")]
            out[b][name] = dict(saved_ms=stats["mean"], ci=(stats["ci_low"], stats["ci_high"]), all_reduce_ms=whole,
                                share=share[0], share_ci=share[1:])
            print(f"| {b} | {row['step_ms']:.1f} | {table['ladder_fwd', b]['step_ms']:.1f} | {ladder['step_ms']:.1f} "
                  f"| {name} | {stats['mean']:+.1f} [{stats['ci_low']:+.1f}, {stats['ci_high']:+.1f}] | {whole:.1f} "
                  f"| {share[0]:.0%} [{share[1]:.0%}, {share[2]:.0%}] | {ladder['comm_ms']:.1f} |")
    return out


def scheme_projection(args):
    """PROJECTED, GPT-2 124M, TP=2 across two nodes (part 3's micro-step and assumptions): each scheme from
    its bytes and exposed syncs. An all-reduce of m bytes costs latency + m / bandwidth (ASSUMED latency,
    the link's bandwidth). Dropping: fewer all-reduces; shrinking: smaller messages (int8: half of bf16's,
    plus a float32 scale per token); ladder: its one exposed forward sync in full, each hidden one only
    where it outlasts a sublayer's forward compute (ASSUMED: the MFU of the rest, gpt2_sublayer_ms), its 24 backward exchanges exposed (and,
    in the last column, hidden alike, as `dist` has built them since issue 50 and the paper's implementation does)."""
    compute, _, replicated = gpt2_projection(0, 25, args.mfu, args.gpu_peak, args.net_latency)
    tokens, d, lat = 12 * 1024, 768, args.net_latency
    message = tokens * d * 2  # bf16
    sublayer = gpt2_sublayer_ms(args.mfu, args.gpu_peak) / 1e3  # seconds of a sublayer's forward compute
    schemes = {"24comm": (24, message), "12comm": (12, message), "2comm": (2, message),
               "24comm, sync_fraction=0.5": (24, message / 2), "24comm, sync_dtype=int8": (24, message / 2 + 4 * tokens)}
    print(f"\n# projected: each scheme's micro-step from its bytes and exposed syncs (GPT-2 124M, TP=2 across two "
          f"nodes; compute {compute:.1f} ms at an ASSUMED {args.mfu:.0%} MFU, latency {lat * 1e6:.0f} us ASSUMED, "
          f"a sublayer's forward compute {sublayer * 1e3:.2f} ms ASSUMED)")
    print("| scheme | syncs | exposed | MB per sync | " + " | ".join(f"{bw} Gb/s ms | vs 24comm" for bw in (25, 100, 400))
          + " | ladder, backward hidden too: " + " / ".join(f"{bw}" for bw in (25, 100, 400)) + " Gb/s ms |")
    print("| --- | ---: | ---: | ---: | " + " | ".join("---: | ---:" for _ in range(3)) + " | ---: |")
    out = {}
    for name in [*schemes, "ladder"]:
        syncs, size = schemes.get(name, (24, message))
        cells, out[name], both = [], {}, []
        for bw in (25, 100, 400):
            ar = lat + size / (bw * 1e9 / 8)
            shared = (lat + replicated / (bw * 1e9 / 8)) / MICRO_STEPS
            if name == "ladder":
                hidden = 23 * max(0.0, ar - sublayer)
                comm, comm_both = ar + hidden + 24 * ar, 2 * (ar + hidden)
                both.append(f"{compute + (comm_both + shared) * 1e3:.1f}")
            else:
                comm = 2 * syncs * ar
            out[name][bw] = compute + (comm + shared) * 1e3
            base = compute + (48 * (lat + message / (bw * 1e9 / 8)) + shared) * 1e3
            cells.append(f"{out[name][bw]:.1f} | {base / out[name][bw]:.2f}x")
        exposed = 1 if name == "ladder" else syncs
        print(f"| {name} | {syncs} | {exposed} | {size / 1e6:.2f} | " + " | ".join(cells) + f" | {' / '.join(both) or '-'} |")
    return out


# --- part 4: the price of reliability ---------------------------------------------------------

PACKET_BYTES, TP = 1500, 2
RATES = (0.001, 0.01, 0.03)
GE_MEAN_BAD_RUN = 10  # the Gilbert-Elliott links of part 4: lost exactly in the bad state, bad runs of 10 packets


def loss_models(rate):
    """(name, model) of part 4 at a stationary loss rate: Bernoulli, and the Gilbert chain with bad runs of 10."""
    r = 1 / GE_MEAN_BAD_RUN
    return (("bernoulli", BernoulliLoss(rate)), ("gilbert_elliott", GilbertElliottLoss(rate * r / (1 - rate), r, 1.0, 0.0)))


def rounds_cdf(model, n_packets, k_max):
    """P(a message of n_packets needs <= k rounds), k = 1..k_max, as links.LossyLink.resend_rounds sends it:
    each round resends the lost packets of the last, on the same stream. Bernoulli: (1 - q^k)^n.
    Gilbert-Elliott: exact over the chain, which runs on from round to round (a forward recursion over
    (losses so far, state), losses truncated far in the tail); a message starts after a packet that
    arrived (the state distribution pi(s) (1 - loss(s)), normalised: exact when k = 1, h = 0)."""
    if isinstance(model, BernoulliLoss):
        return (1 - model.loss_rate ** np.arange(1, k_max + 1, dtype=float)) ** n_packets
    move = np.array([[1 - model.p, model.p], [model.r, 1 - model.r]])
    loss = np.array([1 - model.k, 1 - model.h])
    q, burst = model.stationary_loss, max(model.mean_burst, 1.0)
    top = int(min(n_packets, n_packets * q + 12 * np.sqrt(n_packets * q * 2 * burst) + 40))  # losses kept

    def run(start, steps, keep_all):
        """(steps + 1 or 1, top + 1, 2): P(l losses, state of the last packet) after each packet count."""
        prob = np.zeros((top + 1, 2))
        prob[0] = start
        out = [prob] if keep_all else []
        for _ in range(steps):
            step = prob @ move
            prob = step * (1 - loss)
            prob[1:] += step[:-1] * loss
            if keep_all:
                out.append(prob)
        return np.stack(out) if keep_all else prob[None]

    arrived = np.array([model.r, model.p]) * (1 - loss)
    pending = run(arrived / arrived.sum(), n_packets, False)[0]  # after round 1: (losses, state)
    table = np.stack([run(np.eye(2)[s], top, True) for s in (0, 1)])  # (start state, m packets, losses, state)
    cdf, done = [], 0.0
    for _ in range(k_max):
        done += pending[0].sum()  # messages whose last round lost nothing
        cdf.append(done)
        pending = np.einsum("ms,smlt->lt", pending[1:], table[:, 1:])
    return np.minimum(np.array(cdf), 1.0)


def expected_resend_rounds(model, n_packets, messages=TP * (TP - 1), k_max=60):
    """E[rounds - 1] of a sync that waits for `messages` independent messages of n_packets each."""
    return float((1 - rounds_cdf(model, n_packets, k_max) ** messages).sum())


def reliability_tables(alpha, beta, measured_message, args):
    """Part 4's two tables (stdout) and their numbers (returned, for the json)."""
    def extra(model, message, latency, bandwidth):
        """Expected extra seconds of one sync: per resend round the RTO and one more exchange (latency),
        and the resent packets (q / (1 - q) of the message, in expectation) at the bandwidth."""
        n = -(-message // PACKET_BYTES)
        q = model.stationary_loss
        return expected_resend_rounds(model, n) * (args.rto + latency) + n * q / (1 - q) * PACKET_BYTES / bandwidth
    gpt2_message = 12 * 1024 * 768 * 2
    rows = []
    for rate in RATES:
        for name, model in loss_models(rate):
            n = -(-gpt2_message // PACKET_BYTES)
            row = dict(loss=name, rate=rate, rounds=1 + expected_resend_rounds(model, n, 1),
                       sync_rounds=1 + expected_resend_rounds(model, n),
                       measured_extra_ms=extra(model, measured_message, alpha, beta) * 1e3)
            for bw in (25, 100):
                compute, comm, _ = gpt2_projection(24, bw, args.mfu, args.gpu_peak, args.net_latency)
                row[f"lossy_{bw}"] = compute + comm
                row[f"reliable_{bw}"] = compute + comm + 2 * 24 * extra(model, gpt2_message, args.net_latency,
                                                                         bw * 1e9 / 8) * 1e3
            rows.append(row)
    print(f"\n# the price of reliability: rounds until every packet arrives, {PACKET_BYTES}-byte packets; "
          f"RTO = {args.rto * 1e3:g} ms per resend round (ASSUMED); Gilbert-Elliott: lost exactly in the bad state, "
          f"mean bad run {GE_MEAN_BAD_RUN} packets")
    print(f"per sync, the measured setting: one rank's fp32 message of {measured_message / 1e6:.2f} MB, alpha = "
          f"{alpha * 1e6:.0f} us and beta = {beta / 1e9:.2f} GB/s (MEASURED, part 2: gloo on this CPU); GPT-2 124M: "
          f"{gpt2_message / 1e6:.1f} MB bf16 messages ({-(-gpt2_message // PACKET_BYTES)} packets), 24comm, TP=2, "
          f"all-reduce latency {args.net_latency * 1e6:.0f} us (assumed), compute as in part 3")
    print("| loss | rate | E[rounds] per GPT-2 message | E[rounds] per sync (2 messages) | measured setting: extra ms "
          "per sync | 25 Gb/s lossy ms/micro-step | 25 Gb/s reliable | 100 Gb/s lossy | 100 Gb/s reliable |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(f"| {row['loss']} | {row['rate']:.1%} | {row['rounds']:.2f} | {row['sync_rounds']:.2f} | "
              f"{row['measured_extra_ms']:.2f} | {row['lossy_25']:.1f} | {row['reliable_25']:.1f} "
              f"({row['reliable_25'] / row['lossy_25']:.2f}x) | {row['lossy_100']:.1f} | {row['reliable_100']:.1f} "
              f"({row['reliable_100'] / row['lossy_100']:.2f}x) |")
    return {"rto_s": args.rto, "packet_bytes": PACKET_BYTES, "ge_mean_bad_run": GE_MEAN_BAD_RUN, "rows": rows}


def plot(table, projection, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [n for n in table if n != "dense"]
    syncs = [table[n]["syncs"] for n in names]
    left.bar([str(s) for s in syncs], [table[n]["compute_ms"] for n in names], label="compute")
    left.bar([str(s) for s in syncs], [table[n]["comm_ms"] for n in names],
             bottom=[table[n]["compute_ms"] for n in names], label="communication")
    left.axhline(table["dense"]["step_ms"], color="k", ls="--", label="dense, one process")
    left.set(xlabel="sync points per pass", ylabel="ms per step",
             title=f"measured: TP=2, gloo, one machine, batch {table['dense']['batch']}")
    left.legend(loc="center right")
    for bw in (25, 100, 400):
        right.plot(syncs, [projection[n][bw] for n in names], "o-", label=f"{bw} Gb/s")
    right.set(xlabel="sync points per pass", ylabel="ms per micro-step", yscale="log",
              title="projected: GPT-2 124M, TP=2 across two nodes")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
