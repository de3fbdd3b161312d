"""
Every tensor-parallel (TP) collective of the model, and the execution mode that performs it.

The model never talks to a process group or to the network itself: it calls
`comm.sync(b, d, point)` at each sync point, and that is where a sync is counted, where
the link (links.py) drops packets, and where the modes differ. Each collective is a
small autograd.Function (the picotron style) and is the identity when tp_size == 1.

The mode is an object, chosen once (`comm_for(tp_mode, ...)`), with the same methods in
both classes:
    SimComm   one process holds all tp_size ranks on a leading axis; a sync is a
              (masked) sum over that axis, the rest is local bookkeeping
    DistComm  this process is TP rank `rank` of a real process group; a sync is an
              all-reduce (lossless) or an all-gather masked at the receiver (lossy)

Residual state at a sync (see README, "What a block does"):
    b: (Rb, B, L, C)  each rank's view of the last synchronised state
    d: (R,  B, L, C)  each rank's partial contributions not yet synchronised
R is the number of TP ranks held by this process (tp_size in `sim` mode). Rb is 1 while
every rank agrees on b and no per-rank gradient needs keeping apart (a lossless
network), so replicated work is done once.

A sync point performs, for every rank r,
    b_r <- b_r + d_r + sum_{j != r} Link_{j->r}(d_j),   d_r <- 0
and its backward is the mirror exchange: the gradient of d_j is rank j's own
output gradient plus every other rank's, each through the backward link r->j.
"""

import contextlib
import time

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from links import BWD, FWD, LosslessLink


class SyncCounter:
    """Counts forward syncs and backward mirror exchanges as they really happen; the model's
    analytic count (GPT.sync_points) is checked against it, so a miscounting block is caught."""

    def __init__(self):
        # Counts made inside a torch.compile graph go to a tensor, not to Python ints: the
        # compiled graph updates it in place at every call, and no guard depends on the
        # counts (an int or dict would be a guard, and every new value a recompile).
        # tally: [forward, backward, sync_bytes, one slot per sync point]; slots: point ->
        # its index, fixed by the model before anything is compiled (GPT.__init__).
        self.tally, self.slots = None, {}
        self.reset()

    def reset(self):
        self.eager_forward = 0   # forward syncs since the last reset, counted eagerly
        self.eager_backward = 0  # backward mirror exchanges since the last reset, counted eagerly
        self.eager_points = {}   # sync point name -> forward syncs, counted eagerly
        self.eager_sync_bytes = 0  # payload of the syncs and mirror exchanges: one rank's message each
        self.replicated_bytes = 0  # payload of the replicated-gradient all-reduce (`dist` mode)
        self.comm_seconds = 0.0  # wall time inside collectives, when the comm's `timing` is on
        self.recomputed = 0  # syncs run again by activation checkpointing (not sync points: `dist` repeats the traffic)
        if self.tally is not None:
            self.tally.zero_()

    def _traced(self, index):  # a host sync, on a GPU
        return 0 if self.tally is None else int(self.tally[index])

    @property
    def forward(self):
        return self.eager_forward + self._traced(0)

    @property
    def backward(self):
        return self.eager_backward + self._traced(1)

    @property
    def sync_bytes(self):
        return self.eager_sync_bytes + self._traced(2)

    @property
    def points(self):
        """Sync point name -> forward syncs since the last reset, in model order."""
        traced = {} if self.tally is None else dict(zip(self.slots, self.tally[3:].tolist()))
        names = list(self.slots) + [p for p in self.eager_points if p not in self.slots]
        counts = {p: self.eager_points.get(p, 0) + traced.get(p, 0) for p in names}
        return {p: n for p, n in counts.items() if n}


def exchange(x, link, direction, point):
    """`sim` mode, x: (R, ...) one message per rank. Returns (R, ...) with, for every rank r,
    out_r = x_r + sum_{j != r} x_j masked by the packets of link j -> r that arrived."""
    flat = x.reshape(x.shape[0], -1)
    out = flat.clone()  # a rank's own contribution never crosses a link
    for r in range(x.shape[0]):
        link.receive(out[r], flat, r, direction, point)
    return out.view_as(x)


def _count(comm, point, direction, x):
    """Count one sync (or mirror exchange) and its payload: one rank's message of x."""
    counter, link, T = comm.counter, comm.link, comm.tp_size
    if comm.dry:  # pipeline.py's shape inference: not a pass of training
        return
    if comm.replaying:  # activation checkpointing's recompute of a sync already counted
        counter.recomputed += 1
        return
    if direction == FWD:
        counter.eager_forward += 1
        counter.eager_points[point] = counter.eager_points.get(point, 0) + 1
    else:
        counter.eager_backward += 1
    counter.eager_sync_bytes += x[0].numel() * x.element_size()
    if link.lossy and not link.loses(direction):  # lossless direction of a lossy link: count its packets
        incoming = comm.local_ranks * (T - 1)  # links j -> r into the ranks this process holds
        link.count_sent(point, direction, link.packets(x[0].numel(), x.element_size())[0] * incoming)



