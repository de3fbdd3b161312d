"""
Pipeline parallelism (pp_size > 1): the blocks are cut into pp_size stages of contiguous blocks,
each run by its own process (its own TP group in `dist` mode), driven by
torch.distributed.pipelining's schedules (GPipe or 1F1B) over gradient_accumulation_steps
micro-batches. The embedding is on the first stage, ln_f and the LM head on the last.

What crosses a stage boundary is the whole residual state: b and, after a `parallel` block, the
pending partials d (docs/blocks.md, "What a block does"). So a cut anywhere, even inside a run of
`parallel` blocks, changes nothing: every stage runs exactly the unpipelined model's blocks, with
the same syncs in the same places, and the function, the sync count and the packet masks are
those of pp_size=1 (tests/test_pipeline.py). Three things span stages and are done here:
  - the tied embedding / LM head weight lives on the first and the last stage; its two gradients
    are summed between them every step (as Megatron does), so both copies stay equal;
  - the gradient norm for clipping is the whole model's, summed over the stages;
  - checkpoints hold the whole model, in the layout of pp_size=1: stages gather into it and cut
    their part out of it, so a run resumes under any pp_size.
A lossy link draws each stream in the unpipelined order (links.Planned).
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from masks import Planned
from model import GPT, sync_point_names
from step import Step

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
TIED = ("transformer.wte.weight", "lm_head.weight")  # one parameter: the first stage's name, the last's


def stage_bounds(n_layer, pp_size, pp_split=""):
    """[(first, end)] block ranges of the stages. pp_split: the blocks where stages 2.. begin, e.g. '5,9'
    (increasing, inside 1..n_layer-1); '' cuts into equal counts (the first stages one longer if uneven)."""
    if pp_size > n_layer:
        raise ValueError(f"pp_size={pp_size} is more stages than n_layer={n_layer} blocks")
    if pp_split:
        try:
            cuts = [int(c) for c in str(pp_split).split(",")]
        except ValueError:
            raise ValueError(f"pp_split={pp_split!r}: write the first block of each stage after the first, "
                             f"e.g. '5,9'") from None
        if len(cuts) != pp_size - 1 or cuts != sorted(set(cuts)) or not all(0 < c < n_layer for c in cuts):
            raise ValueError(f"pp_split={pp_split!r} must name {pp_size - 1} increasing blocks in 1..{n_layer - 1} "
                             f"(where stages 2..{pp_size} begin)")
    else:
        size, extra = divmod(n_layer, pp_size)
        cuts = [sum(size + (s < extra) for s in range(k)) for k in range(1, pp_size)]
    edges = [0] + cuts + [n_layer]
    return list(zip(edges[:-1], edges[1:]))


def check_config(pp_size, n_layer, pp_split, pp_schedule, micro_batches, **unsupported):
    """ValueError for a pipeline this code cannot run, before any process waits on a stage:
    a bad cut, too few micro-batches for 1F1B, or a setting not built for pipelines (yet)."""
    stage_bounds(n_layer, pp_size, pp_split)
    if pp_schedule == "1f1b" and micro_batches < pp_size:
        raise ValueError(f"pp_schedule='1f1b' needs at least pp_size={pp_size} micro-batches per data-parallel "
                         f"rank, has {micro_batches} (gradient_accumulation_steps / dp); raise "
                         f"gradient_accumulation_steps or use pp_schedule='gpipe'")
    for key, value in unsupported.items():  # say so, never ignore it
        if value:
            raise ValueError(f"pp_size={pp_size} does not support {key}={value!r}; use pp_size=1 for it")


class _Stage(PipelineStage):
    """torch's PipelineStage. Before its first pass it finds the shapes that cross the boundary by
    running the stage's forward and backward once on empty tensors: not a pass of training, so the
    comm counts no sync and draws no packet meanwhile (comms.TPComm.dry_run). (If a torch release
    renames these methods, the startup check of measured vs analytic syncs fails: see train.py.)"""

    def __init__(self, module, pp_rank, pp_size, device, group, comm):
        super().__init__(module, pp_rank, pp_size, device, group=group)
        self.comm = comm

    def _forward_metadata_inference(self, *args, **kwargs):
        with self.comm.dry_run():
            return super()._forward_metadata_inference(*args, **kwargs)

    def _backward_metadata_inference(self, *args, **kwargs):
        with self.comm.dry_run():
            return super()._backward_metadata_inference(*args, **kwargs)


class StageModule(nn.Module):
    """One stage of a GPT: GPT.embed (first stage), its blocks, GPT.logits (last stage); the same
    code as GPT.forward. Between stages the state travels as (b,) or (b, d)."""

    def __init__(self, model, first, end, is_first, is_last, autocast):
        super().__init__()
        self.model, self.first, self.end = model, first, end
        self.is_first, self.is_last, self.autocast = is_first, is_last, autocast

    def forward(self, *inputs):
        model = self.model
        # in train.py's autocast, as PlainStep runs the model; saving_shards as GPT.forward (sequence parallelism)
        with self.autocast, model.comm.saving_shards():
            if self.is_first:
                b, d = model.embed(inputs[0]), None  # inputs: the token ids (B, L)
                model.comm.keep_shard(b)
            else:
                b, d = inputs if len(inputs) == 2 else (inputs[0], None)
            b, d = model.run_blocks(b, d, model.transformer.h[self.first:self.end])
            if self.is_last:
                return model.logits(b, d)  # (Rb, B, L, vocab)
        # sent as whole tensors: a lossy backward link leaves b as a broadcast view (comms.SimComm.cross)
        return (b.contiguous(),) if d is None else (b.contiguous(), d.contiguous())


class Pipeline(Step):
    """This process's stage of the pipeline: the training step through the stages (step.py's interface)."""

    def __init__(self, model, grid, pp_size, pp_split, schedule, micro_batches, device, scaler, autocast):
        super().__init__(model, grid, micro_batches, scaler)
        self.rank, self.size, self.group, self.tied_group = grid.pp_rank, pp_size, grid.pp_group, grid.tied_group
        self.is_first, self.is_last = self.rank == 0, self.rank == pp_size - 1
        self.reports = self.reports and self.is_last  # only the last stage has logits
        self.stage_seed, self.schedule_name, self.device = (self.rank,), schedule, device
        self.bounds = stage_bounds(model.config.n_layer, pp_size, pp_split)
        first, end = self.bounds[self.rank]
        model.keep_stage(first, end, embedding=self.is_first, head=self.is_last)
        points = sync_point_names(model.config.block_types, model.config.tp_size)
        # this stage's sync points: its blocks' ('h7.mlp' is block 7's), and the exit sync on the last stage
        own = [p for p in points if (self.is_last if p == "exit" else first <= int(p[1:].split(".")[0]) < end)]
        model.comm.link.use(Planned(points, own, ("", "/gather") if model.comm.sequence_parallel else ("",)))
        module = StageModule(model, first, end, self.is_first, self.is_last, autocast)

        def train_loss(logits, targets):  # each micro-batch's share, as gradient accumulation scales it
            with autocast:
                return model.loss(logits, targets) / micro_batches

        def eval_loss(logits, targets):
            with autocast:
                return model.loss(logits, targets)

        stage = _Stage(module, self.rank, pp_size, device, self.group, model.comm)
        self.train_schedule = SCHEDULES[schedule](stage, micro_batches, loss_fn=train_loss, scale_grads=False)
        eval_stage = _Stage(module, self.rank, pp_size, device, self.group, model.comm)  # one batch per pass
        self.eval_schedule = ScheduleGPipe(eval_stage, 1, loss_fn=eval_loss, scale_grads=False)

    def describe(self):
        return f"{self.schedule_name} over {self.micro_batches} micro-batches, blocks " + \
            " | ".join(f"{a}-{b - 1}" for a, b in self.bounds)

    def forward_backward(self, batch):
        """Forward and backward of one step's micro-batches through the stages by the schedule; the
        last micro-batch's loss / micro_batches on every stage (a collective over the pipeline)."""
        X, Y = (torch.cat(part) for part in zip(*(batch(k) for k in range(self.micro_batches))))  # (M*B, L)
        self.model.comm.link.begin_round(self.micro_batches)
        losses = []
        if self.is_first:
            self.train_schedule.step(X)
        elif self.is_last:
            self.train_schedule.step(target=Y, losses=losses, return_outputs=False)  # keep no logits
        else:
            self.train_schedule.step()
        last = losses[-1] * self.micro_batches if self.is_last else None
        return torch.tensor(self.from_last_stage(last) / self.micro_batches), X.numel()

    def evaluate(self, X, Y):
        """(logits of TP rank 0, loss) of one batch on the last stage, as GPT.forward; (None, None) elsewhere."""
        self.model.comm.link.begin_round(1)
        losses = []
        if self.is_first:
            self.eval_schedule.eval(X)
        elif self.is_last:
            logits = self.eval_schedule.eval(target=Y, losses=losses)
            return logits[0], losses[0]
        else:
            self.eval_schedule.eval()
        return None, None

    def from_last_stage(self, value):
        """A float the last stage holds (None elsewhere), on every stage: a collective over the pipeline."""
        out = torch.tensor([0.0 if value is None else float(value.detach())], dtype=torch.float64, device=self.device)
        dist.all_reduce(out, group=self.group)
        return out.item()

    def counted(self, counts):
        """Each stage counted its own syncs: their sum over the pipeline (a collective)."""
        out = torch.tensor(counts, dtype=torch.float64, device=self.device)
        dist.all_reduce(out, group=self.group)
        return out.tolist()

    def tied_parameter(self):
        params = dict(self.model.named_parameters())
        return params.get(TIED[0] if self.is_first else TIED[1])

    def reduce_grads(self, params):
        """The first stage's embedding and the last stage's LM head are one weight: both get the sum;
        then the average over the data-parallel group, as DDP does (a stage is not wrapped in DDP:
        the schedule runs its backward passes): one message for all of them."""
        param = self.tied_parameter()
        if (self.is_first or self.is_last) and param.grad is not None:
            dist.all_reduce(param.grad, group=self.tied_group)
        if self.grid.dp_world > 1:
            grads = [p.grad for p in params if p.grad is not None]
            flat = torch.cat([g.reshape(-1) for g in grads]) / self.grid.dp_world
            dist.all_reduce(flat, group=self.grid.dp_group)
            for g, averaged in zip(grads, flat.split([g.numel() for g in grads])):
                g.copy_(averaged.view_as(g))

    def grad_norm(self, params):
        """The whole model's norm: every stage's, the tied weight counted once (by the first stage)."""
        tied = self.tied_parameter() if self.is_last and not self.is_first else None
        return self.comm.grad_norm(params, stages=self.group, skip=tied)

    # --- checkpoints: the whole model in the pp_size=1 layout ---

    def _names(self, optimizer):
        """Parameter names of this stage in the optimizer's order; the tied weight by its first-stage name."""
        names = {id(p): n for n, p in self.model.named_parameters()}
        return [TIED[0] if names[id(p)] == TIED[1] else names[id(p)]
                for group in optimizer.param_groups for p in group["params"]]

    def _whole_model_order(self, optimizer):
        """The names in the order an unpipelined model's optimizer holds them (GPT.configure_optimizers)."""
        with torch.device("meta"):
            whole = GPT(self.model.config)
        meta = whole.configure_optimizers(0.0, 0.0, (0.9, 0.99), "cpu")
        names = {id(p): n for n, p in whole.named_parameters()}
        return [[names[id(p)] for p in group["params"]] for group in meta.param_groups]

    def merge(self, model_state, optim_state, optimizer):
        """Stage states (gathered over TP, ckpt.gather; None on other TP ranks) -> the whole model's on
        the first stage, None on the others: a collective of the pipeline's processes."""
        named = None
        if optim_state is not None:
            names = self._names(optimizer)
            named = {"state": {names[i]: v for i, v in optim_state["state"].items()},
                     "groups": [{k: v for k, v in g.items() if k != "params"} for g in optim_state["param_groups"]]}
        parts = [None] * self.size if self.is_first else None
        dist.gather_object((model_state, named), parts, group=self.group, group_dst=0)
        if not self.is_first or model_state is None:
            return None, None
        merged_model, merged_state = {}, {}
        for stage_model, stage_named in parts:
            merged_model.update(stage_model)
            for name, state in stage_named["state"].items():
                merged_state.setdefault(name, state)  # the tied weight's: the first stage's (the same)
        merged_model[TIED[1]] = merged_model[TIED[0]]  # tied: one tensor under both names, as GPT saves it
        order = self._whole_model_order(optimizer)
        flat = [name for group in order for name in group]
        groups, start = [], 0
        for names, settings in zip(order, parts[0][1]["groups"]):
            groups.append({**settings, "params": list(range(start, start + len(names)))})
            start += len(names)
        state = {i: merged_state[name] for i, name in enumerate(flat) if name in merged_state}
        return merged_model, {"state": state, "param_groups": groups}

    def split(self, model_state, optim_state, optimizer):
        """The whole model's states (a checkpoint's) -> this stage's part."""
        own = self.model.state_dict()
        model_state = {k: v for k, v in model_state.items() if k in own}
        if optim_state is not None:
            order = [name for group in self._whole_model_order(optimizer) for name in group]
            by_name = {order[i]: v for i, v in optim_state["state"].items()}
            names = self._names(optimizer)
            sizes = [len(group["params"]) for group in optimizer.param_groups]  # not state_dict(): ZeRO's needs
            starts = [sum(sizes[:k]) for k in range(len(sizes))]  # a consolidation first, a collective
            groups = [{**settings, "params": list(range(start, start + size))} for settings, start, size in
                      zip(optim_state["param_groups"], starts, sizes)]
            optim_state = {"state": {i: by_name[n] for i, n in enumerate(names) if n in by_name}, "param_groups": groups}
        return model_state, optim_state
