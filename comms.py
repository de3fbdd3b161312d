"""
Every tensor-parallel (TP) collective of the model, and the execution mode that performs it.

The model never talks to a process group or to the network itself: it calls
`comm.sync(b, d, point)` at each sync point (a ladder block: `comm.send(d, point, later=True)`,
then `comm.land` a sublayer later; under sequence parallelism a sync is a reduce-scatter and an
all-gather, `_sequence_sync`), and that is where a sync is counted, where the link
(links.py) drops packets, and where the modes differ. Each collective is a small
autograd.Function (the picotron style) and is the identity when tp_size == 1. The mode is an
object, chosen once (`comm_for(tp_mode, ...)`), with the same methods in both classes:
    SimComm   one process holds all tp_size ranks on a leading axis; a sync is a (masked) sum
    DistComm  one TP rank per process; a sync is an all-reduce, or an all-gather (lossy, quantized)

Residual state at a sync (see README, "What a block does"):
    b: (Rb, B, L, C)  each rank's view of the last synchronised state
    d: (R,  B, L, C)  each rank's partial contributions not yet synchronised
R: the TP ranks this process holds (tp_size in `sim`). Rb is 1 while every rank agrees on b and
no per-rank gradient needs keeping apart (a lossless network): replicated work is done once.

A sync point performs, for every rank r,
    b_r <- b_r + d_r + sum_{j != r} Link_{j->r}(d_j),   d_r <- 0
and its backward is the mirror exchange: the gradient of d_j is rank j's own
output gradient plus every other rank's, each through the backward link r->j.
"""

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from counting import SyncCounter
from comm_contexts import PassContexts
from comm_params import DistParams, SharedParams, SimParams
from links import BWD, FWD, LosslessLink, exchange
from quantize import SYNC_DTYPES, decode, from_bytes, quantized, to_bytes, wire_bytes, wire_encode


# sequence parallelism's collectives: torch 2.13 renamed them (the old names warn); an older torch has the old only
_reduce_scatter = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
_all_gather = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)


class _Sync(torch.autograd.Function):
    """One sync's crossing, eager, in either mode: every rank's d as each rank receives it (comm.cross);
    the backward is the mirror exchange of the message's gradient, through the same crossing."""

    @staticmethod
    def forward(ctx, d, comm, point, later):
        ctx.comm, ctx.point, ctx.d_shape = comm, point, d.shape
        comm.count(point, FWD, d)
        return comm.cross(d, FWD, point, later)

    @staticmethod
    def backward(ctx, grad):
        # grad: (Rg, B, L, C), each rank's gradient of what it received; in `sim` with Rg == 1 the
        # message was shared by broadcasting and grad is already the sum over ranks
        comm = ctx.comm
        comm.count(ctx.point, BWD, grad)
        pending = comm.in_flight.pop(("bwd", ctx.point), None)  # a ladder's mirror exchange sent by _Land
        if pending is not None:
            with comm.timed():
                pending[0].wait()  # the rest of its time in the collective: the part no backward hid
            return pending[1].expand(ctx.d_shape), None, None, None
        return comm.cross(grad, BWD, ctx.point).expand(ctx.d_shape), None, None, None


class _Land(torch.autograd.Function):
    """`dist`, a ladder sync whose all-reduce was in flight: b + message. Its backward sends the mirror
    exchange of the message's gradient at once, asynchronously; _Sync's backward waits for it where the
    partials' gradient is consumed. Autograd runs the later-created nodes first, so the backward of the
    sublayer in between runs while the exchange is in flight: both passes hidden, as Ladder Residual."""

    @staticmethod
    def forward(ctx, b, message, comm, point):
        ctx.comm, ctx.point = comm, point
        return b + message

    @staticmethod
    def backward(ctx, grad):
        comm, summed = ctx.comm, grad.contiguous().clone()
        with comm.timed():  # the issue; _Sync's backward times the wait
            comm.in_flight[("bwd", ctx.point)] = (dist.all_reduce(summed, group=comm.group, async_op=True), summed)
        comm.counter.moved_bytes += summed.numel() * summed.element_size()
        return grad, summed, None, None  # summed: _Sync's backward reads it only after the wait