def _count_traced(comm, point, x):
    """Count a sync on a lossless link inside a torch.compile graph, in the counter's tally tensor.
    No Python runs in a compiled backward pass, so the backward mirror exchange (autograd's
    broadcast of the sum) is counted here, from the structure, when a gradient will flow."""
    counter, size = comm.counter, x[0].numel() * x.element_size()
    if counter.tally is None or counter.tally.device != x.device:  # once: the model's device
        counter.tally = torch.zeros(3 + len(counter.slots), dtype=torch.long, device=x.device)
    backward = int(torch.is_grad_enabled() and x.requires_grad)
    counter.tally[0] += 1
    counter.tally[1] += backward
    counter.tally[2] += size * (1 + backward)
    if point in counter.slots:
        counter.tally[counter.slots[point]] += 1


class _CountedAdd(torch.autograd.Function):
    """b + total, where total is a sync's partials already summed over ranks (SimComm.sums_in_gemm):
    counted as the sync and, in the backward pass, as its mirror exchange."""

    @staticmethod
    def forward(ctx, b, total, comm, point):
        ctx.comm, ctx.point = comm, point
        _count(comm, point, FWD, total)
        return b + total

    @staticmethod
    def backward(ctx, grad_out):
        _count(ctx.comm, ctx.point, BWD, grad_out)
        return grad_out, grad_out, None, None


class _AllReduceSum(torch.autograd.Function):
    """A lossless `dist` sync under torch.compile: a functional all-reduce, which the compiler
    traces (no Python side effects); its backward all-reduces the gradient (the mirror exchange)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return funcol.all_reduce(x.contiguous(), "sum", group)

    @staticmethod
    def backward(ctx, grad):
        return funcol.all_reduce(grad.contiguous(), "sum", ctx.group), None


class _SimSync(torch.autograd.Function):
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
    """What both modes share: tp_size, the link, the sync counter, the identity at size 1.

    Use SimComm or DistComm (or comm_for); a subclass sets `_sync`, the autograd function
    of one sync point, and the methods that differ between the modes.
    """

    def __init__(self, tp_size=1, link=None):
        self.tp_size = tp_size
        self.link = link if link is not None else LosslessLink()
        self.counter = SyncCounter()
        self.replaying = False  # inside activation checkpointing's recompute (checkpoint_contexts)
        self.dry = False  # inside dry_run
        self.timing = False  # bench/: add the wall time spent in collectives to counter.comm_seconds

    def sync(self, b, d, point):
        """Synchronise pending partials d into b at sync point `point` (a name).

        Returns the new b; the caller's d is spent (zero) afterwards. Under torch.compile a
        lossless sync is traced into the graph (a sum, or a functional all-reduce); a lossy
        one is a graph break, because the link's generators and statistics run eagerly.
        """
        if self.tp_size == 1:
            return b + d  # a sync over one rank is the identity: nothing to count
        if torch.compiler.is_compiling() and not self.link.lossy:
            _count_traced(self, point, d)
            return b + self._sum_over_ranks(d)
        return self._eager_sync(b, d, point)

    @torch.compiler.disable
    def _eager_sync(self, b, d, point):
        return self._sync.apply(b, d, self, point)

    def add_summed(self, b, total, point):
        """A sync whose partials the sublayer already summed over ranks in its own GEMM (only
        where sums_in_gemm): the sum is the all-reduce; this counts it and adds it to b."""
        if torch.compiler.is_compiling() and not self.link.lossy:
            _count_traced(self, point, total)
            return b + total
        return _CountedAdd.apply(b, total, self, point)

    @contextlib.contextmanager
    def evaluating(self, lossy=False):
        """Evaluate through a lossless network, or with lossy=True through the link's own
        evaluation streams, fresh at every eval; training's streams are left untouched."""
        training_link = self.link
        self.link = training_link.for_eval() if lossy else LosslessLink()
        try:
            yield
        finally:
            self.link = training_link

    @contextlib.contextmanager
    def dry_run(self):
        """A pass that only finds shapes (torch's pipeline stages run one on empty tensors before the
        first step): nothing counted, and a lossy link delivers every packet without drawing."""
        self.dry = self.link.dry = True
        try:
            yield
        finally:
            self.dry = self.link.dry = False

    def checkpoint_contexts(self):
        """torch.utils.checkpoint's context_fn, once per checkpointed block: (around its forward,
        around its recompute). The recompute computes the same function: its syncs are not
        counted again, and a lossy link hands back the packet masks this block's forward drew
        (kept on the block's own tape, freed with its graph) instead of drawing new ones."""
        tape = {}
        return self._taping(tape, replay=False), self._taping(tape, replay=True)

    @contextlib.contextmanager
    def _taping(self, tape, replay):
        link = self.link
        self.replaying = replay
        if link.lossy:
            link.tape, link.replaying = tape, replay
        try:
            yield
        finally:
            self.replaying = False
            if link.lossy:
                link.tape, link.replaying = None, False

    def _timed(self, start):
        if self.timing:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.counter.comm_seconds += time.perf_counter() - start


