"""
Train GPT-2 with tensor-parallel blocks (tp, spd, parallel, ladder): the embedded CPU default, a config with
overrides and data parallel over 8 GPUs (each process simulating the TP ranks), real TP (a process per TP rank):
$ python train.py
$ torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_12comm.py --max_iters=20000
$ torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_12comm.py --tp_mode=dist
Every run prints its layout at startup and logs to out_dir/metrics.jsonl (see docs/runs.md).
"""

import datetime
import json
import math
import os
import sys
import time
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import checkpoint as ckpt
import comms
import configurator
import faults
import label_eval
import megatron_shim
import provenance
from data.common import DROPOUT as _DROPOUT, REPLICATED_DROPOUT as _REPLICATED  # _: not config keys
from data.common import Batches, PrepareError, read_prepared, step_seed
from links import LossyLink, link_from
from mfu import estimate_mfu, peak_flops_per_device
from model import GPT, ColumnParallelLinear, GPTConfig, RowParallelLinear, model_args_from
from patterns import describe_pattern, describe_schedule, parse_block_schedule, pattern_at
from step import Grid, PlainStep, leave_process_group, process_grid, set_numerics

# -----------------------------------------------------------------------------
# default config values: a small CPU run, char-level Shakespeare, 12 spd blocks on TP=2
# I/O
out_dir = "out-shakespeare-char"
eval_interval = 100
log_interval = 10
eval_iters = 20  # batches per split per eval; the same batches at every eval
eval_only = False  # evaluate once at startup and exit
always_save_checkpoint = False  # if False, save only when val loss improves
init_from = "scratch"  # 'scratch', 'resume' (out_dir/ckpt.pt), or a new run from: a ckpt.pt or run dir, 'gpt2'...
init_optimizer = False  # init_from a checkpoint: also take its AdamW state (same tp_size)
# wandb logging (WANDB_MODE=offline works with no network)
wandb_log = False
wandb_project = "tp-sync-points"
wandb_run_name = ""  # '' -> <dataset>-<sync points>comm
# data
dataset = "shakespeare_char"
data_dir = ""  # '' -> data/<dataset> next to this file
gradient_accumulation_steps = 1  # summed over data-parallel ranks, divided among them
batch_size = 32
block_size = 128
# model
n_layer = 12
n_head = 4
n_embd = 64
dropout = 0.0
bias = True
n_experts = 0  # > 0: every MLP a mixture of experts, each sharded over the TP ranks like the dense MLP (moe.py)
experts_top_k = 2  # the experts each token is routed to
moe_aux_loss_coef = 0.01  # each block's load-balancing loss's weight in the training loss (summed: Megatron's)
# tensor parallelism
tp_size = 2
tp_mode = "sim"  # 'sim': one process holds every TP rank; 'dist': one process per TP rank (torchrun)
block_types = "spd"  # comma-separated tp/spd/parallel/ladder, a unit tiled to n_layer, e.g. 'parallel*5,spd'
sync_fraction = 1.0  # the share of d's channels a sync sends, in (0, 1]; the rest stay with their rank
sync_dtype = ""  # what a sync sends: '' (the communication dtype), 'bfloat16', 'float8_e4m3fn', 'int8'
sequence_parallel = False  # Megatron-SP: a sync is a reduce-scatter + all-gather, b split along the sequence
block_schedule = ""  # e.g. '0:tp;300:spd': the pattern in force from each iteration on ('' -> block_types)
# pipeline parallelism (torchrun: world = dp x pp x tp processes, tp_procs = tp_size in 'dist' mode, else 1)
pp_size = 1  # pipeline stages of contiguous blocks; the embedding on the first, ln_f and the head on the last
pp_split = ""  # the first block of stages 2.., e.g. '5,9'; '' cuts into equal counts
pp_schedule = "1f1b"  # 'gpipe' or '1f1b' (torch.distributed.pipelining), over gradient_accumulation_steps micro-batches
tp_backend = "native"  # 'native', 'megatron' (megatron-core's layers; tp_mode='dist'), 'auto'
# lossy TP links: packet loss on the sync points' messages (docs/lossy-links.md, "Lossy links")
loss_model = "none"  # 'none', 'bernoulli', 'gilbert_elliott'
loss_rate = 0.0  # bernoulli: probability that a packet is lost
ge_preset = "moderate"  # gilbert_elliott: a preset in links.GE_PRESETS, overridden key by key by:
ge_p = -1.0  # P(good -> bad) per packet; negative: the preset's value
ge_r = -1.0  # P(bad -> good) per packet
ge_k = -1.0  # P(a packet arrives | good)
ge_h = -1.0  # P(a packet arrives | bad)
loss_fwd = True  # lose packets of the forward all-reduces
loss_bwd = True  # lose packets of the backward mirror exchanges
packet_bytes = 1500  # packet payload: an Ethernet MTU
loss_eval = False  # evaluate through the lossy link too (own streams: the same masks at every eval)
lost_fill = "zero"  # a lost packet: 'zero' (absent), 'rescale' (what arrived from others x 1/(1-q))
sync_rotation = "none"  # 'hadamard': random-sign Hadamard over blocks of packets, so a loss spreads thin
transport = "unreliable"  # 'reliable': resend until arrived (the lossless numbers), retransmissions counted
# optimizer
optimizer = "adamw"  # 'adamw', or 'muon': Muon for the blocks' weight matrices, AdamW for the rest (optim.py)
learning_rate = 1e-2
max_iters = 600
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.99
grad_clip = 1.0  # clip gradients at this norm, 0.0 to disable
# learning rate schedule: linear warmup, then cosine down to min_lr
decay_lr = True
warmup_iters = 50
lr_decay_iters = max_iters  # follows max_iters unless set explicitly
min_lr = 1e-3
# system
device = "auto"  # 'auto' (cuda if available), 'cpu', 'cuda', 'cuda:1', ...
dtype = "auto"  # 'auto' (bfloat16 on CUDA, float32 on CPU), 'float32', 'bfloat16', 'float16'
compile = False  # torch.compile; defaults to True on CUDA, False on CPU, unless set
backend = "auto"  # 'auto' (nccl on CUDA, gloo on CPU), 'nccl', 'gloo'
dist_timeout_s = 600  # a collective waiting longer (a rank died or hangs) fails the run
nonfinite = "stop"  # a NaN/Inf loss or gradient norm: 'stop' the run, or 'skip' the step
seed = 1337
deterministic = False  # the same bits on every rerun on one machine: deterministic kernels only (CUDA; CPU's are)
tf32 = True  # float32 matmuls in TF32 on CUDA (faster); False: full float32, a numerics class of its own
zero_stage = 0  # 1: shard AdamW's state over the data-parallel ranks (ZeroRedundancyOptimizer)
activation_checkpointing = "none"  # 'block': keep each block's inputs only, recompute the rest in backward
peak_flops = 0.0  # device peak FLOP/s for MFU; 0.0 -> the table in mfu.py
# -----------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (int, float, bool, str))]
try:
    _config, _explicit = configurator.configure({k: globals()[k] for k in config_keys}, sys.argv[1:])
    configurator.check_train_config(_config, _explicit)  # allowed values and ranges of the keys above
    globals().update(_config)
