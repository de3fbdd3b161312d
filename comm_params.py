"""
What a TP execution mode does beyond the syncs (comms.py's SimComm and DistComm inherit these): the
training objective as the mean of every TP rank's loss, the gradients of replicated parameters summed
over the TP group, the gradient norm over every shard, and the shards gathered for a checkpoint.
"""

import torch
import torch.distributed as dist


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


class SharedParams:
    """Both modes: the norm over the TP group, this process's shards and link streams."""

    def grad_norm(self, params, stages=None, skip=None):
        """The whole model's gradient norm: every shard of every TP rank once (`_grad_norm`); stages: a
        pipeline's group, whose squares are summed (`skip`: the tied weight another stage counts)."""
        params = [p for p in params if p.grad is not None and p is not skip]
        if stages is None:
            return self._grad_norm(params)
        squares = self.grad_squares(params).reshape(1).double()
        dist.all_reduce(squares, group=stages)
        return squares.sqrt().float()[0]

    def own_shard(self, stacked):
        """All ranks' shards stacked (T, ...) -> the ones this process holds (all in `sim`, its own in `dist`)."""
        return stacked[self.ranks[0]:self.ranks[-1] + 1]

    def own_link_state(self, group_state):
        """The TP group's link state (LossyLink.state_dict) this process draws from: the streams into its
        ranks; the statistics go to the process of TP rank 0, so that sums over processes stay right."""
        return {"streams": {k: v for k, v in group_state["streams"].items() if k[1] in self.ranks},
                **{key: group_state[key] if 0 in self.ranks else {} for key in ("sent", "lost", "bursts")}}


class SimParams:
    """`sim`: every rank's shards and losses are in this process."""

    def loss_mean(self, loss):
        """The training objective from each rank's own loss: the mean over TP ranks (the
        model already averaged it over the rank axis)."""
        return loss

    def reduce_replicated_grads(self, params):
        """Autograd already summed every rank's gradient into the one copy of a replicated parameter."""

    def _grad_norm(self, params):
        return torch.nn.utils.get_total_norm([p.grad for p in params])  # every shard is here

    def grad_squares(self, params):
        """The squared norm of params' gradients over the TP group (pipeline.py sums it over stages)."""
        return sum(p.grad.float().square().sum() for p in params if p.grad is not None)

    def gather_shards(self, tensors, everyone=False):
        """Sharded tensors (R, ...) of this process -> all tp_size ranks' shards stacked: already so."""
        return tensors


class DistParams:
    """`dist`: one TP rank per process; the rest of the group is reached by collectives."""

    def loss_mean(self, loss):
        """The training objective from each rank's own loss: the mean over TP ranks."""
        return _MeanOverRanks.apply(loss, self) if self.tp_size > 1 else loss

    def reduce_replicated_grads(self, params):
        """Once per step: replicated parameters get the sum of every TP rank's gradient."""
        if self.tp_size == 1:
            return
        grads = [p.grad for p in params if not getattr(p, "tp_sharded", False) and p.grad is not None]
        with self.timed():
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, group=self.group)  # one message for all of them
            for g, summed in zip(grads, flat.split([g.numel() for g in grads])):
                g.copy_(summed.view_as(g))
        self.counter.replicated_bytes += flat.numel() * flat.element_size()

    def _grad_norm(self, params):
        if self.tp_size == 1:
            return torch.nn.utils.get_total_norm([p.grad for p in params])
        return self.grad_squares(params).sqrt()

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

    def gather_shards(self, tensors, everyone=False):
        """This rank's shards (1, ...) -> every rank's stacked (T, ...) on TP rank 0 (everyone: on
        every rank), None on the others: one all-gather over the TP group (every rank calls it)."""
        if self.tp_size == 1 or not tensors:
            return tensors
        flat = torch.cat([t.reshape(-1).float() for t in tensors])  # one message for all of them
        parts = [torch.empty_like(flat) for _ in range(self.tp_size)]
        dist.all_gather(parts, flat, group=self.group)
        if self.rank != 0 and not everyone:
            return None
        per_rank = [part.split([t.numel() for t in tensors]) for part in parts]
        return [torch.cat([chunks[k].view_as(t) for chunks in per_rank]).to(t.dtype) for k, t in enumerate(tensors)]