class SimComm(TPComm):
    """One process simulates all tp_size ranks: every sharded tensor has a leading rank axis."""
    _sync = _SimSync

    @staticmethod
    def processes_per_tp_group(tp_size):
        return 1

    def __init__(self, tp_size=1, link=None, group=None, rank=0):
        super().__init__(tp_size, link)
        self.ranks = list(range(tp_size))  # the TP ranks whose shards this process holds
        self.local_ranks = tp_size

    @property
    def sums_in_gemm(self):
        """Whether a sublayer synced at once may return its partials already summed over ranks:
        on a lossless network the sum of the per-rank products is one GEMM over the
        concatenated ranks, the dense layer's own matmul, with no per-rank partial in memory."""
        return self.tp_size > 1 and not (self.link.loses(FWD) or self.link.loses(BWD))

    def _sum_over_ranks(self, d):
        return d.sum(0, keepdim=True)

    def loss_mean(self, loss):
        """The training objective from each rank's own loss: the mean over TP ranks (the
        model already averaged it over the rank axis)."""
        return loss

    def reduce_replicated_grads(self, params):
        """Autograd already summed every rank's gradient into the one copy of a replicated parameter."""

    def clip_grad_norm_(self, params, max_norm):
        """Clip by the norm of the whole model's gradient: every shard is here."""
        return torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], max_norm)

    def grad_squares(self, params):
        """The squared norm of params' gradients over the TP group (pipeline.py sums it over stages)."""
        return sum(p.grad.float().square().sum() for p in params if p.grad is not None)

    def gather_shards(self, tensors):
        """Sharded tensors (R, ...) of this process -> all tp_size ranks' shards stacked: already so."""
        return tensors

    def own_shard(self, stacked):
        """All ranks' shards stacked (T, ...) -> the shards this process holds: all of them."""
        return stacked

    def own_link_state(self, group_state):
        """The part of the TP group's link state (LossyLink.state_dict) this process draws from: all."""
        return group_state