except configurator.ConfigError as e:
    faults.fail(e)  # under torchrun: one line, rank 0's, as for every later mistake
if "lr_decay_iters" not in _explicit:
    lr_decay_iters = max_iters
config = {k: globals()[k] for k in config_keys}  # what this run uses, saved with every checkpoint
# -----------------------------------------------------------------------------


# process grid. `sim`: every process a data-parallel rank holding all TP ranks. `dist`: TP groups of consecutive ones
Comm = comms.MODES[tp_mode]  # the execution mode: comms.SimComm or comms.DistComm
tp_procs = Comm.processes_per_tp_group(tp_size)  # processes per TP group
distributed = int(os.environ.get("RANK", -1)) != -1
try:
    device = configurator.resolve_device(device)  # 'auto': cuda where there is one
except configurator.ConfigError as e:
    faults.fail(e)  # under torchrun: one line, rank 0's, as for every later mistake
device_type = "cuda" if device.startswith("cuda") else "cpu"
if tp_procs * pp_size > 1 and not distributed:
    why = f"tp_mode={tp_mode!r} runs one process per TP rank" if tp_procs > 1 else f"pp_size={pp_size} runs one process per stage"
    sys.exit(f"error: {why}: launch with torchrun --nproc_per_node={pp_size * tp_procs} train.py ... (or a multiple)")
