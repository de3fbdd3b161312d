"""
Every tensor-parallel (TP) collective of the model, and the execution mode that performs it.

The model never talks to a process group or to the network itself: it calls
`comm.sync(b, d, point)` at each sync point (a ladder block: `comm.send(d, point, later=True)`,
then `comm.land` a sublayer later; under sequence parallelism a sync is a reduce-scatter and an
all-gather, comm_sequence.py's `_sequence_sync`), and that is where a sync is counted, where the link
(links.py) drops packets, and where the modes differ. Each collective is a small
autograd.Function (the picotron style) and is the identity when tp_size == 1. The mode is an
object, chosen once (`comm_for(tp_mode, ...)`), with the same methods in both classes:
    SimComm   one process holds all tp_size ranks on a leading axis; a sync is a (masked) sum
    DistComm  one TP rank per process; a sync is an all-reduce, or an all-gather (lossy, quantized)

Residual state at a sync (see docs/blocks.md, "What a block does"):
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
from comm_sequence import SequenceHalves
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
        ctx.comm, ctx.point, ctx.dtypes = comm, point, (b.dtype, message.dtype)
        return b + message

    @staticmethod
    def backward(ctx, grad):
        # grad is in the sum's dtype (float32 for a bfloat16 message under autocast): the exchange sends it in the
        # message's dtype, as _Sync's backward (the exchange not hidden) does and counts, so both sum the same values
        b_dtype, message_dtype = ctx.dtypes
        comm, summed = ctx.comm, grad.to(message_dtype, memory_format=torch.contiguous_format, copy=True)
        with comm.timed():  # the issue; _Sync's backward times the wait
            comm.in_flight[("bwd", ctx.point)] = (dist.all_reduce(summed, group=comm.group, async_op=True), summed)
        comm.counter.moved_bytes += summed.numel() * summed.element_size()
        return grad.to(b_dtype), summed, None, None  # summed: _Sync's backward reads it only after the wait


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


class TPComm(PassContexts, SharedParams, SequenceHalves):
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
        self.hide_backward = True  # ladder's backward exchange behind a sublayer's backward (False: bench/step_time.py's split)
        self.traced_delivery = False  # a reliable link's syncs traced by torch.compile: (element size, device)
        self.traced = False  # a sync was traced into a compiled graph (its bytes moved are not counted)

    def describe(self, compiled=False):
        """How a sync crosses, for the run's layout line: 'all-reduce', 'reduce-scatter + all-gather of int8, ...';
        under SP in `dist`, whether saved states are kept as shards (comm_contexts.saving_shards: eager only)."""
        if self.tp_size == 1:
            return "none (one rank)"
        sent = [str(self.sync_dtype).removeprefix("torch.")] if self.sync_dtype is not None else []
        sent += [f"{self.sync_fraction:g} of the channels"] if self.sync_fraction < 1 else []
        how = "reduce-scatter + all-gather (sequence parallel" if self.sequence_parallel else "all-reduce"
        if self.sequence_parallel:
            sharded = self.moves_bytes and not (self.link.loses(FWD) or sent)
            how += (", no saved state kept as a shard under compile" if compiled else ", saved states kept as shards") \
                if sharded else ""
            how += ")"
        return how + (f" of {', '.join(sent)}" if sent else "")

    def sync(self, b, d, point):
        """One sync point, landing at once: for every rank r held here, b_r + d_r + sum_{j != r} Link_{j->r}(d_j)."""
        shared = round(self.sync_fraction * d.shape[-1])  # a partial sync: the other channels stay per rank
        if self.sequence_parallel and shared < d.shape[-1]:
            private = (b + d)[..., shared:]  # (R, B, L, C - shared): each rank's own, as `send` leaves them
            synced = self._sequence_sync(b[..., :shared], d[..., :shared], point)
            return torch.cat([synced.expand(*private.shape[:-1], shared), private], dim=-1)
        return self._sequence_sync(b, d, point) if self.sequence_parallel else b + self.send(d, point)

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
        """b + a message sent with later=True: in `dist`, its all-reduce is waited for now. hidden: the schedule
        ran another sublayer between its send and now (counted as hidden, not exposed: the schedule's count;
        in `dist` a quantized, partial or lossy sync was waited for at its send, docs/runs.md, "What a run writes")."""
        work = None if torch.compiler.is_compiling() else self.in_flight.pop(point, None)
        if work is not None:  # the rest of its time in the collective: cross timed only the issue
            with self.timed():
                work.wait()
        if hidden and self.tp_size > 1 and not (self.dry or self.replaying):  # and its backward exchange, if any
            self.counter.add(point, 0, 0, 0, 1, message.device,
                             int(self.hide_backward and torch.is_grad_enabled() and message.requires_grad))
        if work is not None and self.hide_backward and torch.is_grad_enabled() and message.requires_grad \
                and not self.link.loses(BWD):
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
            for phase in (point, f"{point}/gather"):  # reliable link's resends), each link a 1/T of the message
                link.deliver(phase, direction, self.half_packets(x), self.ranks, self.tp_size, x.device)
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
        if not self.link.loses(direction) and self.sync_dtype is None:
            return self.tokens_of(self._sum_traced(x))
        x = x.expand(self.local_ranks, *x.shape[1:])
        return torch.stack([self._reduced(self.tokens_of(x[r], r), [self.scatter_wire(self.tokens_of(x[j], r), j, direction)
                                                                   for j in self.ranks], r, direction, point)
                            for r in self.ranks])

    def gather(self, shard, direction, point, kept=None):
        """All-gather (sequence parallelism): shard (R, B, L/T, C), rank r's own tokens -> (whole sequence as
        each rank receives it (R, B, L, C), (1, ...) while all agree; lost elements (R, B, L, C) or None)."""
        if not self.link.loses(direction) and self.sync_dtype is None:
            whole = shard.transpose(0, 1).reshape(1, shard.shape[1], -1, shard.shape[-1])  # rank-major tokens
            return whole.expand(self.local_ranks, *whole.shape[1:]) if self.link.loses(BWD) else whole, None
        shard = shard.expand(self.local_ranks, *shard.shape[1:])
        wires = [self.gather_wire(s) for s in shard.unbind(0)]  # each rank's shard as it crosses
        outs, lost = zip(*[self._gathered(shard[r], wires, r, None if kept is None else kept[min(r, kept.shape[0] - 1)],
                                          direction, point) for r in self.ranks])
        return torch.stack(outs), None if lost[0] is None else torch.stack(lost)


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
        tokens of the sum: a reduce-scatter; lossy or quantized, all_to_all of each rank's chunk for each
        (its wire bytes: payload and scales) and the sum at the receiver."""
        with self.timed():
            B, L, C = x.shape[1:]
            chunks = x[0].reshape(B, self.tp_size, L // self.tp_size, C).transpose(0, 1).contiguous()  # (T, B, L/T, C)
            if not self.link.loses(direction) and self.sync_dtype is None:
                self.counter.moved_bytes += chunks.numel() * chunks.element_size()
                out = torch.empty_like(chunks[0])
                _reduce_scatter(out, chunks.flatten(0, 1), group=self.group)  # gloo: (T*B, ...)
                return out.unsqueeze(0)
            wires = [self.scatter_wire(chunk, self.rank, direction) for chunk in chunks]  # one for each rank
            sent = wires if self.sync_dtype is None else [to_bytes(*w) for w in wires]
            received = list(torch.empty_like(torch.stack(sent)).unbind(0))  # [j]: what rank j sent this rank
            dist.all_to_all(received, sent, group=self.group)
            self.counter.moved_bytes += sum(m.numel() * m.element_size() for m in sent)
            if self.sync_dtype is not None:
                received = [from_bytes(m, self.sync_dtype, wires[0][0].shape[-1]) for m in received]
            return self._reduced(chunks[self.rank], received, self.rank, direction, point).unsqueeze(0)

    def gather(self, shard, direction, point, kept=None):
        """All-gather (sequence parallelism): shard (1, B, L/T, C) this rank's tokens -> (the whole sequence as
        it receives it (1, B, L, C), its lost elements or None): an all-gather (quantized: of its wire bytes),
        masked if lossy."""
        with self.timed():
            shard = shard[0].contiguous()
            sent = shard if self.sync_dtype is None else to_bytes(*self.gather_wire(shard))
            self.counter.moved_bytes += sent.numel() * sent.element_size()
            parts = sent.new_empty(self.tp_size, *sent.shape)  # (T, ...): every rank's
            _all_gather(parts.flatten(0, 1), sent, group=self.group)
            if not self.link.loses(direction) and self.sync_dtype is None:
                return parts.transpose(0, 1).reshape(1, shard.shape[0], -1, shard.shape[-1]), None
            wires = list(parts.unbind(0)) if self.sync_dtype is None else \
                [from_bytes(p, self.sync_dtype, shard.shape[-1]) for p in parts]
            out, lost = self._gathered(shard, wires, self.rank, None if kept is None else kept[0], direction, point)
            return out.unsqueeze(0), None if lost is None else lost.unsqueeze(0)


MODES = {"sim": SimComm, "dist": DistComm}


def comm_for(tp_mode, tp_size=1, link=None, group=None, rank=0, **sync):
    """The execution mode's object; ValueError names an unknown tp_mode. sync: sync_fraction, sync_dtype,
    sequence_parallel."""
    if tp_mode not in MODES:
        raise ValueError(f"tp_mode={tp_mode!r}: allowed are 'sim' (one process simulates the TP ranks) "
                         f"and 'dist' (one process per TP rank, under torchrun)")
    return MODES[tp_mode](tp_size, link, group, rank, **sync)
