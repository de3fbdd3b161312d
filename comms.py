"""
Every tensor-parallel (TP) collective of the model, and the network they cross.

The model never talks to a process group or a network model itself: it calls
`TPComm.sync(b, d, point)` at each sync point, and that is where a sync is
counted, where a lossy link drops packets, and where `sim` and `dist` modes
differ. Each collective is a small autograd.Function (the picotron style) and is
the identity when tp_size == 1.

Residual state at a sync (see README, "What a block does"):
    b: (Rb, B, L, C)  each rank's view of the last synchronised state
    d: (R,  B, L, C)  each rank's partial contributions not yet synchronised
R is the number of TP ranks held by this process (tp_size in `sim` mode, where
one process simulates every rank on a leading axis). Rb is 1 while every rank
agrees on b and no per-rank gradient needs keeping apart (a lossless network),
so replicated work is done once.

A sync point performs, for every rank r,
    b_r <- b_r + d_r + sum_{j != r} Link_{j->r}(d_j),   d_r <- 0
and its backward is the mirror exchange: the gradient of d_j is rank j's own
output gradient plus every other rank's, each through the backward link r->j.
"""

import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

FWD, BWD = 0, 1
DIRECTIONS = ("fwd", "bwd")


class SyncCounter:
    """Counts forward syncs and backward mirror exchanges as they really happen.

    The model's analytic count (GPT.sync_points) is checked against this, so a
    block that syncs more or less often than it claims is caught at run time.
    """

    def __init__(self):
        self.reset()

    def reset(self):
        self.forward = 0   # forward syncs since the last reset
        self.backward = 0  # backward mirror exchanges since the last reset
        self.points = {}   # sync point name -> forward syncs, in model order
        self.sync_bytes = 0  # payload of the syncs and mirror exchanges: one rank's message each
        self.replicated_bytes = 0  # payload of the replicated-gradient all-reduce (`dist` mode)
        self.comm_seconds = 0.0  # wall time inside collectives, when TPComm.timing is on

    def __repr__(self):
        return f"SyncCounter(forward={self.forward}, backward={self.backward})"


# ----------------------------------------------------------------------------- link models

class BernoulliLoss:
    """Each packet is lost independently with probability loss_rate."""
    name = "bernoulli"

    def __init__(self, loss_rate):
        self.loss_rate = loss_rate

    @property
    def stationary_loss(self):
        return self.loss_rate

    @property
    def mean_burst(self):
        """Mean run of consecutive lost packets: 1 / (1 - q)."""
        return 1.0 / (1.0 - self.loss_rate) if self.loss_rate < 1 else math.inf

    @property
    def can_lose(self):
        return self.loss_rate > 0

    def describe(self):
        return f"bernoulli(loss_rate={self.loss_rate:g})"

    def sample(self, n, stream):
        """Lost flags of the next n packets of one link's stream."""
        return torch.rand(n, generator=stream.generator, device=stream.device) < self.loss_rate