grid = Grid()  # this process's place in world = dp x pp x tp (step.py); one process: the defaults
if distributed:
    backend = backend if backend != "auto" else ("nccl" if device_type == "cuda" else "gloo")
    timeout = datetime.timedelta(seconds=dist_timeout_s)
    dist.init_process_group(backend=backend, timeout=timeout)
    try:
        grid = process_grid(tp_procs, timeout, pp_size, f"tp_size={tp_size}: tp_mode={tp_mode!r} needs whole TP groups")
    except ValueError as e:
        faults.fail(e)
    faults.report_failed_collectives(grid.rank, dist_timeout_s)  # a dead or hung peer: one line, not a traceback
    if device_type == "cuda":
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
    if gradient_accumulation_steps % grid.dp_world:
        faults.fail(f"gradient_accumulation_steps={gradient_accumulation_steps} is not divisible by the "
                    f"{grid.dp_world} data-parallel ranks")
    gradient_accumulation_steps //= grid.dp_world
rank, world, tp_rank, dp_rank, dp_world = grid.rank, grid.world, grid.tp_rank, grid.dp_rank, grid.dp_world
master_process = rank == 0
if dtype == "auto":
    dtype = "float32" if device_type == "cpu" else ("bfloat16" if torch.cuda.is_bf16_supported() else "float16")
if "compile" not in _explicit:
    compile = device_type == "cuda" and pp_size == 1  # stages are not compiled (pipeline.py)
tokens_per_iter = gradient_accumulation_steps * dp_world * batch_size * block_size

torch.manual_seed(seed)  # the model init: the same weights on every data-parallel rank
set_numerics(deterministic, tf32)  # TF32 matmuls or not; `deterministic`: no run-to-run kernel noise (step.py)
ctx = nullcontext() if dtype == "float32" else torch.amp.autocast(device_type=device_type, dtype=getattr(torch, dtype))

# data: nanoGPT's flat uint16 token files
data_dir = data_dir or os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", dataset)
try:
    meta = read_prepared(data_dir, dataset, block_size)  # meta.pkl of a char-level dataset, else {}
    label_sets = label_eval.load(data_dir, dataset)  # MNLI's prompts and labels (data/mnli/prepare.py); {} for other datasets
except PrepareError as e:
    faults.fail(e)
meta_vocab_size = meta.get("vocab_size")
get_batch = Batches(data_dir, batch_size, block_size, seed, dp_rank, device, gradient_accumulation_steps)  # (split, step, micro)

# model
iter_num, best_val_loss, skipped_steps = 0, 1e9, 0
try:
    weights = ckpt.new_run_weights(config, meta_vocab_size, _explicit)  # init_from's weights and shape; never over a checkpoint
    schedule = parse_block_schedule(block_schedule or f"0:{block_types}", config["n_layer"],  # [(iter, pattern)]
                                    "block_schedule" if block_schedule else "block_types")
    config["block_types"] = block_types if not block_schedule else ",".join(schedule[0][1])
    model_args = model_args_from(config, vocab_size=weights.shape["vocab_size"] if weights else meta_vocab_size or 50304)
    gptconf = GPTConfig(**model_args)  # 50304 above: GPT-2's vocabulary padded
    link = link_from(config, tp_group=dp_rank)  # the network of this TP group (one per data-parallel rank)
    use_megatron, backend_why = megatron_shim.choose(tp_backend, tp_procs, tp_size, pp_size)
    layers = megatron_shim.linear_factory(grid.tp_group, device) if use_megatron else (ColumnParallelLinear, RowParallelLinear)
    if pp_size > 1:  # imported only here: torch's pipelining imports dynamo, 1 s of every process's start
        from pipeline import Pipeline, check_config as check_pipeline
        check_pipeline(pp_size, config["n_layer"], pp_split, pp_schedule, gradient_accumulation_steps,
                       block_schedule=block_schedule, tp_backend=use_megatron and "megatron", compile=compile,
                       block_types="ladder" in gptconf.block_types and block_types, n_experts=n_experts,
                       dtype=dtype == "float16" and dtype, init_optimizer=weights is not None and init_optimizer,
                       sync_rotation=sync_rotation != "none" and sequence_parallel and link.lossy and sync_dtype in  # masks.Planned: one packet count a point
                       ("int8", "float8_e4m3fn") and f"{sync_rotation} with sequence_parallel and sync_dtype={sync_dtype} on a lossy link")
