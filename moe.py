"""
A mixture-of-experts MLP for the blocks of model.py (n_experts > 0), tensor-parallel the way the
dense MLP is: every expert is an MLP whose 4C hidden units are sharded over the TP ranks, so rank r
holds 4C/T units of every expert and its output is a partial sum like the dense MLP's. A block's
syncs, their count and their bytes are unchanged; every block type, link and mode applies.

The router (C -> n_experts) is replicated. Each rank routes from its own input: the LayerNormed
x_r = b_r + d_r that its MLP reads (DESIGN: a rank's residual state). After a sync every rank holds
the same x, so all ranks choose the same experts and the partials sum to the dense MoE's output;
where the ranks' states differ (after an unsynchronised attention: `spd`, `parallel`) each rank
chooses for its own x, and its partial is its own experts' units applied to its own x.

For token i, top-k routing chooses the k experts of largest router probability p_ie and weighs them
by p_ie renormalised over the k (Mixtral); at k = 1 by p_ie itself (Switch Transformer), since a weight
renormalised over one expert is always 1 and the router would learn nothing from the language-model
loss, only from the balancing loss. The load-balancing loss (Switch Transformer) is
    aux = E * sum_e f_e * P_e,  f_e: the share of the N*k choices that went to expert e,
                                P_e: the mean router probability of e over the N tokens,
which is 1 when the load is uniform; it is the mean over the ranks held here, and the model adds
moe_aux_loss_coef x aux of every block to each rank's training loss (model.GPT.loss: summed over the
blocks, as Megatron adds each layer's).
Shape letters: R ranks held here, N = B*L tokens, C n_embd, E n_experts, k experts_top_k.
"""

import torch
import torch.nn as nn
from torch.nn import functional as F


class Expert(nn.Module):
    """One expert: the dense MLP's shape, its 4C hidden units sharded over the TP ranks."""

    def __init__(self, C, T, ranks, bias, layers):
        super().__init__()
        column, row = layers
        self.c_fc = column(C, 4 * C, T, ranks, bias)
        self.gelu = nn.GELU()
        self.c_proj = row(4 * C, C, T, ranks, bias)

    def forward(self, x):
        # x: (Rx, n, C) the tokens routed here -> (R, n, C) each rank's partial output
        return self.c_proj(self.gelu(self.c_fc(x)))


class MoEMLP(nn.Module):

    def __init__(self, config, ranks, layers):
        super().__init__()
        C, T, E = config.n_embd, config.tp_size, config.n_experts
        self.top_k = config.experts_top_k
        self.router = nn.Linear(C, E, bias=False)  # replicated: every rank holds it whole
        self.experts = nn.ModuleList([Expert(C, T, ranks, config.bias, layers) for _ in range(E)])
        self.dropout = nn.Dropout(config.dropout)
        self.aux_loss = None  # the last forward's load-balancing loss (a tensor in the graph)

    def forward(self, x, summed=False):
        """Per-rank partial outputs (R, B, L, C); summed=True (x shared by the ranks): their sum over
        ranks (1, B, L, C), as model.MLP offers (here the partials are computed, then added)."""
        Rx, B, L, C = x.size()
        x = x.view(Rx, B * L, C)
        logits = self.router(x)  # (Rx, N, E); the softmax in fp32 at least: the choice is sensitive to rounding
        probs = F.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)  # (Rx, N, E)
        top_p, top_e = probs.topk(self.top_k, dim=-1)  # (Rx, N, k)
        chosen = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, top_e, True)  # (Rx, N, E)
        weights = top_p / top_p.sum(-1, keepdim=True) if self.top_k > 1 else top_p  # k=1: p itself (Switch)
        gates = torch.zeros_like(probs).scatter(-1, top_e, weights)  # (Rx, N, E)
        load = chosen.float().mean(1) / self.top_k  # (Rx, E): f_e, the share of the choices
        self.aux_loss = (len(self.experts) * (load * probs.mean(1)).sum(-1)).mean()  # the mean over ranks
        # Dispatch in one pass: every (expert, token) pair that any rank held here sent (only ranks whose
        # states differ disagree; a rank that did not choose e for a token weighs its output 0 there),
        # sorted by expert with one stable sort, so the only device-to-host sync is the E chunk sizes
        # (one per layer, not one `nonzero` per expert). An expert no token chose still runs (on none):
        # its gradient is zeros, not None, so every layout and mode steps the same parameters (a `dist`
        # rank cannot know whether another rank's tokens chose it)
        sent = chosen.any(0).t().reshape(-1)  # (E*N,) pair e*N + i: token i sent to expert e
        sizes = sent.view(len(self.experts), B * L).sum(1).tolist()  # (E,) on the host: the one sync
        pairs = torch.argsort((~sent).to(torch.int8), stable=True)[:sum(sizes)]  # (M,) sent pairs, by expert
        expert_of, tokens = pairs // (B * L), pairs % (B * L)  # (M,), (M,)
        y = torch.cat([expert(chunk) for expert, chunk in zip(self.experts, x[:, tokens].split(sizes, dim=1))],
                      dim=1)  # (R, M, C)
        y = y * gates[:, tokens, expert_of, None].to(x.dtype)  # (R, M, C)
        out = torch.zeros(y.size(0), B * L, C, dtype=y.dtype, device=y.device).index_add(1, tokens, y)  # (R, N, C)
        out = self.dropout(out).view(-1, B, L, C)  # (R, B, L, C) partials
        return out.sum(0, keepdim=True) if summed else out
