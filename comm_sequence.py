"""
Sequence parallelism's sync (DESIGN section 10), the part both execution modes share (comms.TPComm
inherits it): the sync as its two halves, each a small autograd.Function, and what one receiver makes
of what crossed to it. The modes' `scatter` and `gather` (comms.py) move the messages: `sim` builds
every rank's, `dist` hands them to reduce_scatter / all_to_all and all_gather.

    reduce-scatter  rank r receives every rank j's partials of r's L/T tokens and sums them (its own
                    exact) into its shard of b: `_reduced`
    all-gather      rank r receives every other rank's shard: `_gathered`

With a sync_dtype each half sends its message quantized (the two-shot form of a low-precision
all-reduce): a rank's own contribution stays exact, every other rank's arrives as the codec gives it
(quantize.py; int8 and float8 with a float32 scale per token). Over a lossy link each half has its own
packets: the reduce-scatter's as an all-reduce's message would be cut (rotated, with sync_rotation:
the link's codec), the all-gather's whole rows of the synced shard, never rotated, a lost element
keeping the receiver's own state from before the sync.
"""

import torch

from links import BWD, FWD
from quantize import arrived_values, decode, packets, per_token, wire_encode


class _ReduceScatter(torch.autograd.Function):
    """Every rank's partials d (R, B, L, C) -> for each rank r held here, the sum over ranks of their rank-r
    tokens (R, B, L/T, C), rank j's through link j -> r. Its backward is the mirror: an all-gather of those
    sums' gradients (comm.gather, a lost packet: zeros)."""

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
    """Each rank's synced shard (R, B, L/T, C) -> each rank's whole sequence (R, B, L, C), rank j's tokens
    through link j -> r; an element of a lost packet keeps `kept`, the receiver's own state from before the
    sync (b_r + d_r; None when the link loses nothing). Its backward is the mirror, a reduce-scatter of the
    gradients (comm.scatter); a kept element's gradient goes to `kept` only: the receiver knows what it lost,
    and that element's value never came from the shard's owner, so its gradient is not sent there too."""

    @staticmethod
    def forward(ctx, shard, kept, comm, point):
        ctx.comm, ctx.point = comm, point
        out, ctx.lost = comm.gather(shard, FWD, point, kept)
        return out

    @staticmethod
    def backward(ctx, grad):
        if ctx.lost is None:
            return ctx.comm.scatter(grad, BWD, ctx.point), None, None, None
        crossing = torch.where(ctx.lost, 0, grad)  # what came from the owners; the rest is the kept state's
        return ctx.comm.scatter(crossing, BWD, ctx.point), torch.where(ctx.lost, grad, 0), None, None


class SequenceHalves:
    """Mixed into comms.TPComm: needs self.tp_size, self.ranks, self.link, self.sync_dtype, keep_shard."""

    @getattr(torch, "_disable_dynamo", torch.compiler.disable)  # eager, as a lossy sync (comms._eager_send)
    def _sequence_sync(self, b, d, point):
        """A sync: every rank's partials reduce-scattered into the shard of b of each rank's own L/T tokens,
        then the shards all-gathered: each rank's whole-sequence state (Rb, B, L, C). Lossless and unquantized,
        the same sum as an all-reduce; a lost all-gather element keeps b_r + d_r."""
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

    def scatter_wire(self, x, src, direction):
        """What sender src puts on link src -> r for the reduce-scatter: its partials x (B, L/T, C) of r's
        tokens as they are, or quantized (payload, scales): the link's codec where it encodes (rotated first)."""
        if self.sync_dtype is None:
            return x
        if self.link.loses(direction) and self.link.encodes(self.sync_dtype):
            return self.link.encode(x, src, direction, self.sync_dtype)
        return wire_encode(x.reshape(-1, x.shape[-1]), self.sync_dtype)

    def gather_wire(self, shard):
        """What a rank sends of its synced shard (B, L/T, C) in the all-gather: itself, or (payload, scales)."""
        return shard if self.sync_dtype is None else wire_encode(shard.reshape(-1, shard.shape[-1]), self.sync_dtype)

    def _reduced(self, own, wires, r, direction, point):
        """Rank r's reduce-scatter: own (B, L/T, C) its own partials of its tokens, wires[j] what rank j sent
        it (scatter_wire) -> their sum as r receives it, every other rank's through link j -> r (section 9's
        options: links.LossyLink.receive)."""
        acc, dtype, link = own.reshape(-1).clone(), self.sync_dtype, self.link
        if dtype is not None and link.loses(direction) and link.encodes(dtype):
            return link.receive_encoded(acc, wires, r, direction, point, dtype, own.shape).view_as(own)
        values = [w.reshape(-1) if dtype is None else decode(*w, own.dtype).reshape(-1) for w in wires]
        if link.loses(direction):
            return link.receive(acc, values, r, direction, point, self.wire_element_size(own)).view_as(own)
        return (acc + sum(v for j, v in enumerate(values) if j != r)).view_as(own)

    def _gathered(self, own, wires, r, kept, direction, point):
        """Rank r's all-gather: own (B, L/T, C) its synced shard, wires[j] rank j's (gather_wire) -> (the whole
        sequence (B, L, C) as r receives it, its lost elements or None). A lost element keeps `kept`, r's
        (B, L, C) (or zero). The packets' statistics are the all-gather's own: point + '/gather'."""
        parts, lost, loses = [], [], self.link.loses(direction)
        for j, wire in enumerate(wires):
            if j == r:  # its own shard never crosses a link
                parts.append(own)
                lost.append(torch.zeros_like(own, dtype=torch.bool))
                continue
            part = wire if self.sync_dtype is None else decode(*wire, own.dtype).view_as(own)
            readable = self._readable(j, r, direction, f"{point}/gather", own) if loses else None
            fill = 0 if kept is None else self.tokens_of(kept, j)  # a lost element: r's own state before the sync
            parts.append(part if readable is None else torch.where(readable, part, fill))
            lost.append(None if readable is None else ~readable)
        return torch.cat(parts, dim=1), torch.cat(lost, dim=1) if loses else None

    def _readable(self, src, dst, direction, point, like):
        """Which elements of a shard like `like` (B, L/T, C) arrived on link src -> dst: its values cut into
        packets, or (int8, float8) whole rows with their scales (a lost scale loses its row)."""
        dtype, C = self.sync_dtype, like.shape[-1]
        if dtype in per_token:
            n_packets, unit = packets(like.numel() // C, C, dtype, self.link.packet_bytes, rotated=False)
            arrived = self.link.arrived(src, dst, direction, point, n_packets, like.device)
            readable = arrived_values(arrived, like.numel() // C, C, dtype, unit, self.link.packet_bytes)  # (rows, 1|C)
            return readable.expand(-1, C).reshape(like.shape)
        n_packets, per_packet = self.link.packets(like.numel(), self.wire_element_size(like))
        arrived = self.link.arrived(src, dst, direction, point, n_packets, like.device)
        return arrived.repeat_interleave(per_packet)[:like.numel()].view_as(like)

    def half_packets(self, x):
        """Packets of one half's message on one link: a 1/T of the sync's message x (R, ..., C), cut as it
        crosses a lossless direction (not rotated)."""
        rows, C = x[0].numel() // x.shape[-1] // self.tp_size, x.shape[-1]
        return packets(rows, C, self.sync_dtype or x.dtype, self.link.packet_bytes, rotated=False)[0]
