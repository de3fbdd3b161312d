"""
The tensor-parallel linear layers of a block, `sim` and `dist` alike: each holds the shards of the
TP ranks this process holds on a leading rank axis (all tp_size in `sim`, one in `dist`), cut from
the full dense matrix so that every tp_size starts from the dense model's weights (model.py).
megatron_shim.py offers megatron-core's in their place.
"""

import torch
import torch.nn as nn
from torch.nn import functional as F


class ColumnParallelLinear(nn.Module):
    """Rank r computes its slice of the output features: y_r = x_r W_r^T + b_r; weight (R, out/T, in).
    With groups > 1 the output is `groups` stacked blocks (q, k, v), each sharded on its own, so
    rank r holds [q_r; k_r; v_r] and never a mix of q and k."""

    def __init__(self, in_features, out_features, tp_size, ranks, bias, groups=1):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.tp_size, self.ranks, self.groups = tp_size, list(ranks), groups
        self.weight = nn.Parameter(torch.empty(len(self.ranks), out_features // tp_size, in_features))
        self.bias = nn.Parameter(torch.zeros(len(self.ranks), out_features // tp_size)) if bias else None
        self.weight.tp_sharded = True
        if bias:
            self.bias.tp_sharded = True

    def forward(self, x):
        # x: (Rx, N, in) with Rx == 1 (state shared by all ranks) or R -> (R, N, out/T)
        R = self.weight.shape[0]
        if R == 1:  # plain GEMM: the dense model pays no bmm overhead; squeeze, not [0], whose
            # backward would fill a zero tensor and copy the gradient into it (two kernels per weight)
            return F.linear(x, self.weight.squeeze(0), None if self.bias is None else self.bias.squeeze(0))
        x = x.expand(R, *x.shape[1:])  # a stride-0 view: bmm reads the shared input R times, no copy
        if self.bias is None:
            return torch.bmm(x, self.weight.transpose(1, 2))
        return torch.baddbmm(self.bias.unsqueeze(1), x, self.weight.transpose(1, 2))

    def forward_concat(self, x):
        # x: (..., in), one state shared by every rank, all T ranks held here (sim) -> (..., out):
        # the dense layer's output from one GEMM. The shards reassembled in the dense feature
        # order (unshard: a view for the MLP; for q, k, v a copy of the weight, far smaller than
        # the activations that a per-rank layout would have to rearrange)
        bias = None if self.bias is None else self.unshard(self.bias)
        return F.linear(x, self.unshard(self.weight), bias)

    def shard(self, full):
        """Cut this process's shards from a full dense weight (out, in) or bias (out,)."""
        ranks, T, g = self.ranks, self.tp_size, self.groups
        blocks = full.reshape(g, T, self.out_features // (g * T), -1)[:, ranks]  # (g, R, out/(gT), in)
        return blocks.transpose(0, 1).reshape(len(ranks), self.out_features // T, *full.shape[1:])

    def unshard(self, shards):
        """Inverse of shard over all T ranks: (T, out/T, ...) -> the full (out, ...)."""
        T, g = self.tp_size, self.groups
        blocks = shards.reshape(T, g, self.out_features // (g * T), -1).transpose(0, 1)
        return blocks.reshape(self.out_features, *shards.shape[2:])


class RowParallelLinear(nn.Module):
    """Rank r turns its slice of the input features into a partial output; weight (R, out, in/T).
    The bias is replicated and each rank adds bias/T: a lossless sum carries it once (T == 1: nn.Linear)."""

    def __init__(self, in_features, out_features, tp_size, ranks, bias):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.tp_size, self.ranks = tp_size, list(ranks)
        self.weight = nn.Parameter(torch.empty(len(self.ranks), out_features, in_features // tp_size))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None
        self.weight.tp_sharded = True

    def forward(self, x):
        # x: (R, N, in/T) -> partial outputs (R, N, out), one per rank, not yet summed
        if self.weight.shape[0] == 1:
            bias = self.bias if self.bias is None or self.tp_size == 1 else self.bias / self.tp_size
            return F.linear(x, self.weight.squeeze(0), bias)
        if self.bias is None:
            return torch.bmm(x, self.weight.transpose(1, 2))
        return torch.baddbmm(self.bias / self.tp_size, x, self.weight.transpose(1, 2))

    def forward_summed(self, x):
        # x: (N, R*in/T), every rank's input side by side, rank-major -> (N, out), the sum of
        # the per-rank partials: sum_r x_r W_r^T is one GEMM over the concatenated inner
        # dimension (the dense layer's matmul); the bias once, as the sum of R shares of bias/T
        R = self.weight.shape[0]
        weight = self.weight.permute(1, 0, 2).reshape(self.out_features, R * self.weight.shape[2])  # (out, R*in/T)
        bias = self.bias if self.bias is None or R == self.tp_size else self.bias * (R / self.tp_size)
        return F.linear(x, weight, bias)

    def shard(self, full):
        if full.dim() == 1:
            return full  # the bias is replicated
        return full.reshape(self.out_features, self.tp_size, -1)[:, self.ranks].transpose(0, 1)

    def unshard(self, shards):
        if shards.dim() == 1:
            return shards
        return shards.transpose(0, 1).reshape(self.out_features, self.in_features)
