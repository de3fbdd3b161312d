"""
The training step, chosen once, as the mode is: `PlainStep` (the micro-batches one after the other,
DDP across data-parallel ranks) or pipeline.py's `Pipeline` (the micro-batches through the stages by
torch's schedule). Both take one optimizer step's micro-batches to clipped gradients, with the same
interface, so the loop in train.py has one path:

    loss, grad_norm, measured = train_step(batch, optimizer, max_norm, check)  # forward, backward, reduce, clip
    logits, loss = train_step.evaluate(X, Y)                    # (None, None) where no logits are
    train_step.reports                                          # whether this process's eval counts

this process's place in the process grid (`Grid`, from `process_grid`), and its numerics (`set_numerics`).
"""

import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist


def set_numerics(deterministic, tf32=True):
    """TF32 for float32 matmuls on CUDA (or not: `tf32`); and with `deterministic`, kernels that give the same bits on every
    rerun on the same machine and software (a CUDA op that has none raises, naming itself), so two runs'
    difference is their settings alone, as it is on a CPU. cuBLAS reads its workspace setting when it first
    starts, which is after this (no matmul has run yet)."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = bool(tf32)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # a fixed split of cuBLAS reductions
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False


def clip_grad_norm_(params, max_norm, norm):
    """Scale every gradient by min(1, max_norm / norm): the clipping of every mode and step."""
    torch.nn.utils.clip_grads_with_norm_([p for p in params if p.grad is not None], max_norm, norm)
    return norm


@dataclass
class Grid:
    """This process's place in the grid world = dp x pp x tp (a single process: the defaults).
    Ranks: rank = (dp_rank * pp_size + pp_rank) * tp_procs + tp_rank. Groups are None where they would
    hold this process alone (or, for dp_group with tp_procs == pp_size == 1, the default group)."""
    rank: int = 0
    world: int = 1
    tp_rank: int = 0
    dp_rank: int = 0
    dp_world: int = 1
    pp_rank: int = 0
    tp_group: object = None
    dp_group: object = None
    pp_group: object = None  # the stages of this process's pipeline
    tied_group: object = None  # its first and last stage, which hold the tied embedding / LM head


def process_grid(tp_procs, timeout=None, pp_size=1, tp_rule=None):
    """The Grid of this process: TP groups of consecutive ranks, then pipeline stages, then data
    parallel across them. Every rank creates every group, as torch.distributed requires, each with
    `timeout` (a timedelta) for its collectives. ValueError for a world the grid does not fit
    (tp_rule: what the message says of the TP group, naming the config keys)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    if world % tp_procs:
        raise ValueError(f"{world} processes are not divisible by "
                         f"{tp_rule or f'the {tp_procs} processes of a TP group: the grid needs whole TP groups'}")
    if world % (tp_procs * pp_size):
        raise ValueError(f"{world} processes are not divisible by pp_size={pp_size} x {tp_procs} TP process"
                         f"{'es' if tp_procs > 1 else ''}: the grid is dp x pp x tp")
    grid = Grid(rank, world, rank % tp_procs, rank // (tp_procs * pp_size), world // (tp_procs * pp_size),
                rank // tp_procs % pp_size)
    if tp_procs == pp_size == 1:
        return grid  # every process a data-parallel rank of the default group

    def grid_rank(dp, pp, tp):
        return (dp * pp_size + pp) * tp_procs + tp

    def own(groups):  # create every group (all ranks must), keep the one holding this rank
        mine = None
        for ranks in groups:
            group = dist.new_group(ranks, timeout=timeout)
            mine = group if rank in ranks else mine
        return mine

    dp_world = grid.dp_world
    cells = [(dp, pp) for dp in range(dp_world) for pp in range(pp_size)]
    if tp_procs > 1:
        grid.tp_group = own([[grid_rank(dp, pp, tp) for tp in range(tp_procs)] for dp, pp in cells])
    grid.dp_group = own([[grid_rank(dp, pp, tp) for dp in range(dp_world)] for pp in range(pp_size)
                         for tp in range(tp_procs)])
    if pp_size > 1:
        lines = [(dp, tp) for dp in range(dp_world) for tp in range(tp_procs)]
        grid.pp_group = own([[grid_rank(dp, pp, tp) for pp in range(pp_size)] for dp, tp in lines])
        grid.tied_group = own([[grid_rank(dp, 0, tp), grid_rank(dp, pp_size - 1, tp)] for dp, tp in lines])
    return grid


def leave_process_group(wandb=None):
    """The end of a distributed run: every process leaves together (a rank that exits while rank 0
    still writes files can abort gloo), then exits without finalizing the interpreter. gloo's worker
    threads can still hold tensors (of DDP's reducer, which the step keeps alive, or of ZeRO's
    broadcasts) while Python tears down, and that aborts a finished run with SIGABRT
    (pytorch/pytorch#179291; seen here about once in 25 dp=2 runs on a loaded host). Every file is
    written by then; wandb is finished first, and the output flushed."""
    dist.barrier()
    if wandb is not None:
        wandb.finish()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def agree_on_overflow(scaler, optimizer, norm):
    """float16: the GradScaler looked for infs in this process's gradients only, so a TP rank (or stage)
    whose shard overflowed would skip a step its peers take, and its loss scale would part from theirs
    (and Muon's all-gather would wait for the rank that skipped). The whole model's norm is the same
    on every rank, and non-finite when any rank's gradients are: every rank skips by it (no host sync)."""
    found = scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"]  # torch's record of unscale_
    overflow = (~torch.isfinite(norm)).float()
    for flag in found.values():
        flag.copy_(torch.maximum(flag, overflow.to(flag.device)))


class Step:
    """What both steps share: the replicated-gradient reduce, clipping, and the sync-count check."""
    size, is_first, is_last, stage_seed = 1, True, True, ()  # one stage: the whole model

    def __init__(self, model, grid, micro_batches, scaler):
        self.model, self.comm, self.grid = model, model.comm, grid  # model: the GPT itself (not wrapped)
        self.module = model  # what runs it: PlainStep's may be compiled and wrapped in DDP
        self.micro_batches, self.scaler = micro_batches, scaler
        self.reports = grid.tp_rank == 0  # eval totals: once per TP group, by the rank `sim` reports

    def __call__(self, batch, optimizer, max_norm, check_syncs):
        """One step's micro-batches (batch(k) -> (X, Y)) to clipped gradients. Returns the last
        micro-batch's loss / micro_batches (a tensor), the whole model's gradient norm (a float:
        a host sync once per step, so that a NaN/Inf step is never applied; the same on every rank)
        and what the syncs did, measured (over every stage): forward syncs and exposed syncs per
        pass, and the payload bytes per token. check_syncs: the syncs and exposed syncs must be the
        model's analytic counts, and the backward mirror exchanges as many as the syncs."""
        counter = self.comm.counter
        counter.reset()
        loss, tokens = self.forward_backward(batch)
        self.comm.deliver_traced(self.micro_batches)  # a compiled reliable link's packets (comms.py)
        params = list(self.model.parameters())
        self.comm.reduce_replicated_grads(params)  # `dist`: sum the replicated grads over the TP group
        self.reduce_grads(params)
        self.scaler.unscale_(optimizer)
        norm = clip_grad_norm_(params, max_norm, self.grad_norm(params))  # the whole model's norm
        if self.scaler.is_enabled():
            agree_on_overflow(self.scaler, optimizer, norm)
        forward, backward, hidden, hidden_bwd, nbytes, moved = self.counted(counter.totals())
        syncs, exposed = forward / self.micro_batches, (forward - hidden) / self.micro_batches
        if check_syncs and (syncs, exposed, backward) != (self.model.sync_points, self.model.exposed_syncs, forward):
            raise RuntimeError(f"sync count mismatch: the model claims {self.model.sync_points} per pass "
                               f"({self.model.exposed_syncs} exposed), measured {syncs} forward ({exposed} exposed) "
                               f"and {backward / self.micro_batches} backward")
        aux = self.model.moe_aux_loss()  # the experts' load-balancing loss (moe.py), logged beside the loss:
        aux = aux if aux is None else self.comm.loss_mean(aux.detach())  # the mean over the TP ranks, as `sim`'s
        # what `dist`'s collectives were handed (eager syncs only: a traced one runs no Python to count)
        moved = {"sync_bytes_moved_per_token": moved / tokens} if self.comm.moves_bytes and not self.comm.traced else {}
        hidden = dict(hidden_syncs_fwd=hidden / self.micro_batches, hidden_syncs_bwd=hidden_bwd / self.micro_batches)
        return loss, float(norm), dict(syncs_measured=syncs, exposed_measured=exposed, **hidden, sync_bytes_per_token=nbytes / tokens,
                                       **moved, **({} if aux is None else {"moe_aux_loss": aux.item()}))

    @torch.no_grad()
    def estimate(self, get_batch, eval_iters, lossy=False):
        """Loss and next-token accuracy on eval_iters fixed batches per split (get_batch(split, None, k)),
        shared over the data-parallel ranks. The network is lossless unless lossy; then the link's own
        eval streams give every eval the same masks."""
        self.module.eval()
        out, device = {}, next(self.model.parameters()).device
        with self.comm.evaluating(lossy=lossy):
            for split in ("train", "val"):
                totals = torch.zeros(3, device=device)  # loss sum, correct tokens, tokens
                for k in range(self.grid.dp_rank, eval_iters, self.grid.dp_world):
                    X, Y = get_batch(split, None, k)
                    logits, loss = self.evaluate(X, Y)
                    if logits is not None:  # (a pipeline's last stage only)
                        totals += torch.stack([loss.float(), (logits.argmax(-1) == Y).sum().float(),
                                               torch.tensor(float(Y.numel()), device=device)])
                if dist.is_initialized():  # counted once per TP group: by its rank 0, whose logits `sim` reports
                    totals *= self.reports
                    dist.all_reduce(totals)
                out[f"{split}_loss"] = totals[0].item() / eval_iters
                out[f"{split}_accuracy"] = totals[1].item() / totals[2].item()
        self.module.train()
        return out

    def merge(self, model_state, optim_state, optimizer):
        return model_state, optim_state  # checkpoint.py: a stage's part of the whole model is the whole

    def split(self, model_state, optim_state, optimizer):
        return model_state, optim_state


class PlainStep(Step):
    """The micro-batches one after the other through `module` (the model, compiled and wrapped in DDP
    where asked), the gradients summed as one big batch; DDP all-reduces them at the last one only."""

    def __init__(self, module, model, grid, micro_batches, scaler, autocast):
        super().__init__(model, grid, micro_batches, scaler)
        self.module, self.autocast = module, autocast

    def forward_backward(self, batch):
        for micro_step in range(self.micro_batches):
            X, Y = batch(micro_step)  # (B, L)
            if self.grid.dp_world > 1:  # all-reduce the gradients only at the last micro step
                self.module.require_backward_grad_sync = micro_step == self.micro_batches - 1
            with self.autocast:
                logits, loss = self.module(X, Y)
                loss = loss / self.micro_batches  # scale the loss to sum gradients as one big batch
            self.scaler.scale(loss).backward()
        return loss.detach(), X.numel() * self.micro_batches

    def reduce_grads(self, params):
        pass  # DDP averaged them over the data-parallel group during the backward pass

    def grad_norm(self, params):
        return self.comm.grad_norm(params)

    def counted(self, counts):
        return counts

    def evaluate(self, X, Y):
        with self.autocast:
            return self.module(X, Y)