class DistComm(TPComm):
    """This process is TP rank `rank` of the process group `group` (tp_size processes)."""
    _sync = _DistSync

    @staticmethod
    def processes_per_tp_group(tp_size):
        return tp_size

    sums_in_gemm = False  # a process holds one rank: the sum over ranks is the all-reduce

    def __init__(self, tp_size=1, link=None, group=None, rank=0):
        super().__init__(tp_size, link)
        self.group, self.rank = group, rank
        self.ranks = [rank]
        self.local_ranks = 1

    def _sum_over_ranks(self, d):
        return _AllReduceSum.apply(d, self.group)

    def reduce(self, x, direction, point):
        """The sum over TP ranks of x as this rank receives it through the link."""
        start = time.perf_counter() if self.timing else 0.0
        x = x.contiguous()
        if self.link.loses(direction):
            parts = [torch.empty_like(x) for _ in range(self.tp_size)]
            dist.all_gather(parts, x, group=self.group)
            out = self.link.receive(parts[self.rank].reshape(-1).clone(), [p.reshape(-1) for p in parts],
                                    self.rank, direction, point).view_as(x)
        else:
            out = x.clone()
            dist.all_reduce(out, group=self.group)
        self._timed(start)
        return out

    def loss_mean(self, loss):
        """The training objective from each rank's own loss: the mean over TP ranks."""
        return _MeanOverRanks.apply(loss, self) if self.tp_size > 1 else loss

    def reduce_replicated_grads(self, params):
        """Once per step: replicated parameters get the sum of every TP rank's gradient."""
        if self.tp_size == 1:
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
        if self.tp_size == 1:
            return torch.nn.utils.clip_grad_norm_(params, max_norm)
        norm = self.grad_squares(params).sqrt()
        scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        for p in params:
            p.grad.mul_(scale)
        return norm

    def grad_squares(self, params):
        """The squared norm of params' gradients over the TP group, every shard counted once."""
        params = [p for p in params if p.grad is not None]
        zero = params[0].grad.new_zeros((), dtype=torch.float32)  # a stage may hold no sharded weight
        squares = torch.stack([torch.stack([zero] + [p.grad.float().square().sum() for p in params
                                                     if getattr(p, "tp_sharded", False) == kind]).sum()
                               for kind in (True, False)])
        if self.tp_size > 1:  # replicated gradients are already equal on every rank
            dist.all_reduce(squares[0:1], group=self.group)
        return squares.sum()

    def gather_shards(self, tensors):
        """This rank's shards (1, ...) -> every rank's stacked (T, ...) on TP rank 0, None on the
        others: one all-gather over the TP group (a collective: every rank of the group calls it)."""
        if self.tp_size == 1:
            return tensors
        flat = torch.cat([t.reshape(-1).float() for t in tensors])  # one message for all of them
        parts = [torch.empty_like(flat) for _ in range(self.tp_size)]
        dist.all_gather(parts, flat, group=self.group)
        if self.rank != 0:
            return None
        per_rank = [part.split([t.numel() for t in tensors]) for part in parts]
        return [torch.cat([chunks[k].view_as(t) for chunks in per_rank]).to(t.dtype) for k, t in enumerate(tensors)]

    def own_shard(self, stacked):
        return stacked[self.rank:self.rank + 1]

    def own_link_state(self, group_state):
        """The streams into this rank (it draws the masks of what it receives); the statistics
        go to TP rank 0, so that sums over processes stay right."""
        keep_stats = self.rank == 0
        return {"streams": {k: v for k, v in group_state["streams"].items() if k[1] == self.rank},
                **{key: group_state[key] if keep_stats else {} for key in ("sent", "lost", "bursts")}}


MODES = {"sim": SimComm, "dist": DistComm}


def comm_for(tp_mode, tp_size=1, link=None, group=None, rank=0):
    """The execution mode's object; ValueError names an unknown tp_mode."""
    if tp_mode not in MODES:
        raise ValueError(f"tp_mode={tp_mode!r}: allowed are 'sim' (one process simulates the TP ranks) "
                         f"and 'dist' (one process per TP rank, under torchrun)")
    return MODES[tp_mode](tp_size, link, group, rank)


def process_grid(tp_procs, timeout=None, pp_size=1):
    """TP groups of consecutive ranks, then pipeline stages, then data parallel across them:
    rank = (dp_rank * pp_size + pp_rank) * tp_procs + tp_rank.

    Returns (tp_rank, dp_rank, dp_world, tp_group, dp_group), and with pp_size > 1 also
    (pp_rank, pp_group, tied_group): the stages of this process's pipeline, and its first and
    last stage, which hold the tied embedding / LM head. Every rank creates every group, as
    torch.distributed requires, each with `timeout` (a timedelta) for its collectives. With
    tp_procs == pp_size == 1 every process is a data-parallel rank and the default group is the
    data-parallel group.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    tp_rank, pp_rank, dp_rank = rank % tp_procs, rank // tp_procs % pp_size, rank // (tp_procs * pp_size)
    dp_world = world // (tp_procs * pp_size)
    if tp_procs == pp_size == 1:
        return 0, rank, world, None, None

    def grid_rank(dp, pp, tp):
        return (dp * pp_size + pp) * tp_procs + tp

    def own(groups):  # create every group (all ranks must), keep the one holding this rank
        mine = None
        for ranks in groups:
            group = dist.new_group(ranks, timeout=timeout)
            mine = group if rank in ranks else mine
        return mine

    cells = [(dp, pp) for dp in range(dp_world) for pp in range(pp_size)]
    tp_group = own([[grid_rank(dp, pp, tp) for tp in range(tp_procs)] for dp, pp in cells]) if tp_procs > 1 else None
    dp_group = own([[grid_rank(dp, pp, tp) for dp in range(dp_world)] for pp in range(pp_size)
                    for tp in range(tp_procs)])
    if pp_size == 1:
        return tp_rank, dp_rank, dp_world, tp_group, dp_group
    lines = [(dp, tp) for dp in range(dp_world) for tp in range(tp_procs)]
    pp_group = own([[grid_rank(dp, pp, tp) for pp in range(pp_size)] for dp, tp in lines])
    tied_group = own([[grid_rank(dp, 0, tp), grid_rank(dp, pp_size - 1, tp)] for dp, tp in lines])
    return tp_rank, dp_rank, dp_world, tp_group, dp_group, pp_rank, pp_group, tied_group
