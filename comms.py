"""
Every tensor-parallel (TP) collective of the model, in one place.

The model never talks to a process group or a network model itself: it calls
`TPComm.sync(b, d, point)` at each sync point, and that is where a sync is
counted, where a lossy link will drop packets, and where `sim` and `dist` modes
differ. Each collective is a small autograd.Function (the picotron style) and is
the identity when tp_size == 1.

Residual state at a sync (see README, "What a block does"):
    b: (Rb, B, T, C)  each rank's view of the last synchronised state
    d: (R,  B, T, C)  each rank's partial contributions not yet synchronised
R is the number of TP ranks held by this process (tp_size in `sim` mode, where
one process simulates every rank on a leading axis). Rb is 1 while every rank
agrees on b (always, on a lossless network), so replicated work is done once.

A sync point performs, for every rank r,
    b_r <- b_r + d_r + sum_{j != r} Link_{j->r}(d_j),   d_r <- 0
and its backward is the mirror exchange: the gradient of d_j is the sum of every
rank's output gradient (the Megatron `f` all-reduce), through the backward link.
"""

import torch


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

    def __repr__(self):
        return f"SyncCounter(forward={self.forward}, backward={self.backward})"


class LosslessLink:
    """The identity link: every packet of every message arrives.

    A link model decides, per directed link j->r and pass direction, which
    packets of a message get through. Lossy models plug in here.
    """
    lossy = False

    def describe(self):
        return "none (lossless)"


class _Sync(torch.autograd.Function):
    """One sync point in `sim` mode, all ranks on the leading axis."""

    @staticmethod
    def forward(ctx, b, d, comm, point):
        ctx.comm, ctx.point = comm, point
        ctx.b_ranks = b.shape[0]
        comm.counter.forward += 1
        comm.counter.points[point] = comm.counter.points.get(point, 0) + 1
        # lossless: every rank receives every partial, so all ranks agree
        # afterwards and the result is kept once, (1, B, T, C)
        return b + d.sum(0, keepdim=True)

    @staticmethod
    def backward(ctx, grad_out):
        # grad_out: (Rb, B, T, C), each rank's output gradient (with Rb == 1 the
        # output was shared by broadcasting, so grad_out is already the sum over
        # ranks). The mirror exchange hands that sum to every rank's partial d_j;
        # each rank's b receives its own output gradient.
        comm = ctx.comm
        comm.counter.backward += 1
        total = grad_out if grad_out.shape[0] == 1 else grad_out.sum(0, keepdim=True)
        grad_d = total.expand(comm.local_ranks, *grad_out.shape[1:])
        return grad_out, grad_d, None, None


class TPComm:
    """How this process's TP ranks synchronise: mode, size, link, counter.

    tp_size: TP ranks in the group.  mode: 'sim' (all ranks in this process).
    link: the network model between ranks (LosslessLink by default).
    """

    def __init__(self, tp_size=1, mode="sim", link=None):
        if mode != "sim":
            raise ValueError(f"tp_mode={mode!r}: only 'sim' is implemented in comms.TPComm")
        self.tp_size = tp_size
        self.mode = mode
        self.local_ranks = tp_size if mode == "sim" else 1
        self.link = link if link is not None else LosslessLink()
        self.counter = SyncCounter()

    # Under torch.compile each sync is a graph break on purpose: the counter (and the
    # link models' generators) run eagerly, the blocks between syncs are compiled.
    @torch.compiler.disable
    def sync(self, b, d, point):
        """Synchronise pending partials d into b at sync point `point` (a name).

        Returns the new b; the caller's d is spent (zero) afterwards.
        """
        if self.tp_size == 1:
            return b + d  # a sync over one rank is the identity: nothing to count
        return _Sync.apply(b, d, self, point)