except (ValueError, megatron_shim.BackendError, ckpt.CheckpointError) as e:
    faults.fail(e)
if loss_model == "gilbert_elliott":  # record the resolved chain, not the -1 placeholders
    config.update(ge_p=link.model.p, ge_r=link.model.r, ge_k=link.model.k, ge_h=link.model.h)
ckpt_path = os.path.join(out_dir, "ckpt.pt")
comm = Comm(tp_size, link, group=grid.tp_group, rank=tp_rank, sync_fraction=sync_fraction, sync_dtype=sync_dtype,
            sequence_parallel=sequence_parallel)
model = GPT(gptconf, comm, layers).to(device)
raw_model, weights_from, earlier_info = model, f"scratch (seed {seed})", None  # earlier_info: a resumed run's run_info
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == "float16"))
# pp_size > 1: the step is this process's stage, and the model keeps only the stage's part (pipeline.py)
pipeline = Pipeline(model, grid, pp_size, pp_split, pp_schedule, gradient_accumulation_steps, device, scaler, ctx) if pp_size > 1 else None
model.activation_checkpointing, model.moe_aux_loss_coef = activation_checkpointing == "block", moe_aux_loss_coef
zero = zero_stage == 1 and dp_world > 1  # one data-parallel rank: nothing to shard, plain AdamW
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type, zero, grid.dp_group, optimizer)
try:
    if init_from == "resume":  # a checkpoint of either mode continues the same run (checkpoint.py)
        resumed, note = ckpt.restore(ckpt_path, model, optimizer, scaler, comm, dp_rank, dp_world, device,
                                     config, pipeline, get_batch.tokens)
        iter_num, best_val_loss, skipped_steps = resumed["iter_num"], resumed["best_val_loss"], resumed.get("skipped_steps", 0)
        resumed, weights_from, earlier_info = None, f"{ckpt_path} (resumed at iter {iter_num})", resumed.get("run_info")
        if note and master_process:
            print(note)
    elif weights is not None:  # a new run from existing weights, under this config's pattern (checkpoint.py)
        weights_from, weights = ckpt.init_weights(weights, model, optimizer, comm, init_optimizer), None
except ckpt.CheckpointError as e:
    faults.fail(e)
raw_model.set_block_types(pattern_at(schedule, iter_num))  # a resumed schedule: the pattern in force
if faults.enabled():  # only the reliability tests set TP_SYNC_FAULT
    faults.install(raw_model, rank, lambda: iter_num)
if compile:
    model = torch.compile(model)
if dp_world > 1 and pipeline is None:  # gradients averaged over the data-parallel group only
    model = DDP(model, device_ids=[torch.device(device)] if device_type == "cuda" else None, process_group=grid.dp_group)
train_step = pipeline or PlainStep(model, raw_model, grid, gradient_accumulation_steps, scaler, ctx)  # step.py

peak = peak_flops or peak_flops_per_device(device_type, dtype)
run_info, tree_diff = provenance.describe_run(device, world, dtype, earlier_info) if master_process else (None, b"")  # rank 0 keeps it
log_path = os.path.join(out_dir, "eval.jsonl" if eval_only else "metrics.jsonl")  # eval_only touches no run files
if master_process:
    os.makedirs(out_dir, exist_ok=True)
    if not eval_only:  # config.json, run_info.json and a dirty tree's difference from its commit
        provenance.write_run_files(out_dir, config, run_info, tree_diff)
        ckpt.start_log(log_path, resume_iter=iter_num if init_from == "resume" else None)
    print(f"layout: dp={dp_world} x {f'pp={pp_size} x ' if pp_size > 1 else ''}tp={tp_size} ({tp_mode}, {world} process{'es' if world > 1 else ''}) | "
          f"blocks: {describe_schedule(schedule, tp_size)} | sync points: {raw_model.sync_points} per pass, "
          f"{raw_model.exposed_syncs} exposed | syncs: {comm.describe(compile)} | "
          f"backend: {'megatron-core' if use_megatron else 'native'} ({backend_why}) | loss model: {link.describe()} | "
          f"{f'pipeline: {pipeline.describe()} | ' if pp_size > 1 else ''}"
          f"params: {raw_model.get_num_params() / 1e6:.2f}M | tokens/iter: {tokens_per_iter:,} | "
          f"{f'experts: {n_experts}, top-{experts_top_k} | ' if n_experts else ''}optimizer: {config['optimizer']} | "
          f"device: {device} {dtype} compile={compile}{' deterministic' if deterministic else ''} | zero_stage: {int(zero)} | activation checkpointing: "
          f"{activation_checkpointing} | seed: {seed} | weights: {weights_from}")
    if "unigram_val_loss" in meta:
        print(f"unigram baseline val loss: {meta['unigram_val_loss']:.4f}")


