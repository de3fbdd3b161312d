"""
GPT-2 in which every transformer block is one of four tensor-parallel types.

    tp        Megatron-style: d += attn; sync; d += mlp; sync     2 syncs per block
    spd       sync-point drop: d += attn; d += mlp; sync          1 sync per block
    parallel  no sync: each rank runs its own narrow tower        0 syncs per block
    ladder    Ladder Residual: tp's syncs, each landing in b one  2 syncs per block, hidden
              sublayer late (its all-reduce runs behind the next sublayer's compute)

Rank r of T = tp_size owns n_head/T heads (its q, k, v slices, the matching columns of the
attention projection) and 4C/T MLP hidden units; LayerNorms, embeddings and the tied head are
replicated. Each rank's residual state is x_r = b_r + d_r: b_r its view of the last sync, d_r
its own partials not yet synchronised; a sync point (comms.py) adds every d into every b.
`sim` mode holds all T ranks in one process (a leading rank axis on every sharded weight, bmm
per rank: the dense model's FLOPs); `dist` holds one (R = 1) and syncs with real collectives.
Activations are (R, B, L, C), R == 1 for a state every rank agrees on (computed once).
Shape letters: R ranks held here, B batch, L sequence length, C n_embd, N = B*L.
"""

import inspect
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from comms import SimComm
from layers import ColumnParallelLinear, RowParallelLinear
from moe import MoEMLP
from optim import MuonAdamW, muon_params
from patterns import (BLOCK_TYPES, count_sync_points, describe_pattern, exposed_sync_points,  # noqa: F401
                      parse_block_schedule, parse_block_types, pattern_at, sync_point_names)

class CausalSelfAttention(nn.Module):

    def __init__(self, config, ranks, layers):
        super().__init__()
        C, T = config.n_embd, config.tp_size
        column, row = layers
        self.c_attn = column(C, 3 * C, T, ranks, config.bias, groups=3)  # q, k, v sharded by heads
        self.c_proj = row(C, C, T, ranks, config.bias)
        self.heads_per_rank = config.n_head // T
        self.head_size = C // config.n_head
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x, summed=False):
        """Per-rank partial outputs (R, B, L, C); summed=True: their sum over ranks (1, B, L, C)."""
        Rx, B, L, C = x.size()  # (Rx, B, L, C): each rank's LayerNormed state, Rx in {1, R}
        hr, hs = self.heads_per_rank, self.head_size
        dropout_p = self.dropout if self.training else 0.0
        if summed:  # x shared by the ranks (Rx == 1): the dense attention, every rank's heads at once
            qkv = self.c_attn.forward_concat(x.view(B * L, C))  # (N, 3C): q | k | v, heads rank-major (nh = T*hr)
            q, k, v = (t.view(B, L, -1, hs).transpose(1, 2) for t in qkv.split(C, dim=1))  # (B, nh, L, hs)
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)  # (B, nh, L, hs)
            y = y.transpose(1, 2).reshape(B * L, C)  # (N, T*C/T): every rank's heads side by side
            return self.resid_dropout(self.c_proj.forward_summed(y)).view(1, B, L, C)  # one GEMM sums the ranks
        qkv = self.c_attn(x.view(Rx, B * L, C))  # (R, N, 3*hr*hs), per rank [q_r; k_r; v_r]
        R = qkv.size(0)
        q, k, v = qkv.view(R, B, L, 3, hr, hs).unbind(3)  # each (R, B, L, hr, hs)
        # rank and batch merge into one batch axis: every rank attends with its own heads only
        q, k, v = (t.transpose(2, 3).reshape(R * B, hr, L, hs) for t in (q, k, v))  # (R*B, hr, L, hs)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)  # (R*B, hr, L, hs)
        y = y.view(R, B, hr, L, hs).transpose(2, 3).reshape(R, B * L, hr * hs)  # (R, N, C/T)
        return self.resid_dropout(self.c_proj(y)).view(R, B, L, C)  # partials (R, B, L, C)