class _ReduceScatter(torch.autograd.Function):
    """Sequence parallelism's first half (DESIGN section 10): every rank's partials d (R, B, L, C) -> for each
    rank r held here, the sum over ranks of their rank-r tokens (R, B, L/T, C), rank j's through link j -> r.
    Its backward is the mirror: an all-gather of those sums' gradients (comm.gather, a lost packet: zeros)."""

    @staticmethod
    def forward(ctx, d, comm, point):
        ctx.comm, ctx.point, ctx.d_shape = comm, point, d.shape
        comm.count(point, FWD, d)  # one sync, its bytes those of the whole message (as an all-reduce's)
        return comm.scatter(d, FWD, point)

    @staticmethod
    def backward(ctx, grad):
        grad_d = ctx.comm.gather(grad, BWD, ctx.point)[0]
        ctx.comm.count(ctx.point, BWD, grad_d)
        return grad_d.expand(ctx.d_shape), None, None


class _AllGather(torch.autograd.Function):
    """Sequence parallelism's second half: each rank's synced shard (R, B, L/T, C) -> each rank's whole
    sequence (R, B, L, C), rank j's tokens through link j -> r; an element of a lost packet keeps `kept`, the
    receiver's own state from before the sync (b_r + d_r; None when the link loses nothing). Its backward is
    the mirror, a reduce-scatter of the gradients (comm.scatter); a kept element's gradient goes to `kept`
    (a rank's own state never crosses a link)."""

    @staticmethod
    def forward(ctx, shard, kept, comm, point):
        ctx.comm, ctx.point = comm, point
        out, ctx.lost = comm.gather(shard, FWD, point, kept)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad_kept = None if ctx.lost is None else torch.where(ctx.lost, grad, 0)
        return ctx.comm.scatter(grad, BWD, ctx.point), grad_kept, None, None


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