def get_lr(it):
    """Linear warmup for warmup_iters, cosine decay to min_lr at lr_decay_iters, then min_lr."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it >= lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / max(1, lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


def log(record):
    """Append one record to out_dir/metrics.jsonl (eval.jsonl when eval_only), and to wandb."""
    record = {"iter": iter_num, **record, "sync_points": raw_model.sync_points, "exposed_syncs": raw_model.exposed_syncs}
    with open(log_path, "a") as f:
        f.write(json.dumps(record) + "\n")
    if wandb_log:
        wandb.log(record, step=iter_num)


if wandb_log and master_process:
    try:
        import wandb
        wandb.init(project=wandb_project, name=wandb_run_name or f"{dataset}-{raw_model.sync_points}comm", config=config)
    except ImportError:
        faults.fail("wandb_log=True but wandb is not installed: pip install wandb (or --wandb_log=False)")
    except Exception as e:  # no login on this node, no network: one line, not wandb's traceback
        faults.fail(f"wandb_log=True but wandb.init failed ({type(e).__name__}): `wandb login`, WANDB_MODE=offline, or --wandb_log=False")
wandb_log = wandb_log and master_process

# training loop
model.train()
t_start = t0 = time.time()
running_mfu, local_iter_num = None, 0  # MFU: a moving average, after this process's first iterations
saved_iter, consecutive_skips, check_counts = (iter_num if init_from == "resume" else None), 0, True
while True:
    if raw_model.set_block_types(pattern_at(schedule, iter_num)):  # a schedule's switch, before its eval
        check_counts = True  # the counter, the records' sync_points and the link stats follow the new pattern
        if master_process:
            print(f"iter {iter_num}: blocks -> {describe_pattern(gptconf.block_types)}, {raw_model.sync_points} syncs")
    lr = get_lr(iter_num) if decay_lr else learning_rate
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr

    # evaluate, log and checkpoint on every eval_interval and at the end
    if iter_num % eval_interval == 0 or iter_num == max_iters or eval_only:
        metrics = {**train_step.estimate(get_batch, eval_iters, loss_eval),  # the same numbers on every rank
                   **label_eval.label_metrics(train_step, label_sets, eval_iters * batch_size, batch_size, block_size,
                                              device, loss_eval)}  # MNLI's label accuracy; {} for other data
        if not math.isfinite(metrics["val_loss"]):
            faults.fail(f"iteration {iter_num}: val loss {metrics['val_loss']} is not finite; the last checkpoint "
                        f"(iteration {saved_iter}) is kept")
        save = (metrics["val_loss"] < best_val_loss or always_save_checkpoint) and iter_num > 0 and not eval_only
        best_val_loss = min(best_val_loss, metrics["val_loss"])
        pieces = ckpt.collect(raw_model, optimizer, comm, dp_rank, train_step) if save else None  # collectives
        if master_process:
            print(f"step {iter_num}: train loss {metrics['train_loss']:.4f}, val loss {metrics['val_loss']:.4f}, "
                  f"val ppl {math.exp(metrics['val_loss']):.2f}, val acc {metrics['val_accuracy']:.4f}"
                  + (f", matched label acc {metrics['val_matched_label_accuracy']:.4f}" if label_sets else ""))
            log({**metrics, "val_perplexity": math.exp(metrics["val_loss"]), "lr": lr, "time_s": time.time() - t_start})
            if save:  # atomic: a kill mid-save leaves the previous checkpoint intact
                ckpt.save({**pieces, "scaler": scaler.state_dict(), "model_args": model_args, "iter_num": iter_num,
                           "best_val_loss": best_val_loss, "config": config, "skipped_steps": skipped_steps,
                           "run_info": run_info, "data_tokens": get_batch.tokens}, ckpt_path)
                print(f"saved checkpoint to {ckpt_path}")
        saved_iter = iter_num if save else saved_iter
        t0 = time.time()  # ms/iter, tokens/s and MFU time training steps, not evals and saves
    if iter_num >= max_iters or eval_only:
        break

    # forward, backward, gradient reduce and clipping over the micro-batches (step.py), then the update
    torch.manual_seed(step_seed(seed, _DROPOUT, dp_rank, tp_rank, iter_num, *train_step.stage_seed))  # dropout: per rank
    raw_model.replicated_rng = torch.Generator(device).manual_seed(step_seed(seed, _REPLICATED, dp_rank, iter_num))  # alike
    loss, grad_norm, measured = train_step(lambda k: get_batch("train", iter_num, k), optimizer,
                                           grad_clip or math.inf, check_counts)
    check_counts = False  # the counter, once after start and after every switch of pattern
    if dtype != "float16" and not math.isfinite(grad_norm):  # never applied (fp16: the GradScaler skips it)
        lossf = loss.item() * gradient_accumulation_steps
        skipped_steps, consecutive_skips = skipped_steps + 1, consecutive_skips + 1
        if nonfinite == "stop" or consecutive_skips > 25:
            faults.fail(f"iteration {iter_num}: non-finite loss {lossf:g} / gradient norm {grad_norm:g} ({consecutive_skips} "
                        f"in a row, {skipped_steps} in all); the step was not applied and the last checkpoint (iteration "
                        f"{saved_iter}) is kept. Lower learning_rate, or --nonfinite=skip to skip up to 25 such steps in a row")
        if master_process:
            print(f"iter {iter_num}: non-finite loss {lossf:g} / gradient norm {grad_norm:g}: step skipped "
                  f"({skipped_steps} so far)")
    else:
        consecutive_skips = 0
        scaler.step(optimizer)
        scaler.update()
    optimizer.zero_grad(set_to_none=True)

    # timing and logging
    t1 = time.time()
    dt, t0 = t1 - t0, t1
    stats = link.stats(all_processes=distributed) if link.lossy and iter_num % log_interval == 0 else None  # a collective
    if iter_num % log_interval == 0 and master_process:
        lossf = loss.item() * gradient_accumulation_steps  # a CPU-GPU sync point
        if local_iter_num >= 5 and peak:  # let the training loop settle a bit
            mfu = estimate_mfu(raw_model, tokens_per_iter / world, dt, peak)  # per process, per device
            running_mfu = mfu if running_mfu is None else 0.9 * running_mfu + 0.1 * mfu
        lost = "" if stats is None else (f", lost {stats['fwd']['observed_loss_rate']:.3%} fwd "
                                         f"{stats['bwd']['observed_loss_rate']:.3%} bwd")
        print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.2e}, time {dt * 1000:.1f}ms, "
              f"tok/s {tokens_per_iter / dt:,.0f}, mfu {'n/a' if running_mfu is None else f'{running_mfu:.2%}'}{lost}")
        log({"train_loss": lossf, "lr": lr, "ms_per_iter": dt * 1000, "tokens_per_s": tokens_per_iter / dt,
             "mfu": running_mfu, **measured,
             "grad_norm": grad_norm if math.isfinite(grad_norm) else None, "skipped_steps": skipped_steps,
             **(LossyLink.record(stats) if stats else {})})
    iter_num += 1
    local_iter_num += 1

if link.lossy and not eval_only:  # the run's packet statistics, per direction and per sync point
    stats = link.stats(all_processes=distributed)
    if master_process:
        ckpt.write_json(os.path.join(out_dir, "link_stats.json"), {"link": link.describe(), "iters": iter_num,
                        "stationary_loss": link.model.stationary_loss, "mean_burst": link.model.mean_burst, **stats})
if distributed:  # every process leaves together, then exits at once (step.py says why)
    leave_process_group(wandb if wandb_log else None)