class MLP(nn.Module):

    def __init__(self, config, ranks, layers):
        super().__init__()
        C, T = config.n_embd, config.tp_size
        column, row = layers
        self.c_fc = column(C, 4 * C, T, ranks, config.bias)
        self.gelu = nn.GELU()
        self.c_proj = row(4 * C, C, T, ranks, config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, summed=False):
        """Per-rank partial outputs (R, B, L, C); summed=True (x shared by the ranks): their sum
        over ranks (1, B, L, C), which is the dense MLP with the ranks' units side by side."""
        Rx, B, L, C = x.size()
        if summed:
            h = self.gelu(self.c_fc.forward_concat(x.view(B * L, C)))  # (N, 4C): every rank's units, rank-major
            return self.dropout(self.c_proj.forward_summed(h)).view(1, B, L, C)
        h = self.gelu(self.c_fc(x.view(Rx, B * L, C)))  # (R, N, 4C/T): this rank's hidden units
        return self.dropout(self.c_proj(h)).view(-1, B, L, C)  # (R, B, L, C) partials


def _land(b, flight, comm):
    """Every ladder sync still in flight lands in b, oldest first (before a non-ladder sublayer reads)."""
    for message, point, hidden in flight:
        b = comm.land(b, message, point, hidden)
    return b


def _kind(block_types, index, tp_size):
    """With one rank every block but ladder is the dense block: sync after each sublayer (a sync over
    one rank is the identity) keeps the dense summation order. Ladder is an architecture at any size."""
    kind = block_types[index]
    return kind if tp_size > 1 or kind == "ladder" else "tp"