class GilbertElliottLoss:
    """A two-state Markov chain per link (netem's `loss gemodel p r 1-h 1-k`).

    p = P(good -> bad), r = P(bad -> good), checked once per packet; a packet is
    lost with probability 1-k in the good state and 1-h in the bad state. The
    stationary bad share is p/(p+r), the mean bad-state run 1/r packets, and the
    chain's state carries over from one message to the next on the same link
    (every chain starts in the good state).

    Sampling draws run lengths, not packets: one geometric draw per state run,
    then the per-packet states by a cumulative sum, all on the message's device,
    `block` packets ahead of the messages that use them.
    """
    name = "gilbert_elliott"

    def __init__(self, p, r, k, h):
        self.p, self.r, self.k, self.h = p, r, k, h
        self.mean_run = 0.5 * (1 / max(p, 1e-12) + 1 / max(r, 1e-12))  # mean length of a run, either state
        self._log_stay_cache = {}

    @property
    def stationary_bad(self):
        return self.p / (self.p + self.r)

    @property
    def stationary_loss(self):
        bad = self.stationary_bad
        return (1 - bad) * (1 - self.k) + bad * (1 - self.h)

    @property
    def mean_burst(self):
        """Mean run of consecutive lost packets in the stationary chain.

        = P(lost) / P(a loss burst starts at a packet), with
        P(start) = sum over (s_prev, s) of pi(s_prev) (1 - loss(s_prev)) T(s_prev -> s) loss(s).
        """
        pi = {0: 1 - self.stationary_bad, 1: self.stationary_bad}
        loss = {0: 1 - self.k, 1: 1 - self.h}
        move = {(0, 0): 1 - self.p, (0, 1): self.p, (1, 0): self.r, (1, 1): 1 - self.r}
        start = sum(pi[a] * (1 - loss[a]) * move[a, b] * loss[b] for a in (0, 1) for b in (0, 1))
        return self.stationary_loss / start if start > 0 else (math.inf if self.stationary_loss > 0 else 0.0)

    @property
    def can_lose(self):
        return self.k < 1 or (self.p > 0 and self.h < 1)

    def describe(self):
        return f"gilbert_elliott(p={self.p:g}, r={self.r:g}, k={self.k:g}, h={self.h:g})"

    block = 65536  # chain states are drawn this many packets ahead, so small messages are cheap

    def bad_states(self, n, stream):
        """States (True = bad) of the next n packets of the stream's chain."""
        parts = []
        while n > 0:
            if stream.ahead is None or len(stream.ahead) == 0:
                stream.ahead = self.draw_states(max(n, self.block), stream)
            parts.append(stream.ahead[:n])
            stream.ahead, n = stream.ahead[n:], n - len(parts[-1])
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def draw_states(self, n, stream):
        """The chain's next n states (True = bad) from its state stream.bad, which it updates."""
        device = stream.device
        # Runs needed to cover n packets: at most n + 1 (every run after the first has
        # >= 1 packet). Fewer suffice but for a probability < 1e-16 (a lower-tail bound
        # for sums of geometric variables); runs that are not needed are discarded.
        n_runs = min(n + 1, math.ceil(2 * n / self.mean_run) + 400)
        u = torch.rand(n_runs, generator=stream.generator, device=device, dtype=torch.float64)
        run_bad = _odd(n_runs, device) ^ stream.bad  # run 0 is in the last state, then they alternate
        log_stay = self._log_stay(device)[run_bad.long()]  # log P(stay) per packet in each run's state
        # Geometric on {1, 2, ...} by inversion; P(stay) = 1 gives an endless run (inf -> n)
        lengths = (torch.log1p(-u) / log_stay).nan_to_num_(nan=0.0, posinf=n).floor_().clamp_(max=n).long() + 1
        lengths[0] -= 1  # run 0 continues the previous message's last state: memoryless, so Geometric - 1
        ends = lengths.cumsum(0)
        stream.overflow += (ends[-1] < n).long()  # never seen; counted rather than assumed
        ends = ends.clamp_(max=n)
        ends[-1] = n  # (if the runs ever fell short, the last one would be stretched)
        lengths = torch.diff(ends, prepend=ends.new_zeros(1))
        bad = torch.repeat_interleave(run_bad, lengths, output_size=n)  # no host sync
        stream.bad = bad[-1]
        return bad

    def _log_stay(self, device):
        """[log P(stay good), log P(stay bad)] as float64 on device (cached)."""
        key = str(device)
        if key not in self._log_stay_cache:
            values = [math.log1p(-self.p) if self.p < 1 else -math.inf, math.log1p(-self.r) if self.r < 1 else -math.inf]
            self._log_stay_cache[key] = torch.tensor(values, dtype=torch.float64, device=device)
        return self._log_stay_cache[key]

    def sample(self, n, stream):
        bad = self.bad_states(n, stream)
        if self.k == 1 and self.h == 0:  # the classic Gilbert model: lost exactly in the bad state
            return bad
        u = torch.rand(n, generator=stream.generator, device=stream.device)
        return u < torch.where(bad, 1 - self.h, 1 - self.k)


# Named Gilbert-Elliott settings: (p, r, k, h). `zero` is the lossless control; the
# others span light to heavy loss and short to long bursts. Stationary loss rates
# and mean burst lengths are computed, not written by hand: see preset_table().
GE_PRESETS = {
    "zero": (0.0, 1.0, 1.0, 1.0),
    "light": (0.0005, 0.5, 1.0, 0.0),
    "moderate": (0.005, 0.5, 1.0, 0.0),
    "heavy": (0.025, 0.5, 1.0, 0.0),
    "bursty": (0.001, 0.1, 1.0, 0.0),
    "noisy": (0.01, 0.25, 0.998, 0.25),
}


