"""
Muon for the blocks' weight matrices, AdamW for the rest (seed 002's hybrid: train.py's optimizer='muon').

Muon (torch.optim.Muon, after Keller Jordan) keeps a momentum of each weight matrix's gradient and
steps along its orthogonalization: Newton-Schulz iterations push the singular values of the
(Nesterov) momentum towards 1. That is a function of the whole matrix, not of its elements: run on
each TP shard alone it would orthogonalize T smaller matrices, a different update at every tp_size
and a different one again under megatron's layout. So here the momentum is kept per shard (it is
elementwise: any layout gives the same numbers), and the update is orthogonalized on the whole
matrix: every rank's shard of it gathered (`sim`: all are in this process; `dist`: one all-gather
over the TP group, comms' gather_shards), put together in the dense layout (the layer's
`unshard`), orthogonalized, and cut back to this process's shards. Every rank of a TP group runs the
same iteration on the same matrix (T-fold redundant compute, no second message), and the update
equals the dense model's: TP=2 == TP=1 and `sim` == `dist` (tests/test_muon.py).

The step is torch's own (torch.optim._muon: the Newton-Schulz iteration and the learning-rate
adjustment), with adjust_lr_fn='match_rms_adamw' (Moonlight): the update's RMS matches AdamW's, so
learning_rate and weight_decay mean what they mean for AdamW, and the lr schedule applies to both.
"""

import torch

from layers import ColumnParallelLinear, RowParallelLinear


def _torch_muon():
    """torch.optim.Muon's module: its Newton-Schulz iteration, lr adjustment and defaults."""
    try:
        from torch.optim import _muon
        _muon.DEFAULT_A, _muon.EPS, _muon._adjust_lr, _muon._zeropower_via_newtonschulz  # noqa: B018
    except (ImportError, AttributeError):  # a user's own torch, older or newer: say so, never fall back
        raise RuntimeError(f"optimizer='muon' needs torch.optim.Muon as in torch 2.9-2.13; this torch is "
                         f"{torch.__version__}: use optimizer='adamw'") from None
    return _muon


def muon_params(model):
    """The parameters Muon steps: every weight matrix of the blocks (the TP-sharded linear layers'
    weights, sharded or not, and the MoE routers), not embeddings, the LM head, biases or gains."""
    return [module.weight for name, module in model.named_modules()
            if isinstance(module, (ColumnParallelLinear, RowParallelLinear))
            or (isinstance(module, torch.nn.Linear) and name.endswith("router"))]


class MuonAdamW(torch.optim.AdamW):
    """AdamW over the groups without 'muon' (their state and step are AdamW's own); Muon over the
    groups with muon=True, their state a per-element momentum_buffer (so checkpoint.py gathers and
    shards it like AdamW's moments). comm: the execution mode, whose TP group holds the shards."""

    def __init__(self, groups, comm, model, momentum=0.95, nesterov=True, ns_steps=5, **adamw):
        muon = _torch_muon()
        self._orthogonalize, self._adjust_lr = muon._zeropower_via_newtonschulz, muon._adjust_lr
        super().__init__(groups, **adamw)
        self.comm, self.muon_settings = comm, dict(momentum=momentum, nesterov=nesterov, ns_steps=ns_steps, eps=muon.EPS,
                                                   ns_coefficients=(muon.DEFAULT_A, muon.DEFAULT_B, muon.DEFAULT_C))
        # a sharded weight's layer: how its shards make the whole matrix (layers.py's shard / unshard)
        self.layers = {id(m.weight): m for m in model.modules() if isinstance(m, (ColumnParallelLinear, RowParallelLinear))
                       and getattr(m.weight, "tp_sharded", False) and m.tp_size > 1}

    @torch.no_grad()
    def step(self, closure=None):
        groups = self.param_groups
        self.param_groups = [g for g in groups if not g.get("muon")]  # AdamW's step sees its own groups only
        try:
            super().step()
        finally:
            self.param_groups = groups
        # float16: a fused AdamW (on a GPU) takes the GradScaler's skipping on itself, so the scaler
        # calls this step even after an overflow and leaves found_inf (and grad_scale, while the gradients
        # are still scaled) on the optimizer. The AdamW groups honour them in their kernel; so must Muon,
        # or an inf gradient becomes NaN weights. (Unfused, the scaler skips the whole step itself.)
        found_inf, grad_scale = getattr(self, "found_inf", None), getattr(self, "grad_scale", None)
        if found_inf is not None and found_inf.item():  # a host sync, under float16 only
            return
        for group in groups:
            if group.get("muon"):
                self._muon_step(group, grad_scale)

    def _muon_step(self, group, grad_scale=None):
        s = self.muon_settings
        params = [p for p in group["params"] if p.grad is not None]
        updates = []
        for p in params:  # torch.optim.Muon's momentum, per shard: elementwise
            state = self.state[p]
            if not state:  # a step count too, as AdamW's states have (AdamW's load_state_dict expects one)
                state.update(step=torch.tensor(0.0), momentum_buffer=torch.zeros_like(p))
            state["step"] += 1
            grad = p.grad if grad_scale is None else p.grad / grad_scale.to(p.grad.dtype)
            buf = state["momentum_buffer"]
            buf.lerp_(grad, 1 - s["momentum"])
            updates.append(grad.lerp(buf, s["momentum"]) if s["nesterov"] else buf)
        sharded = [i for i, p in enumerate(params) if id(p) in self.layers]
        everyone = self.comm.gather_shards([updates[i] for i in sharded], everyone=True)  # (T, ...) each: every rank's shards
        for i, shards in zip(sharded, everyone):
            updates[i] = self.layers[id(params[i])].unshard(shards)  # (out, in): the dense layout
        for p, update in zip(params, updates):
            update = update.reshape(update.shape[-2:])  # (out, in); one rank's layer holds (1, out, in)
            update = self._orthogonalize(update, s["ns_coefficients"], s["ns_steps"], s["eps"])  # the whole matrix
            lr = self._adjust_lr(group["lr"], "match_rms_adamw", update.shape)
            if id(p) in self.layers:
                update = self.layers[id(p)].shard(update)  # (R, ...): this process's shards of it
            p.mul_(1 - group["lr"] * group["weight_decay"])
            p.add_(update.view_as(p).to(p.dtype), alpha=-lr)