class Block(nn.Module):

    def __init__(self, config, index, ranks, layers):
        super().__init__()
        self.kind = _kind(config.block_types, index, config.tp_size)
        self.index, self.dropout = index, config.dropout
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config, ranks, layers)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = (MoEMLP if config.n_experts else MLP)(config, ranks, layers)  # MoE: moe.py

    def forward(self, b, d, flight, comm):
        # b: (Rb, B, L, C) last synchronised state; d: (R, B, L, C) pending partials or None;
        # flight: ladder syncs sent but not yet landed in b, oldest first, each (message, point, hidden)
        if self.kind == "ladder":
            if d is not None:  # partials a parallel block left pending are synced before a ladder block reads
                b, d = comm.sync(b, d, f"h{self.index}.in"), None
            b, flight = self.ladder(self.attn, self.ln_1, b, flight, comm, "attn")
            b, flight = self.ladder(self.mlp, self.ln_2, b, flight, comm, "mlp")
            return b, d, flight
        b = _land(b, flight, comm)  # before a non-ladder sublayer reads, every in-flight sync lands
        b, d = self.sublayer(self.attn, self.ln_1, b, d, comm, "attn", sync=self.kind == "tp")
        # the MLP sees this rank's own state: after an unsynchronised attention that is b_r + d_r
        b, d = self.sublayer(self.mlp, self.ln_2, b, d, comm, "mlp", sync=self.kind in ("tp", "spd"))
        return b, d, ()

    def ladder(self, layer, norm, b, flight, comm, name):
        """Ladder Residual: the output of the sublayer two back lands in b; this sublayer reads b without
        the output of the one just before (its sync is in flight, behind this sublayer's compute); then
        this sublayer's sync is sent, to land one sublayer later. On a lossless `sim` network from a state
        every rank shares, the partials come summed from one GEMM (as in `sublayer`)."""
        point = f"h{self.index}.{name}"
        if len(flight) == 2:
            b, flight = comm.land(b, *flight[0]), flight[1:]
        flight = tuple((message, p, True) for message, p, _ in flight)  # in flight while this sublayer runs
        summed = b.shape[0] == 1 and comm.sums_in_gemm and not (self.training and self.dropout > 0)
        out = layer(norm(b), summed=summed)  # (R, B, L, C) partials, or (1, B, L, C) summed
        return b, flight + ((comm.send(out, point, later=True), point, False),)

    def sublayer(self, layer, norm, b, d, comm, name, sync):
        """d += layer(norm(b + d)); then, if this block syncs here, b <- comm.sync(b, d) and d <- 0.
        When the sync follows at once from a state every rank shares (d is None) on a lossless
        `sim` network, the layer returns its partials already summed over ranks by one GEMM
        (comm.sums_in_gemm), and that sum is what the sync adds: the same sync, counted alike. Not
        with dropout in training, which drops elements of each rank's partial, not of the sum."""
        point = f"h{self.index}.{name}"
        summed = sync and d is None and comm.sums_in_gemm and not (self.training and self.dropout > 0)
        x = comm.normed(norm, b) if d is None else norm(b + d)  # (Rx, B, L, C): normed, SP may keep it as a shard
        out = layer(x, summed=summed)  # (R, B, L, C) partials, or (1, B, L, C) summed
        d = out if d is None else d + out
        return (comm.sync(b, d, point), None) if sync else (b, d)


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304  # GPT-2's 50257 padded up to a multiple of 64 for efficiency
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True  # biases in Linears and LayerNorms, like GPT-2
    tp_size: int = 1
    block_types: tuple = ("tp",)  # n_layer names; a str or a shorter unit is parsed and tiled
    n_experts: int = 0  # > 0: every block's MLP is a mixture of n_experts experts (moe.py)
    experts_top_k: int = 2  # the experts each token is routed to

    def __post_init__(self):
        for key in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd", "tp_size"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key}={getattr(self, key)} must be a positive integer")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if self.n_head % self.tp_size:
            raise ValueError(f"n_head={self.n_head} is not divisible by tp_size={self.tp_size}: "
                             f"each TP rank owns n_head/tp_size whole heads")
        if self.n_experts < 0 or (self.n_experts and not 1 <= self.experts_top_k <= self.n_experts):
            raise ValueError(f"n_experts={self.n_experts}, experts_top_k={self.experts_top_k}: need n_experts >= 0 "
                             f"(0: dense MLPs) and 1 <= experts_top_k <= n_experts")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout={self.dropout} must be in [0, 1)")
        self.block_types = parse_block_types(self.block_types, self.n_layer)


MODEL_KEYS = ("n_layer", "n_head", "n_embd", "block_size", "bias", "dropout", "tp_size", "block_types", "n_experts",
              "experts_top_k")


def model_args_from(config, vocab_size):
    """GPTConfig arguments from a train.py config dict (vocab_size comes from the data), its shape final (init_from's
    weights set it): only now can a partial sync be checked to send at least one channel."""
    fraction, width = config.get("sync_fraction", 1.0), config["n_embd"]
    if isinstance(width, int) and width >= 1 and round(fraction * width) < 1:
        raise ValueError(f"sync_fraction={fraction!r} sends no channel of n_embd={width} (round(sync_fraction * n_embd) "
                         f"must be at least 1)")
    return dict({key: config[key] for key in MODEL_KEYS}, vocab_size=vocab_size)