class TPComm(PassContexts, SharedParams):
    """What both modes share: tp_size, the link, the sync counter, the route of a sync. A subclass
    (SimComm, DistComm) says how a message crosses (`cross`; `_sum_traced` under torch.compile)."""

    def __init__(self, tp_size=1, link=None, sync_fraction=1.0, sync_dtype="", sequence_parallel=False):
        self.tp_size = tp_size
        self.sequence_parallel = sequence_parallel and tp_size > 1  # a sync: reduce-scatter + all-gather
        self.link = link if link is not None else LosslessLink()
        self.sync_fraction = sync_fraction  # the share of d's channels a sync sends (DESIGN section 8)
        self.sync_dtype = SYNC_DTYPES[sync_dtype]  # what a sync sends is quantized to (None: as it is)
        self.counter = SyncCounter()
        self.in_flight = {}  # `dist`: point -> its all-reduce sent with later=True; ("bwd", point): (its mirror's, buffer)
        self.replaying = False  # inside activation checkpointing's recompute (checkpoint_contexts)
        self.dry = False  # inside dry_run
        self.timing = False  # bench/: add the wall time spent in collectives to counter.comm_seconds
        self.traced_delivery = False  # a reliable link's syncs traced by torch.compile: (element size, device)
        self.traced = False  # a sync was traced into a compiled graph (its bytes moved are not counted)

    def sync(self, b, d, point):
        """One sync point, landing at once: for every rank r held here, b_r + d_r + sum_{j != r} Link_{j->r}(d_j)."""
        shared = round(self.sync_fraction * d.shape[-1])  # a partial sync: the other channels stay per rank
        if self.sequence_parallel and shared < d.shape[-1]:
            private = (b + d)[..., shared:]  # (R, B, L, C - shared): each rank's own, as `send` leaves them
            synced = self._sequence_sync(b[..., :shared], d[..., :shared], point)
            return torch.cat([synced.expand(*private.shape[:-1], shared), private], dim=-1)
        return self._sequence_sync(b, d, point) if self.sequence_parallel else b + self.send(d, point)

    @getattr(torch, "_disable_dynamo", torch.compiler.disable)  # eager, as a lossy sync (see _eager_send)
    def _sequence_sync(self, b, d, point):
        """A sync under sequence parallelism (DESIGN section 10): every rank's partials reduce-scattered into
        the shard of b of each rank's own L/T tokens, then the shards all-gathered: each rank's whole-sequence
        state (Rb, B, L, C). Lossless, the same sum as an all-reduce; a lost all-gather element keeps b_r + d_r."""
        if b.shape[2] % self.tp_size:
            raise ValueError(f"sequence_parallel: a sequence of {b.shape[2]} tokens does not split into "
                             f"tp_size={self.tp_size} shards of equal length")
        kept = b + d if self.link.loses(FWD) else None  # each rank's state before the sync
        shard = self.tokens_of(b) + _ReduceScatter.apply(d, self, point)  # (R, B, L/T, C)
        gathered = _AllGather.apply(shard, kept, self, point)
        self.keep_shard(gathered, shard)  # saving_shards: what autograd saves of it, kept as this shard
        return gathered

    def tokens_of(self, x, rank=None):
        """x (Rx, B, L, C) -> (R, B, L/T, C): each rank held here, its own tokens of its row of x (Rx == 1:
        every rank's row); rank: x (B, L, C), that rank's tokens (B, L/T, C)."""
        n = x.shape[-2] // self.tp_size
        if rank is not None:
            return x[:, rank * n:(rank + 1) * n]
        return torch.stack([x[min(i, x.shape[0] - 1), :, r * n:(r + 1) * n] for i, r in enumerate(self.ranks)])

    def _reduced(self, messages, r, direction, point):
        """Rank r's reduce-scatter: messages[j] (B, L/T, C) rank j's partials of r's tokens -> their sum as r
        receives it, every other rank's through link j -> r (section 9's options: links.LossyLink.receive)."""
        own = messages[r].reshape(-1).clone()
        return self.link.receive(own, [m.reshape(-1) for m in messages], r, direction, point).view_as(messages[r])

    def _gathered(self, shards, r, kept, direction, point):
        """Rank r's all-gather: shards[j] (B, L/T, C) rank j's synced tokens -> (B, L, C) as r receives them, and
        which elements were lost (they keep `kept`, r's (B, L, C), or zeros). The packets' statistics are the
        all-gather's own: point + '/gather'."""
        parts, lost = [], []
        for j, part in enumerate(shards):
            if j == r:  # its own shard never crosses a link
                parts.append(part)
                lost.append(torch.zeros_like(part, dtype=torch.bool))
                continue
            n_packets, per_packet = self.link.packets(part.numel(), part.element_size())
            arrived = self.link.arrived(j, r, direction, f"{point}/gather", n_packets, part.device)
            arrived = arrived.repeat_interleave(per_packet)[:part.numel()].view_as(part)
            parts.append(torch.where(arrived, part, 0 if kept is None else self.tokens_of(kept, j)))
            lost.append(~arrived)
        return torch.cat(parts, dim=1), torch.cat(lost, dim=1)

    def send(self, d, point, later=False):
        """The route of every sync: what each rank held here receives of every rank's partials d (its own
        exact): what is sent (d, or its first round(sync_fraction * C) channels, the rest staying with
        their rank; in sync_dtype), how it crosses (`cross`: a sum over the rank axis in `sim`, a
        collective in `dist`, through the link), and when it lands (in b: at once, as `sync` does, or a
        sublayer later with `land`; later=True lets `dist` leave its all-reduce in flight until then).
        d may be (1, ...): the partials already summed by the sublayer's own GEMM (`sums_in_gemm`)."""
        if self.tp_size == 1:
            return d  # a sync over one rank is the identity: nothing to count
        shared = round(self.sync_fraction * d.shape[-1])
        sent = d if shared == d.shape[-1] else d[..., :shared]
        if torch.compiler.is_compiling() and not self.link.loses(FWD) and not self.link.loses(BWD) \
                and self.sync_dtype is None:
            # traced into the graph: no Python runs per call, so the backward mirror exchange
            # (autograd's broadcast of the sum) is counted here, from the structure. A reliable link
            # (every packet arrives) is traced too: the graph, so every number, is the lossless run's;
            # its packets and resend rounds are drawn after the pass (deliver_traced)
            backward, self.traced = int(torch.is_grad_enabled() and d.requires_grad), True
            self.counter.add(point, self.message_bytes(sent), 1, backward, device=d.device)
            if self.link.lossy:  # set while tracing (an eval's lossless graph leaves it as training set it)
                self.traced_delivery = (sent.element_size(), d.device)
            message = self._sum_traced(sent)
        else:  # a lossy sync is a graph break: the link runs eagerly. A partial sync's message is read at once
            # (joined to the private channels below), so its all-reduce cannot be left in flight
            message = self._eager_send(sent, point, later and sent is d)
        if sent is d:
            return message
        private = d[..., shared:]  # each rank keeps its own
        return torch.cat([message.expand(*private.shape[:-1], shared), private], dim=-1)

    def deliver_traced(self, micro_batches):
        """After a step's compiled passes over a reliable link: their packets and resend rounds (links.py)."""
        if self.traced_delivery:
            element_size, device = self.traced_delivery
            self.link.deliver_counted(self.counter, micro_batches, element_size, self.ranks, self.tp_size, device)

    # torch.compiler.disable, made at the first call (torch's private _disable_dynamo, where it has one):
    # importing dynamo to decorate costs every process ~0.5 s at startup
    @getattr(torch, "_disable_dynamo", torch.compiler.disable)
    def _eager_send(self, d, point, later):
        return _Sync.apply(d, self, point, later)

    def land(self, b, message, point, hidden):
        """b + a message sent with later=True: in `dist`, its all-reduce is waited for now. hidden: another
        sublayer ran while it was in flight (counted: the sync's latency was hidden, not exposed)."""
        work = None if torch.compiler.is_compiling() else self.in_flight.pop(point, None)
        if work is not None:  # the rest of its time in the collective: cross timed only the issue
            with self.timed():
                work.wait()
        if hidden and self.tp_size > 1 and not (self.dry or self.replaying):  # and its backward exchange, if any
            self.counter.add(point, 0, 0, 0, 1, message.device, int(torch.is_grad_enabled() and message.requires_grad))
        if work is not None and torch.is_grad_enabled() and message.requires_grad and not self.link.loses(BWD):
            return _Land.apply(b, message, self, point)  # its backward exchange is hidden too
        return b + message

    def message_bytes(self, x, direction=FWD):
        """One rank's message of x (R, ..., C) as sent: its payload and scales (quantize.wire_bytes)."""
        dtype = self.sync_dtype or x.dtype
        rotated = self.link.layout(x[0].shape, dtype, direction) if self.sync_dtype and self.link.rotates(direction) else None
        return wire_bytes(x[0].numel() // x.shape[-1], x.shape[-1], dtype, rotated)

    def wire_element_size(self, x):
        """Bytes per element on the wire (packets are cut by it)."""
        return x.element_size() if self.sync_dtype is None else self.sync_dtype.itemsize

    def count(self, point, direction, x):
        """Count one eager sync (FWD) or mirror exchange (BWD) and its payload: one rank's message of x."""
        if self.dry:  # pipeline.py's shape inference: not a pass of training
            return
        if self.replaying:  # activation checkpointing's recompute of a sync already counted
            self.counter.recomputed += 1
            return
        self.counter.add(point, self.message_bytes(x, direction), int(direction == FWD), int(direction == BWD))
        link = self.link
        if link.lossy and not link.loses(direction) and self.sequence_parallel:  # both halves' packets (and a
            n_packets = link.packets(x[0].numel() // self.tp_size, x.element_size())[0]  # reliable link's resends),
            for phase in (point, f"{point}/gather"):  # each link a 1/T of the message
                link.deliver(phase, direction, n_packets, self.ranks, self.tp_size, x.device)
        elif link.lossy and not link.loses(direction):  # lossless direction of a lossy link (or a reliable one):
            # count its packets on the links j -> r into the ranks this process holds, and draw any resends
            n_packets = link.layout(x[0].shape, self.sync_dtype or x.dtype, direction)[0]
            link.deliver(point, direction, n_packets, self.ranks, self.tp_size, x.device)


class SimComm(TPComm, SimParams):
    """One process simulates all tp_size ranks: every sharded tensor has a leading rank axis."""
    moves_bytes = False  # no collective: nothing is handed to one

    @staticmethod
    def processes_per_tp_group(tp_size):
        return 1

    def __init__(self, tp_size=1, link=None, group=None, rank=0, **sync):
        super().__init__(tp_size, link, **sync)
        self.ranks = list(range(tp_size))  # the TP ranks whose shards this process holds
        self.local_ranks = tp_size

    @property
    def sums_in_gemm(self):
        """Whether a sublayer synced at once may return its partials summed over ranks (one GEMM over the
        concatenated ranks, the dense layer's): lossless, whole and unquantized syncs (else no such sum)."""
        return (self.tp_size > 1 and not (self.link.loses(FWD) or self.link.loses(BWD))
                and self.sync_fraction == 1 and self.sync_dtype is None)

    def cross(self, x, direction, point, later=False):
        """x (R, ...): every rank's message -> what each rank receives; (1, ...) while all agree.
        A (1, ...) x is already the sum (a summed GEMM's output, or a gradient shared by broadcasting)."""
        R, encoded = self.local_ranks, self.link.loses(direction) and self.link.encodes(self.sync_dtype)
        sent = x if encoded else quantized(x, self.sync_dtype)  # encoded: the link's codec, per packet (links.py)
        if self.link.loses(direction):  # rank j sends x_j to every r over link j -> r
            x, sent = (t.expand(R, *t.shape[1:]) for t in (x, sent))
            return exchange(x, sent, self.link, direction, point, self.wire_element_size(x), self.sync_dtype)
        if sent is not x:  # every rank's message as sent, its own exact
            x, sent = (t.expand(R, *t.shape[1:]) for t in (x, sent))
            return sent.sum(0, keepdim=True) + (x - sent)
        total = self._sum_traced(x)
        if direction == FWD and self.link.loses(BWD):
            # the states agree, but the backward exchange needs each rank's own gradient:
            # one view per rank, so that autograd does not sum them
            total = total.expand(R, *total.shape[1:])
        return total

    def _sum_traced(self, x):
        return x if x.shape[0] == 1 else x.sum(0, keepdim=True)

    def scatter(self, x, direction, point):
        """Reduce-scatter (sequence parallelism): x (Rx, B, L, C) every rank's message ((1, ...): already the
        sum) -> (R, B, L/T, C), each rank's own tokens of the sum as it receives it."""
        if not self.link.loses(direction):
            return self.tokens_of(self._sum_traced(x))
        x = x.expand(self.local_ranks, *x.shape[1:])
        return torch.stack([self._reduced([self.tokens_of(x[j], r) for j in self.ranks], r, direction, point)
                            for r in self.ranks])

    def gather(self, shard, direction, point, kept=None):
        """All-gather (sequence parallelism): shard (R, B, L/T, C), rank r's own tokens -> (whole sequence as
        each rank receives it (R, B, L, C), (1, ...) while all agree; lost elements (R, B, L, C) or None)."""
        if not self.link.loses(direction):
            whole = shard.transpose(0, 1).reshape(1, shard.shape[1], -1, shard.shape[-1])  # rank-major tokens
            return whole.expand(self.local_ranks, *whole.shape[1:]) if self.link.loses(BWD) else whole, None
        received = [self._gathered(list(shard.unbind(0)), r, None if kept is None else kept[min(r, kept.shape[0] - 1)],
                                   direction, point) for r in self.ranks]
        return tuple(torch.stack(parts) for parts in zip(*received))


class DistComm(TPComm, DistParams):
    """This process is TP rank `rank` of the process group `group` (tp_size processes)."""

    @staticmethod
    def processes_per_tp_group(tp_size):
        return tp_size

    sums_in_gemm = False  # a process holds one rank: the sum over ranks is the all-reduce
    moves_bytes = True  # counter.moved_bytes: what its collectives are handed

    def __init__(self, tp_size=1, link=None, group=None, rank=0, **sync):
        super().__init__(tp_size, link, **sync)
        self.group, self.rank = group, rank
        self.ranks = [rank]
        self.local_ranks = 1

    def _sum_traced(self, d):
        return _AllReduceSum.apply(d, self.group)

    def cross(self, x, direction, point, later=False):
        """The sum over TP ranks of x as this rank receives it. Lossless: an all-reduce, left in flight
        (async_op) when later, until `land`. Lossy or quantized: an all-gather of every rank's message (a
        quantized one as its wire bytes: quantize.pack, or over a lossy link its packets of values and
        scales, LossyLink.encode), which each receiver masks by the packets of its incoming links (the
        streams `sim` draws), dequantizes and sums in `sim`'s order (one-shot: a TP group is small)."""
        with self.timed():
            x, out, dtype = x.contiguous(), None, self.sync_dtype
            encoded = self.link.loses(direction) and self.link.encodes(dtype)
            if encoded or (dtype is not None and x.dtype != dtype):  # the wire bytes: payload and scales
                wire = self.link.encode(x, self.rank, direction, dtype) if encoded else wire_encode(x.view(-1, x.shape[-1]), dtype)
                moved = to_bytes(*wire)
                wires = [torch.empty_like(moved) for _ in range(self.tp_size)]
                dist.all_gather(wires, moved, group=self.group)
                wires = [from_bytes(w, dtype, wire[0].shape[-1]) for w in wires]
                if encoded:
                    out = self.link.receive_encoded(x.view(-1).clone(), wires, self.rank, direction, point, dtype,
                                                    x.shape).view_as(x)
                else:
                    parts = [decode(*w, x.dtype).view_as(x) for w in wires]
            elif self.link.loses(direction):
                moved, parts = x, [torch.empty_like(x) for _ in range(self.tp_size)]
                dist.all_gather(parts, x, group=self.group)
            else:
                moved = out = x.clone()
                work = dist.all_reduce(out, group=self.group, async_op=later and not self.replaying)
                if work is not None:
                    self.in_flight[point] = work
            self.counter.moved_bytes += moved.numel() * moved.element_size()
            if out is None:  # gathered: each rank's message masked at the receiver (lossy) or summed
                if self.link.loses(direction):
                    out = self.link.receive(x.reshape(-1).clone(), [p.reshape(-1) for p in parts], self.rank, direction,
                                            point, self.wire_element_size(x)).view_as(x)
                else:  # quantized, lossless: every rank's message as received, this rank's own exact
                    out = torch.stack(parts).sum(0) + (x - parts[self.rank])
        return out

    def scatter(self, x, direction, point):
        """Reduce-scatter (sequence parallelism): this rank's message x (1, B, L, C) -> (1, B, L/T, C) its own
        tokens of the sum: a reduce-scatter, or over a lossy link all_to_all and a sum at the receiver."""
        with self.timed():
            B, L, C = x.shape[1:]
            chunks = x[0].reshape(B, self.tp_size, L // self.tp_size, C).transpose(0, 1).contiguous()  # (T, B, L/T, C)
            self.counter.moved_bytes += chunks.numel() * chunks.element_size()
            if not self.link.loses(direction):
                out = torch.empty_like(chunks[0])
                _reduce_scatter(out, chunks.flatten(0, 1), group=self.group)  # gloo: (T*B, ...)
                return out.unsqueeze(0)
            parts = list(torch.empty_like(chunks).unbind(0))  # parts[j]: rank j's partials of this rank's tokens
            dist.all_to_all(parts, list(chunks.unbind(0)), group=self.group)
            return self._reduced(parts, self.rank, direction, point).unsqueeze(0)

    def gather(self, shard, direction, point, kept=None):
        """All-gather (sequence parallelism): shard (1, B, L/T, C) this rank's tokens -> (the whole sequence as
        it receives it (1, B, L, C), its lost elements or None): an all-gather, masked if lossy."""
        with self.timed():
            shard = shard[0].contiguous()
            self.counter.moved_bytes += shard.numel() * shard.element_size()
            parts = shard.new_empty(self.tp_size, *shard.shape)  # (T, B, L/T, C)
            _all_gather(parts.flatten(0, 1), shard, group=self.group)
            if not self.link.loses(direction):
                return parts.transpose(0, 1).reshape(1, shard.shape[0], -1, shard.shape[-1]), None
            out, lost = self._gathered(list(parts.unbind(0)), self.rank, None if kept is None else kept[0], direction, point)
            return out.unsqueeze(0), lost.unsqueeze(0)


MODES = {"sim": SimComm, "dist": DistComm}


def comm_for(tp_mode, tp_size=1, link=None, group=None, rank=0, **sync):
    """The execution mode's object; ValueError names an unknown tp_mode. sync: sync_fraction, sync_dtype,
    sequence_parallel."""
    if tp_mode not in MODES:
        raise ValueError(f"tp_mode={tp_mode!r}: allowed are 'sim' (one process simulates the TP ranks) "
                         f"and 'dist' (one process per TP rank, under torchrun)")
    return MODES[tp_mode](tp_size, link, group, rank, **sync)