def preset_table():
    """The presets as rows: name, p, r, k, h, stationary loss rate, mean loss-burst length."""
    rows = []
    for name, (p, r, k, h) in GE_PRESETS.items():
        model = GilbertElliottLoss(p, r, k, h)
        rows.append((name, p, r, k, h, model.stationary_loss, model.mean_burst))
    return rows


_ODD = {}


def _odd(n, device):
    """[False, True, False, ...] of length n on device (cached: it is asked for every message)."""
    key = str(device)
    if key not in _ODD or len(_ODD[key]) < n:
        _ODD[key] = torch.arange(max(n, 2 * len(_ODD.get(key, ()))), device=device) % 2 == 1
    return _ODD[key][:n]


class _Stream:
    """One directed link's packet stream in one direction: its own generator and chain state."""

    def __init__(self, seed, device):
        self.device = device
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.bad = torch.zeros((), dtype=torch.bool, device=device)  # Gilbert-Elliott state, starts good
        self.ahead = None  # Gilbert-Elliott states drawn but not used yet (after self.bad's packet)
        self.last_lost = torch.zeros((), dtype=torch.bool, device=device)  # joins bursts across messages
        self.overflow = torch.zeros((), dtype=torch.long, device=device)


class LossyLink:
    """Packet loss on every directed link j -> r between TP ranks.

    model: BernoulliLoss or GilbertElliottLoss, the same for every link.
    directions: which passes lose packets, a subset of (FWD, BWD); the other is lossless.
    A message (one rank's tensor) is cut into packets of packet_bytes; a lost packet
    arrives as zeros. Each (link, direction) has its own random stream, seeded from
    (seed, TP group, src, dst, direction), so runs are reproducible and any process
    holding a link draws the same masks. Statistics stay on the device until read.
    `purpose` separates the streams of evaluation from those of training.
    """
    lossy = True

    def __init__(self, model, seed, tp_group=0, directions=(FWD, BWD), packet_bytes=1500, purpose=0):
        self.model = model
        self.seed, self.tp_group, self.purpose = seed, tp_group, purpose  # purpose: 0 training, 1 eval
        self.directions = tuple(directions)
        self.packet_bytes = packet_bytes
        self.streams = {}  # (src, dst, direction) -> _Stream
        self.sent = {}     # (point, direction) -> packets sent (host int)
        self.lost = {}     # (point, direction) -> packets lost (device tensor)
        self.bursts = {}   # (point, direction) -> loss bursts started (device tensor)

    def loses(self, direction):
        return direction in self.directions and self.model.can_lose

    def describe(self):
        dirs = "+".join(DIRECTIONS[d] for d in self.directions) or "no direction"
        return (f"{self.model.describe()} on {dirs}, stationary loss {self.model.stationary_loss:.4%}, "
                f"mean burst {self.model.mean_burst:.2f} packets, {self.packet_bytes}-byte packets")

    def packets(self, n_elements, element_size):
        per_packet = max(1, self.packet_bytes // element_size)
        return math.ceil(n_elements / per_packet), per_packet

    def stream(self, src, dst, direction, device):
        key = (src, dst, direction)
        if key not in self.streams:
            parts = [self.seed, self.tp_group, src, dst, direction, self.purpose]
            seed = int(np.random.SeedSequence(parts).generate_state(1)[0])
            self.streams[key] = _Stream(seed, device)
        return self.streams[key]

    def count_sent(self, point, direction, n_packets):
        self.sent[point, direction] = self.sent.get((point, direction), 0) + n_packets

    def arrived(self, src, dst, direction, point, n_packets, device):
        """Arrival flags (True = arrived) of one message's packets on link src -> dst."""
        stream = self.stream(src, dst, direction, device)
        lost = self.model.sample(n_packets, stream)
        previous = torch.cat([stream.last_lost.view(1), lost[:-1]])
        stream.last_lost = lost[-1]
        key = (point, direction)
        self.count_sent(point, direction, n_packets)
        self.lost[key] = self.lost.get(key, 0) + lost.sum()
        self.bursts[key] = self.bursts.get(key, 0) + (lost & ~previous).sum()
        return ~lost

    def state_dict(self):
        """Everything a resumed run needs to draw what an unbroken run draws, and the statistics."""
        streams = {key: {"generator": st.generator.get_state(), "bad": st.bad.cpu(),
                         "ahead": None if st.ahead is None else st.ahead.cpu(),
                         "last_lost": st.last_lost.cpu(), "overflow": st.overflow.cpu()}
                   for key, st in self.streams.items()}
        return {"streams": streams, "sent": dict(self.sent),
                "lost": {k: torch.as_tensor(v).cpu() for k, v in self.lost.items()},
                "bursts": {k: torch.as_tensor(v).cpu() for k, v in self.bursts.items()}}

    def load_state_dict(self, state, device):
        for (src, dst, direction), saved in state["streams"].items():
            stream = self.stream(src, dst, direction, device)
            stream.generator.set_state(saved["generator"])
            stream.bad, stream.last_lost = saved["bad"].to(device), saved["last_lost"].to(device)
            stream.ahead = None if saved["ahead"] is None else saved["ahead"].to(device)
            stream.overflow = saved["overflow"].to(device)
        self.sent = dict(state["sent"])
        self.lost = {k: v.to(device) for k, v in state["lost"].items()}
        self.bursts = {k: v.to(device) for k, v in state["bursts"].items()}

    def stats(self, all_processes=False):
        """Totals per direction and per sync point (reads the device counters: a host sync).

        all_processes: sum over every process of the default group (a collective): every
        TP group's links in `sim` data parallelism, every rank's incoming links in `dist`.
        """
        keys = list(self.sent)
        points = sorted({p for p, _ in keys}, key=_model_order)  # the same rows on every process
        rows = {("total",): keys, **{(name,): [k for k in keys if k[1] == d] for d, name in enumerate(DIRECTIONS)},
                **{(p, name): [(p, d)] for p in points for d, name in enumerate(DIRECTIONS)}}
        sums = torch.tensor([[sum(self.sent.get(k, 0) for k in ks), sum(int(self.lost[k]) for k in ks if k in self.lost),
                              sum(int(self.bursts[k]) for k in ks if k in self.bursts)] for ks in rows.values()],
                            dtype=torch.float64)
        if all_processes:
            sums = sums.to(_collective_device())
            dist.all_reduce(sums)
        out = {"points": {p: {} for p in points}}
        for where, (sent, lost, bursts) in zip(rows, sums.tolist()):
            summary = {"packets_sent": int(sent), "packets_lost": int(lost), "loss_bursts": int(bursts),
                       "observed_loss_rate": lost / sent if sent else 0.0,
                       "mean_burst_length": lost / bursts if bursts else 0.0}
            if len(where) == 1:
                out[where[0]] = summary
            else:
                out["points"][where[0]][where[1]] = summary
        return out

    @staticmethod
    def record(stats):
        """The statistics as flat metrics.jsonl keys (stable: sweeps and plots read them)."""
        total = stats["total"]
        record = {k: total[k] for k in ("packets_sent", "packets_lost", "observed_loss_rate",
                                        "loss_bursts", "mean_burst_length")}
        for direction in DIRECTIONS:
            for key in ("packets_sent", "packets_lost", "observed_loss_rate"):
                record[f"{key}_{direction}"] = stats[direction][key]
        return record


def _model_order(point):
    """Sort key of a sync point name in forward order: h0.attn, h0.mlp, h1.attn, ..., exit."""
    layer, _, sublayer = point.partition(".")
    return (int(layer[1:]), sublayer != "attn") if layer[1:].isdigit() else (math.inf, point)


def _collective_device():
    """Where a collective's tensor must live: the current GPU under NCCL, else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


class LosslessLink:
    """The identity link: every packet of every message arrives."""
    lossy = False

    def loses(self, direction):
        return False

    def describe(self):
        return "none (lossless)"


def make_link(loss_model, loss_rate=0.0, ge_preset="moderate", ge_params=(-1.0, -1.0, -1.0, -1.0),
              loss_fwd=True, loss_bwd=True, packet_bytes=1500, seed=0, tp_group=0, purpose=0):
    """The link a run asks for, from train.py's config keys; ValueError names a bad key.

    ge_params (p, r, k, h): a negative value takes the preset's value, so a preset
    can be overridden key by key.
    """
    if loss_model == "none":
        return LosslessLink()
    if packet_bytes < 4:
        raise ValueError(f"packet_bytes={packet_bytes} must be at least 4 (one float32 element)")
    directions = tuple(d for d, on in ((FWD, loss_fwd), (BWD, loss_bwd)) if on)
    if not directions:
        raise ValueError(f"loss_model={loss_model!r} with loss_fwd=False and loss_bwd=False drops nothing; "
                         f"enable a direction or use loss_model='none'")
    if loss_model == "bernoulli":
        if not 0.0 <= loss_rate <= 1.0:
            raise ValueError(f"loss_rate={loss_rate} must be in [0, 1]")
        model = BernoulliLoss(loss_rate)
    elif loss_model == "gilbert_elliott":
        if ge_preset not in GE_PRESETS:
            raise ValueError(f"ge_preset={ge_preset!r} is not a preset; presets: {', '.join(GE_PRESETS)}")
        values = [given if given >= 0 else preset for given, preset in zip(ge_params, GE_PRESETS[ge_preset])]
        for key, value in zip(("ge_p", "ge_r", "ge_k", "ge_h"), values):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{key}={value} must be in [0, 1] (or negative to take ge_preset's value)")
        if values[0] + values[1] == 0:
            raise ValueError("ge_p + ge_r = 0: the chain never changes state; give one of them > 0")
        model = GilbertElliottLoss(*values)
    else:
        raise ValueError(f"loss_model={loss_model!r}; allowed: 'none', 'bernoulli', 'gilbert_elliott'")
    return LossyLink(model, seed, tp_group, directions, packet_bytes, purpose)


def _add_received(acc, messages, r, link, direction, point):
    """acc (rank r's own flat message) += every other rank's message, masked by the
    packets of link j -> r that arrived. messages: flat (n,) tensors, one per rank."""
    n = acc.numel()
    n_packets, per_packet = link.packets(n, acc.element_size())
    full = n // per_packet  # whole packets; a shorter last packet may follow
    for j, message in enumerate(messages):
        if j != r:
            arrived = link.arrived(j, r, direction, point, n_packets, acc.device)
            body = message[:full * per_packet].view(full, per_packet)  # (packets, elements)
            acc[:full * per_packet].view(full, per_packet).add_(torch.where(arrived[:full, None], body, 0))
            if full < n_packets:
                acc[full * per_packet:].add_(torch.where(arrived[full], message[full * per_packet:], 0))
    return acc


def exchange(x, link, direction, point):
    """`sim` mode, x: (R, ...) one message per rank. Returns (R, ...) with, for every rank r,
    out_r = x_r + sum_{j != r} x_j masked by the packets of link j -> r that arrived."""
    flat = x.reshape(x.shape[0], -1)
    out = flat.clone()  # a rank's own contribution never crosses a link
    for r in range(x.shape[0]):
        _add_received(out[r], flat, r, link, direction, point)
    return out.view_as(x)


def _count(comm, point, direction, x):
    """Count one sync (or mirror exchange) and its payload: one rank's message of x."""
    counter, link, T = comm.counter, comm.link, comm.tp_size
    if direction == FWD:
        counter.forward += 1
        counter.points[point] = counter.points.get(point, 0) + 1
    else:
        counter.backward += 1
    counter.sync_bytes += x[0].numel() * x.element_size()
    if link.lossy and not link.loses(direction):  # lossless direction of a lossy link: count its packets
        incoming = comm.local_ranks * (T - 1)  # links j -> r into the ranks this process holds
        link.count_sent(point, direction, link.packets(x[0].numel(), x.element_size())[0] * incoming)


class _Sync(torch.autograd.Function):
    """One sync point in `sim` mode, all ranks on the leading axis."""

    @staticmethod
    def forward(ctx, b, d, comm, point):
        ctx.comm, ctx.point, ctx.b_ranks = comm, point, b.shape[0]
        _count(comm, point, FWD, d)
        link, R = comm.link, comm.local_ranks
        if link.loses(FWD):
            return b + exchange(d, link, FWD, point)  # ranks may now disagree: (R, B, L, C)
        out = b + d.sum(0, keepdim=True)  # every rank receives every partial
        if link.loses(BWD) and out.shape[0] == 1:
            # the states agree, but the backward exchange needs each rank's own gradient:
            # keep one view per rank so autograd does not sum them
            out = out.expand(R, *out.shape[1:])
        return out

    @staticmethod
    def backward(ctx, grad_out):
        # grad_out: (Rg, B, L, C), each rank's output gradient; with Rg == 1 the output
        # was shared by broadcasting and grad_out is already the sum over ranks.
        comm, link, R = ctx.comm, ctx.comm.link, ctx.comm.local_ranks
        _count(comm, ctx.point, BWD, grad_out.expand(R, *grad_out.shape[1:]))
        grad_b = grad_out if ctx.b_ranks == grad_out.shape[0] else grad_out.sum(0, keepdim=True)
        if link.loses(BWD):  # rank r sends its gradient g_r to every j over link r -> j
            return grad_b, exchange(grad_out.expand(R, *grad_out.shape[1:]), link, BWD, ctx.point), None, None
        total = grad_out if grad_out.shape[0] == 1 else grad_out.sum(0, keepdim=True)
        return grad_b, total.expand(R, *grad_out.shape[1:]), None, None


class _DistSync(torch.autograd.Function):
    """One sync point in `dist` mode: this process is one TP rank, the group is real.

    Lossless: an all-reduce of the partials. Lossy: an all-gather of the partials, each
    masked at the receiver by the packets of its incoming links (the same streams that
    `sim` mode draws), then summed in the same order as `sim` mode sums them.
    """

    @staticmethod
    def forward(ctx, b, d, comm, point):
        ctx.comm, ctx.point = comm, point
        _count(comm, point, FWD, d)
        return b + comm.reduce(d, FWD, point)

    @staticmethod
    def backward(ctx, grad_out):
        comm = ctx.comm
        _count(comm, ctx.point, BWD, grad_out)
        return grad_out, comm.reduce(grad_out, BWD, ctx.point), None, None


class _MeanOverRanks(torch.autograd.Function):
    """`dist` mode loss: the value is the mean over TP ranks; each rank's own term gets 1/T."""

    @staticmethod
    def forward(ctx, loss, comm):
        ctx.tp_size = comm.tp_size
        total = loss.detach().clone()
        dist.all_reduce(total, group=comm.group)
        return total / comm.tp_size

    @staticmethod
    def backward(ctx, grad):
        return grad / ctx.tp_size, None


class TPComm:
    """How this process's TP ranks synchronise: mode, size, link, counter.

    tp_size: TP ranks in the group. mode: 'sim' (this process holds all of them) or
    'dist' (this process is TP rank `rank` of the process group `group`).
    link: the network between ranks (LosslessLink by default, or a LossyLink).
    """

    def __init__(self, tp_size=1, mode="sim", link=None, group=None, rank=0):
        if mode not in ("sim", "dist"):
            raise ValueError(f"tp_mode={mode!r}: allowed are 'sim' and 'dist'")
        self.tp_size, self.mode, self.group, self.rank = tp_size, mode, group, rank
        self.ranks = list(range(tp_size)) if mode == "sim" else [rank]  # the TP ranks held here
        self.local_ranks = len(self.ranks)
        self.link = link if link is not None else LosslessLink()
        self.counter = SyncCounter()
        self.timing = False  # bench/: add the wall time spent in collectives to counter.comm_seconds

    # Under torch.compile each sync is a graph break on purpose: the counter, the link
    # models' generators and the collectives run eagerly, the blocks between are compiled.
    @torch.compiler.disable
    def sync(self, b, d, point):
        """Synchronise pending partials d into b at sync point `point` (a name).

        Returns the new b; the caller's d is spent (zero) afterwards.
        """
        if self.tp_size == 1:
            return b + d  # a sync over one rank is the identity: nothing to count
        if self.mode == "dist":
            return _DistSync.apply(b, d, self, point)
        return _Sync.apply(b, d, self, point)

    def reduce(self, x, direction, point):
        """`dist` mode: the sum over TP ranks of x as this rank receives it through the link."""
        start = time.perf_counter() if self.timing else 0.0
        x = x.contiguous()
        if self.link.loses(direction):
            parts = [torch.empty_like(x) for _ in range(self.tp_size)]
            dist.all_gather(parts, x, group=self.group)
            out = _add_received(parts[self.rank].reshape(-1).clone(), [p.reshape(-1) for p in parts],
                                self.rank, self.link, direction, point).view_as(x)
        else:
            out = x.clone()
            dist.all_reduce(out, group=self.group)
        self._timed(start)
        return out

    def loss_mean(self, loss):
        """The training objective from each rank's own loss: the mean over TP ranks."""
        if self.mode == "dist" and self.tp_size > 1:
            return _MeanOverRanks.apply(loss, self)
        return loss  # sim: the loss is already averaged over the rank axis

    def reduce_replicated_grads(self, params):
        """`dist` mode, once per step: replicated parameters get the sum of every TP rank's gradient."""
        if self.mode != "dist" or self.tp_size == 1:
            return
        grads = [p.grad for p in params if not getattr(p, "tp_sharded", False) and p.grad is not None]
        start = time.perf_counter() if self.timing else 0.0
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, group=self.group)  # one message for all of them
        self.counter.replicated_bytes += flat.numel() * flat.element_size()
        for g, summed in zip(grads, flat.split([g.numel() for g in grads])):
            g.copy_(summed.view_as(g))
        self._timed(start)

    def clip_grad_norm_(self, params, max_norm):
        """Clip by the norm of the whole model's gradient, every shard of every rank counted once."""
        params = [p for p in params if p.grad is not None]
        if self.mode != "dist" or self.tp_size == 1:
            return torch.nn.utils.clip_grad_norm_(params, max_norm)
        sharded = [p.grad for p in params if getattr(p, "tp_sharded", False)]
        replicated = [p.grad for p in params if not getattr(p, "tp_sharded", False)]
        squares = torch.stack([torch.stack([g.float().square().sum() for g in group]).sum() for group in (sharded, replicated)])
        dist.all_reduce(squares[0:1], group=self.group)  # replicated gradients are already equal on every rank
        norm = squares.sum().sqrt()
        scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        for p in params:
            p.grad.mul_(scale)
        return norm

    def _timed(self, start):
        if self.timing:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.counter.comm_seconds += time.perf_counter() - start


def process_grid(tp_procs, timeout=None):
    """TP groups of consecutive ranks, data-parallel groups across them.

    Returns (tp_rank, dp_rank, dp_world, tp_group, dp_group); every rank creates every
    group, as torch.distributed requires, each with `timeout` (a timedelta) for its
    collectives. With tp_procs == 1 every process is a data-parallel rank and the
    default group is the data-parallel group.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    if tp_procs == 1:
        return 0, rank, world, None, None
    tp_group = dp_group = None
    for g in range(world // tp_procs):
        ranks = list(range(g * tp_procs, (g + 1) * tp_procs))
        group = dist.new_group(ranks, timeout=timeout)
        tp_group = group if rank in ranks else tp_group
    for r in range(tp_procs):
        ranks = list(range(r, world, tp_procs))
        group = dist.new_group(ranks, timeout=timeout)
        dp_group = group if rank in ranks else dp_group
    return rank % tp_procs, rank // tp_procs, world // tp_procs, tp_group, dp_group


def report_failed_collectives(rank, timeout_s):
    """Make a failed collective (a peer died, or hung past the timeout) end this process with one
    line on stderr instead of a traceback. Other exceptions keep their traceback."""
    def hook(kind, value, traceback):
        text = str(value)
        if isinstance(value, getattr(dist, "DistError", ())) or "gloo" in text or "NCCL" in text:
            first = text.strip().splitlines()[0][-160:] if text.strip() else kind.__name__
            sys.stderr.write(f"error: rank {rank}: a collective failed, another rank died or hung "
                             f"(dist_timeout_s={timeout_s}): {first}\n")
            sys.stderr.flush()
            os._exit(1)
        sys.__excepthook__(kind, value, traceback)
    sys.excepthook = hook