class GPT(nn.Module):
    """comm: the execution mode that performs every sync (comms.SimComm by default);
    layers: the (column, row) parallel linear classes (megatron_shim.py offers megatron-core's)."""

    def __init__(self, config, comm=None, layers=(ColumnParallelLinear, RowParallelLinear)):
        super().__init__()
        self.config = config
        self.comm = comm if comm is not None else SimComm(config.tp_size)
        if self.comm.tp_size != config.tp_size:
            raise ValueError(f"the comm's tp_size={self.comm.tp_size} differs from the model's tp_size={config.tp_size}")
        ranks = self.comm.ranks  # the TP ranks whose shards this process holds
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            h=nn.ModuleList([Block(config, i, ranks, layers) for i in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.replicated_rng = None  # the embedding dropout's generator, seeded alike on every TP rank (train.py)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as GPT-2
        self.set_block_types(config.block_types)  # its counts; refused with sequence parallelism if it has ladder
        self.activation_checkpointing = False  # True: recompute each block in the backward (train.py's key)
        self.moe_aux_loss_coef = 0.01  # the weight of each block's load-balancing loss in training (train.py's key)
        self.head_float32 = False  # True: the LM head in float32 under autocast (label_eval.py's label choice)
        self.whole_num_params = None  # set by keep_stage on a pipeline stage
        points = [f"h{i}.{name}" for i in range(config.n_layer) for name in ("in", "attn", "mlp")] + ["exit"]
        self.comm.counter.lay_out(points, self.lm_head.weight.device)  # every possible sync point
        self.init_weights()

    def _apply(self, fn, *args, **kwargs):  # model.to(device) moves the sync counter's compiled tally too
        super()._apply(fn, *args, **kwargs)
        self.comm.counter.move_to(next(self.parameters()).device)
        return self

    def set_block_types(self, block_types):
        """Give the blocks another pattern. Every pattern of one tp_size has the same weights (and
        layout), so this converts a model, or switches a schedule's pattern. True if it changed."""
        kinds = parse_block_types(block_types, self.config.n_layer)
        if self.comm.sequence_parallel and "ladder" in kinds:  # DESIGN section 10 (configurator.py says why)
            raise ValueError("sequence_parallel=True cannot run ladder blocks: their all-gather could not be hidden")
        changed, self.config.block_types = kinds != self.config.block_types, kinds
        for block in self.transformer.h:
            if not isinstance(block, Block):
                continue  # another pipeline stage's (keep_stage)
            block.kind = _kind(kinds, block.index, self.config.tp_size)
        self.sync_points = count_sync_points(kinds, self.config.tp_size)
        self.exposed_syncs = len(exposed_sync_points(kinds, self.config.tp_size))
        return changed

    def keep_stage(self, first, end, embedding, head):
        """Keep what one pipeline stage runs (pipeline.py): blocks first..end-1, the embeddings if
        `embedding`, ln_f and the LM head if `head`. The others become placeholders without weights,
        so every kept weight has its name in the whole model's state dict. Call after init_weights:
        a stage holds exactly the weights the whole model starts from."""
        self.whole_num_params = {flag: self.get_num_params(flag) for flag in (True, False)}
        for i in range(self.config.n_layer):
            if not first <= i < end:
                self.transformer.h[i] = nn.Identity()
        if not embedding:  # the LM head keeps the tied weight as its own (its gradient: pipeline.py)
            del self.transformer["wte"], self.transformer["wpe"]
        if not head:
            del self.transformer["ln_f"]
            self.lm_head = None

    @torch.no_grad()
    def init_weights(self):
        """GPT-2 init: each weight drawn at its full dense shape, in the same order for every tp_size,
        then sharded, so with the same seed a TP model holds exactly the dense model's weights."""
        std = 0.02
        proj_std = 0.02 / math.sqrt(2 * self.config.n_layer)  # GPT-2's scaled residual projections
        for name, module in self.named_modules():
            if isinstance(module, nn.Embedding):
                module.weight.normal_(0.0, std)
            elif isinstance(module, (ColumnParallelLinear, RowParallelLinear)):
                full = torch.empty(module.out_features, module.in_features, device=module.weight.device)
                full.normal_(0.0, proj_std if name.endswith("c_proj") else std)
                module.weight.copy_(module.shard(full))
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.Linear) and name.endswith("router"):  # replicated, drawn whole
                module.weight.normal_(0.0, std)
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                if module.bias is not None:
                    module.bias.zero_()

    def _sharded_modules(self):
        return {name: m for name, m in self.named_modules()
                if isinstance(m, (ColumnParallelLinear, RowParallelLinear))}

    @torch.no_grad()
    def dense_state_dict(self):
        """The weights in the dense (tp_size=1) layout, shards put back together (`sim` mode: every rank)."""
        assert self.comm.local_ranks == self.config.tp_size, "dense_state_dict needs all TP ranks in this process"
        sharded = self._sharded_modules()
        out = {}
        for name, tensor in self.state_dict().items():
            module = name.rpartition(".")[0]
            if module in sharded and tensor.dim() >= 2:  # not the replicated row-parallel bias
                tensor = sharded[module].unshard(tensor).unsqueeze(0)  # (1, out, in) / (1, out)
            out[name] = tensor.clone()
        return out

    @torch.no_grad()
    def load_dense_state_dict(self, state_dict):
        """Load dense-layout weights (a tp_size=1 model's state dict), cutting this process's shards."""
        sharded = self._sharded_modules()
        converted, own = {}, self.state_dict()
        for name, tensor in state_dict.items():
            if self.whole_num_params and name not in own:
                continue  # a pipeline stage takes its own part of the whole model's weights
            module = name.rpartition(".")[0]
            if module in sharded and tensor.dim() >= 2:  # (1, out, in) weights, (1, out) column biases
                tensor = sharded[module].shard(tensor[0])
            converted[name] = tensor
        self.load_state_dict(converted)

    def get_num_params(self, non_embedding=True):
        """Parameters of the whole model, each weight once (a shard is not a copy); the position
        embeddings are subtracted by default, as GPT-2 counts (the token embeddings are the LM head)."""
        if self.whole_num_params:  # a pipeline stage (keep_stage): still the whole model's count
            return self.whole_num_params[non_embedding]
        shares = self.config.tp_size // self.comm.local_ranks  # this process holds local_ranks of tp_size shards
        n_params = sum(p.numel() * (shares if getattr(p, "tp_sharded", False) else 1) for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def forward(self, idx, targets=None):
        with self.comm.saving_shards():  # sequence parallelism in `dist`: a saved gathered state kept as its shard
            b = self.embed(idx)
            self.comm.keep_shard(b)  # the state every rank starts from, as a sync's gathered one
            b, d = self.run_blocks(b, None, self.transformer.h)
            return self.head(b, d, targets)

    # A pipeline stage (pipeline.py) runs the same three pieces: the first stage embeds, every
    # stage runs its own blocks, the last stage applies the head.
    def embed(self, idx):
        """Token and position embeddings, the state every rank starts from: (1, B, L, C), d = 0."""
        B, L = idx.size()
        assert L <= self.config.block_size, f"sequence of length {L}, block_size is {self.config.block_size}"
        pos = torch.arange(0, L, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)  # (B, L, C)
        if self.training and self.config.dropout > 0:  # one mask for every TP rank: a per-process draw would start
            keep = 1 - self.config.dropout              # each rank of a `dist` run from a different state
            x = x * torch.empty_like(x).bernoulli_(keep, generator=self.replicated_rng) / keep
        return x.unsqueeze(0)

    def run_blocks(self, b, d, blocks):
        """The residual state (b, d) through blocks, in order; d None means no pending partials.
        Ladder syncs still in flight after the last block land at its end (the model exit)."""
        flight = ()
        for block in blocks:
            if self.activation_checkpointing and torch.is_grad_enabled():
                # keep only the block's inputs; its activations are recomputed in the backward pass
                b, d, flight = checkpoint(block, b, d, flight, self.comm, use_reentrant=False,
                                          context_fn=self.comm.checkpoint_contexts)
            else:
                b, d, flight = block(b, d, flight, self.comm)
        return _land(b, flight, self.comm), d

    def logits(self, b, d, last_only=False):
        """The exit sync (partials left by trailing parallel blocks), ln_f and the LM head: (Rb, B, L, vocab),
        Rb == 1 when all ranks agree; last_only: the last position only (inference)."""
        if d is not None:
            b = self.comm.sync(b, d, "exit")
        x = self.comm.normed(self.transformer.ln_f, b)  # (Rb, B, L, C)
        x = x[:, :, [-1], :] if last_only else x
        if self.head_float32:  # bf16 logits keep 8 bits: close label words would tie, and argmax takes the first
            with torch.autocast(x.device.type, enabled=False):
                return F.linear(x.float(), self.lm_head.weight.float())
        return self.lm_head(x)

    def loss(self, logits, targets):
        """Each rank's mean cross-entropy, averaged over ranks (equal token counts); `dist`: over the
        other processes' ranks too. logits (Rb, B, L, vocab), targets (B, L)."""
        Rb, B, L, _ = logits.size()
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.expand(Rb, B, L).reshape(-1),
                               ignore_index=-1)
        if self.training and self.config.n_experts:  # each rank's own load-balancing terms, in its own loss:
            loss = loss + self.moe_aux_loss_coef * torch.stack(self._moe_aux_losses()).sum()  # every block's (Megatron)
        return self.comm.loss_mean(loss)

    def _moe_aux_losses(self):
        return [block.mlp.aux_loss for block in self.transformer.h if isinstance(getattr(block, "mlp", None), MoEMLP)]

    def moe_aux_loss(self):
        """The experts' load-balancing loss of the last forward, as logged: the mean over blocks (1 when
        every block is balanced, moe.py); the training loss adds each block's. None without experts."""
        losses = self._moe_aux_losses()
        return torch.stack(losses).mean() if losses and losses[0] is not None else None

    def head(self, b, d, targets=None):
        if targets is None:
            return self.logits(b, d, last_only=True)[0], None
        logits = self.logits(b, d)
        return logits[0], self.loss(logits, targets)  # the first rank's logits (B, L, vocab); `sim`: TP rank 0's

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type, zero=False, dp_group=None,
                             optimizer="adamw"):
        """AdamW; zero=True: ZeRO-1, each rank of the data-parallel group dp_group (None: the default
        group) keeps the state of its share of the parameters, steps them and broadcasts them.
        optimizer='muon': Muon for the blocks' weight matrices, AdamW for the rest (optim.py)."""
        # decay the matmul weights and embeddings, not biases or LayerNorm gains; the
        # per-rank column biases are 2-D (R, out/T), so this goes by name, not only by dim
        params = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay = [p for pn, p in params.items() if p.dim() >= 2 and not pn.endswith("bias")]
        no_decay = [p for pn, p in params.items() if not (p.dim() >= 2 and not pn.endswith("bias"))]
        groups = [{"params": decay, "weight_decay": weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        fused = device_type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters
        settings = dict(lr=learning_rate, betas=betas, **({"fused": True} if fused else {}))
        if optimizer == "muon":
            assert not zero, "optimizer='muon' with ZeRO-1 is not built (configurator.py says so to the user)"
            matrices = {id(p) for p in muon_params(self)}
            groups = [{"params": [p for p in decay if id(p) in matrices], "weight_decay": weight_decay, "muon": True},
                      {"params": [p for p in decay if id(p) not in matrices], "weight_decay": weight_decay},
                      groups[1]]
            return MuonAdamW(groups, self.comm, self, **settings)
        if zero:
            from torch.distributed.optim import ZeroRedundancyOptimizer  # here: its import costs every process 0.6 s
            return ZeroRedundancyOptimizer(groups, torch.optim.AdamW, process_group=dp_group, **settings)
        return torch.optim.AdamW(groups, **settings)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, vocab=None):
        """Sample continuations of idx (B, L) from TP rank 0's logits; vocab: only ids below it (the tokenizer's
        own ids, where the model's vocabulary is padded: GPT-2's 50257 of 50304)."""
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :vocab] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx
