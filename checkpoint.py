"""
Checkpoints: one file, written atomically, in the `sim` layout; resuming from it; and the other files a
run leaves to continue it (its log); what produced the run (run_info.json) is provenance.py's.

Every sharded weight (and its AdamW moments) is stored with all TP ranks' shards stacked on the leading
axis, as a `sim` model holds them; replicated weights once. A `dist` run gathers its shards into that layout
before saving and cuts its own shard out when loading, so a checkpoint moves freely between the two modes: a
`sim` run resumed in `dist` mode (or the other way round) continues the same run. The link models' states are
stored per TP group, merged over the group's ranks. What differs between the modes (gathering shards, cutting
one out, which link streams a process draws from) is asked of the execution mode's object (comms.py).
"""

import collections
import io
import json
import logging
import os
import signal

import torch
import torch.distributed as dist

import faults
from configurator import GPT2_NAMES
from links import LossyLink
from model import GPT, MODEL_KEYS, GPTConfig, describe_pattern


class CheckpointError(Exception):
    pass


_saves = 0


def save(checkpoint, path):
    """Write to a temporary file, flush it to disk, then rename: a kill mid-save leaves the old file."""
    global _saves
    _saves += 1
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        if faults.planned("kill_in_save") == _saves:  # test hook: die with half the file written
            buffer = io.BytesIO()
            torch.save(checkpoint, buffer)
            f.write(buffer.getvalue()[:buffer.tell() // 2])
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        torch.save(checkpoint, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(path, device):
    try:
        checkpoint = torch.load(path, map_location=device, weights_only=False)
    except FileNotFoundError:
        raise CheckpointError(f"{path} does not exist") from None
    except Exception as e:  # a truncated or foreign file: say which, not a pickle traceback
        raise CheckpointError(f"{path} is not a readable checkpoint ({type(e).__name__}: {str(e)[:80]})") from None
    if not (isinstance(checkpoint, dict) and isinstance(checkpoint.get("model_args"), dict) and "model" in checkpoint):
        raise CheckpointError(f"{path} is a torch file but not a checkpoint of this project's train.py (no model_args "
                              f"and model)")
    checkpoint["model_args"].pop("tp_mode", None)  # older checkpoints named the mode; the layout is the same
    return checkpoint


def _sharded_keys(model, optimizer):
    """Model state keys and optimizer state indices of the TP-sharded parameters."""
    names = {id(p): n for n, p in model.named_parameters()}
    sharded = {n for n, p in model.named_parameters() if getattr(p, "tp_sharded", False)}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    indices = [i for i, p in enumerate(params) if names[id(p)] in sharded]
    return sorted(sharded), indices


def _moments(optim_state, indices):
    """The per-element optimizer tensors of the sharded parameters, in a fixed order."""
    return [(i, k) for i in indices for k, v in sorted(optim_state["state"].get(i, {}).items())
            if torch.is_tensor(v) and v.dim() > 0]


def gather(model, optimizer, comm):
    """(model state, optimizer state) in the `sim` layout on TP rank 0; (None, None) on other TP
    ranks. A collective over the TP group in `dist` mode, called by the ranks of one group."""
    model_state, optim_state = model.state_dict(), optimizer.state_dict()
    names, indices = _sharded_keys(model, optimizer)
    moments = _moments(optim_state, indices)
    device = next(model.parameters()).device  # ZeRO-1 consolidates the state on the CPU
    stacked = comm.gather_shards([model_state[n] for n in names] + [optim_state["state"][i][k].to(device)
                                                                     for i, k in moments])
    if stacked is None:
        return None, None
    model_state.update(zip(names, stacked))
    optim_state["state"] = {i: dict(v) for i, v in optim_state["state"].items()}  # not the live state
    for (i, k), t in zip(moments, stacked[len(names):]):
        optim_state["state"][i][k] = t
    return model_state, optim_state


def write_json(path, content):
    """A run file (link_stats.json), indented for reading."""
    with open(path, "w") as f:
        json.dump(content, f, indent=2)


def collect(model, optimizer, comm, dp_rank, step=None):
    """What a checkpoint holds of the model, the optimizer and the network: collectives, on every
    rank. The model and optimizer come from one TP group (the data-parallel replicas are equal;
    with a pipeline, one TP group per stage, merged by the step into the whole model: pipeline.py), the link
    states from every TP group, merged over the group's processes (of every stage)."""
    model_state = optim_state = None
    if hasattr(optimizer, "consolidate_state_dict"):  # ZeRO-1 (ZeroRedundancyOptimizer): the whole AdamW state
        optimizer.consolidate_state_dict(to=0)  # keeps it, on data-parallel rank 0 (every rank calls this)
    if dp_rank == 0:
        model_state, optim_state = gather(model, optimizer, comm)
        if step is not None:
            model_state, optim_state = step.merge(model_state, optim_state, optimizer)
    pieces = {"model": model_state, "optimizer": optim_state}
    if comm.link.lossy:  # so a resumed run draws exactly the masks an unbroken run draws
        states = [comm.link.state_dict()]
        if dist.is_initialized():
            states = [None] * dist.get_world_size()
            dist.all_gather_object(states, comm.link.state_dict())
        per_group = comm.processes_per_tp_group(comm.tp_size) * (step.size if step else 1)
        pieces["link"] = [LossyLink.merge_states(states[g:g + per_group]) for g in range(0, len(states), per_group)]
        pieces["link_model"] = comm.link.describe()
        pieces["link_device"] = next(model.parameters()).device.type  # a generator's state is its device's
    return pieces


# What a resumed run must keep, beside the model's shape: a change would splice two different runs into one log
# (the layout, the length and the network may change: tp_mode, pp_size, zero_stage, max_iters, the link, ...).
RUN_KEYS = ("block_schedule", "seed", "dataset", "batch_size", "sync_fraction", "sync_dtype")


def restore(path, model, optimizer, scaler, comm, dp_rank, dp_world, device, config=None, pipeline=None, data_tokens=None):
    """Continue the run saved at path: load this process's part of the model, optimizer, scaler
    and link state, the optimizer's settings (weight decay, betas) this config's. Returns the checkpoint's
    remaining fields (iter_num, best_val_loss, ...) and a note for the log, or None. CheckpointError for a
    missing file, another model or another run (RUN_KEYS: config, train.py's, against the saved one;
    data_tokens: the train and val files' token counts, against those the run was trained on)."""
    checkpoint = load(path, device)
    saved, ours = GPTConfig(**checkpoint["model_args"]), model.config
    for key in (*MODEL_KEYS, "vocab_size"):  # the same model (dropout may change)
        if key != "dropout" and getattr(saved, key) != getattr(ours, key):
            pattern = key == "block_types"  # 'tp x12', not a 12-tuple; another pattern is a new run
            show = describe_pattern if pattern else repr
            raise CheckpointError(f"resume: {path} has {key}={show(getattr(saved, key))}, this config has "
                                  f"{key}={show(getattr(ours, key))}"
                                  + (" (a new run from these weights: init_from=<its ckpt.pt>)" if pattern else ""))
    saved_config = checkpoint.get("config", {})
    for key in RUN_KEYS if config is not None else ():  # a resumed run keeps these, as it keeps its pattern
        if key in saved_config and saved_config[key] != config[key]:
            raise CheckpointError(f"resume: {path} has {key}={saved_config[key]!r}, this config has {key}={config[key]!r} "
                                  f"(a new run from these weights: init_from=<its ckpt.pt>)")
    trained_on = checkpoint.get("data_tokens")  # data_dir may move; other files under it are another run's data
    if data_tokens is not None and trained_on is not None and trained_on != data_tokens:
        raise CheckpointError(f"resume: {path} was trained on data of {trained_on} tokens, this config's data_dir holds "
                              f"{data_tokens} (other data: a new run from these weights, init_from=<its ckpt.pt>)")
    model_state, optim_state = checkpoint.pop("model"), checkpoint.pop("optimizer")
    if pipeline is not None:  # this stage's part of the whole model (any pp_size saved it)
        model_state, optim_state = pipeline.split(model_state, optim_state, optimizer)
    _load_sharded(model, optimizer, model_state, optim_state, comm)
    if checkpoint.get("scaler") or not scaler.is_enabled():  # a float16 run resuming another dtype's: a fresh scale
        scaler.load_state_dict(checkpoint.get("scaler", {}))
    link, note, device_type = comm.link, None, next(model.parameters()).device.type
    if link.lossy and checkpoint.get("link_device", device_type) != device_type:  # another device's generators
        note = f"resume: the checkpoint's link streams were drawn on {checkpoint['link_device']}; streams start fresh"
    elif link.lossy and checkpoint.get("link_model") == link.describe() and len(checkpoint["link"]) == dp_world:
        state = comm.own_link_state(checkpoint["link"][dp_rank])
        if pipeline is not None and not pipeline.is_first:  # every stage draws every stream; one keeps the totals
            state = {**state, "sent": {}, "lost": {}, "bursts": {}}
        link.load_state_dict(state, device)  # the streams go on
    elif link.lossy:
        note = f"resume: the checkpoint's link was {checkpoint.get('link_model', 'lossless')}; streams start fresh"
    return checkpoint, note


def _load_sharded(model, optimizer, model_state, optim_state, comm):
    """Load `sim`-layout model and optimizer states (None: leave that one as it is), cutting this
    process's shards out of the stacked ones. The optimizer takes the saved moments and keeps this
    run's settings (weight decay, betas: config.json's), on resume as from another run's checkpoint."""
    names, indices = _sharded_keys(model, optimizer)
    if model_state is not None:
        for n in names:
            model_state[n] = comm.own_shard(model_state[n])
        model.load_state_dict(model_state)
    if optim_state is not None:
        for i, k in _moments(optim_state, indices):
            optim_state["state"][i][k] = comm.own_shard(optim_state["state"][i][k])
        settings = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
        try:
            optimizer.load_state_dict(optim_state)
            for group, own in zip(optimizer.param_groups, settings):
                group.update(own)
        except (ValueError, KeyError) as e:  # e.g. the saved run used another `optimizer`
            raise CheckpointError(f"the checkpoint's optimizer state does not fit this run's optimizer (saved with "
                                  f"another `optimizer`? {type(e).__name__}: {str(e)[:80]})") from None


# --- init_from=<checkpoint or GPT-2>: a new run from existing weights, under any pattern ---

SHAPE_KEYS = ("n_layer", "n_head", "n_embd", "block_size", "bias")  # and vocab_size: the weights decide them

# Weights to start a new run from. dense: a tp_size=1 GPT's state dict (GPT.dense_state_dict's layout);
# shape: SHAPE_KEYS + vocab_size; text: where they came from; checkpoint: the source checkpoint or None
Weights = collections.namedtuple("Weights", "dense shape text checkpoint", defaults=(None,))


def init_source(init_from):
    """What init_from names beyond 'scratch'/'resume': ('checkpoint', path to ckpt.pt) or
    ('transformers', GPT-2 name or a save_pretrained directory). CheckpointError otherwise."""
    if init_from in GPT2_NAMES:
        return "transformers", init_from
    if os.path.isdir(init_from):
        if os.path.isfile(os.path.join(init_from, "ckpt.pt")):  # a run's out_dir
            return "checkpoint", os.path.join(init_from, "ckpt.pt")
        if os.path.isfile(os.path.join(init_from, "config.json")):  # GPT2LMHeadModel.save_pretrained
            return "transformers", init_from
        raise CheckpointError(f"init_from={init_from!r} is a directory with neither a ckpt.pt nor a "
                              f"transformers config.json")
    if os.path.isfile(init_from):
        return "checkpoint", init_from
    raise CheckpointError(f"init_from={init_from!r}: not 'scratch', 'resume', a GPT-2 name "
                          f"({', '.join(GPT2_NAMES)}), or an existing checkpoint file or directory")


def read_weights(init_from):
    """The Weights that init_from names, on the CPU."""
    kind, where = init_source(init_from)
    if kind == "transformers":
        return _transformers_weights(where)
    checkpoint = load(where, "cpu")
    args = dict(checkpoint["model_args"], dropout=0.0)
    try:
        source = GPT(GPTConfig(**args))  # its own tp_size, all ranks here: reassembles the dense weights
        source.load_state_dict(checkpoint["model"])
    except (TypeError, ValueError, RuntimeError) as e:  # e.g. upstream nanoGPT's ckpt.pt: other names and shapes
        raise CheckpointError(f"{where}: its weights do not fit this project's GPT ({type(e).__name__}: "
                              f"{str(e)[:80]})") from None
    text = (f"{where} (iter {checkpoint.get('iter_num', '?')}, blocks {describe_pattern(source.config.block_types)}, "
            f"tp_size={args['tp_size']})")
    return Weights(source.dense_state_dict(), {k: args[k] for k in (*SHAPE_KEYS, "vocab_size")}, text, checkpoint)


def _transformers_weights(name_or_dir):
    """GPT-2 weights through transformers (imported only here), in the dense layout."""
    try:
        from transformers import GPT2LMHeadModel
    except ImportError:
        raise CheckpointError(f"init_from={name_or_dir!r} loads GPT-2 through transformers, which is not "
                              f"installed: pip install transformers") from None
    for logger in ("transformers", "huggingface_hub"):  # their retries and warnings would bury our one line
        logging.getLogger(logger).setLevel(logging.ERROR)
    try:  # and so would its progress bars on stderr
        from transformers.utils import logging as transformers_logging
        transformers_logging.disable_progress_bar()
    except ImportError:
        pass
    try:
        hf = GPT2LMHeadModel.from_pretrained(name_or_dir)
    except Exception as e:  # no network, a foreign directory: one line
        first = (str(e).strip().splitlines() or [""])[0][:160]
        raise CheckpointError(f"init_from={name_or_dir!r}: transformers could not load it "
                              f"({type(e).__name__}: {first})") from None
    c = hf.config
    shape = dict(n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd, block_size=c.n_positions, bias=True,
                 vocab_size=c.vocab_size)  # 50257 for GPT-2: not padded, the weights decide
    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    column_bias = ("attn.c_attn.bias", "mlp.c_fc.bias")
    dense = {}
    for name, tensor in hf.state_dict().items():
        if name.endswith((".attn.bias", ".attn.masked_bias")) and tensor.dim() > 1:
            continue  # older versions' causal-mask buffers, not weights
        tensor = tensor.detach().float().clone()
        if name.endswith(conv1d):  # Conv1D stores (in, out); our layers (1, out, in) in the dense layout
            tensor = tensor.t().contiguous().unsqueeze(0)
        elif name.endswith(column_bias):  # column-parallel biases carry the rank axis: (1, out)
            tensor = tensor.unsqueeze(0)
        dense[name] = tensor
    dense["lm_head.weight"] = dense["transformer.wte.weight"]  # tied, as GPT-2 (may be absent from the file)
    text = f"{name_or_dir} (transformers GPT-2, activation {c.activation_function})"
    if c.activation_function != "gelu":  # GPT-2's gelu_new is GELU's tanh approximation; ours is exact
        text += ", approximated by exact GELU as nanoGPT does"
    return Weights(dense, shape, text)


def new_run_weights(config, meta_vocab_size, given=()):
    """init_from a checkpoint or GPT-2: read the Weights and give config their model shape (the
    pattern, tp_size, dropout stay the config's; block_size may be cut down). None for scratch/resume.
    A new run never overwrites a checkpoint: CheckpointError if out_dir holds one, or if a shape key the
    user gave (given: a config file's or --key's) differs from the weights' (it would be replaced unseen)."""
    path = os.path.join(config["out_dir"], "ckpt.pt")
    if config["init_from"] != "resume" and not config["eval_only"] and os.path.exists(path):
        raise CheckpointError(f"{path} exists: continue that run with --init_from=resume, "
                              f"or train into another --out_dir (a new run never overwrites a checkpoint)")
    if config["init_from"] == "scratch" and config["eval_only"] and os.path.exists(path):  # not its run's model
        raise CheckpointError(f"eval_only=True with init_from='scratch' evaluates random weights, not {path}: "
                              f"use --init_from=resume")
    if config["init_from"] in ("scratch", "resume"):
        return None
    weights = read_weights(config["init_from"])
    if config["block_size"] > weights.shape["block_size"]:
        raise CheckpointError(f"block_size={config['block_size']} is longer than the {weights.shape['block_size']} "
                              f"positions of init_from={config['init_from']!r}")
    if meta_vocab_size and meta_vocab_size != weights.shape["vocab_size"]:
        raise CheckpointError(f"the data's vocabulary has {meta_vocab_size} tokens, init_from="
                              f"{config['init_from']!r} has {weights.shape['vocab_size']}: another tokenizer")
    experts = weights.checkpoint["model_args"].get("n_experts", 0) if weights.checkpoint else 0  # GPT-2: dense MLPs
    if experts != config["n_experts"]:  # other weights altogether: an MLP is not a mixture's experts
        raise CheckpointError(f"init_from={config['init_from']!r} has n_experts={experts}, this config has "
                              f"n_experts={config['n_experts']}: set --n_experts={experts}")
    for key, theirs in ((k, weights.shape[k]) for k in SHAPE_KEYS if k != "block_size"):  # the weights decide them
        if key in given and config[key] != theirs:
            raise CheckpointError(f"init_from={config['init_from']!r} has {key}={theirs!r}, this config sets {key}="
                                  f"{config[key]!r}: the weights decide the model's shape (drop {key}, or set {theirs!r})")
        config[key] = theirs
    return weights


def init_weights(weights, model, optimizer, comm, init_optimizer):
    """Load Weights into a new run's model (any pattern, any tp_size: the shards are cut from the
    dense weights, and position embeddings cropped to the model's block_size); with
    init_optimizer, the source checkpoint's AdamW state too (the same tp_size only)."""
    dense = dict(weights.dense)
    dense["transformer.wpe.weight"] = dense["transformer.wpe.weight"][:model.config.block_size]
    model.load_dense_state_dict(dense)
    if not init_optimizer:
        return weights.text + "; fresh optimizer"
    saved = weights.checkpoint
    if saved is None or saved["model_args"]["tp_size"] != model.config.tp_size \
            or saved["model_args"]["block_size"] != model.config.block_size:
        raise CheckpointError("init_optimizer=True needs a checkpoint of the same tp_size and block_size "
                              "(AdamW's moments are per shard); use --init_optimizer=False")
    _load_sharded(model, optimizer, None, saved["optimizer"], comm)
    return weights.text + "; optimizer state loaded"


def read_log(log_path, error=ValueError):
    """A JSON-lines log's records; a torn last line (killed mid-write, still writing) dropped, another an `error`."""
    with open(log_path) as f:
        lines = [line for line in f if line.strip()]
    for n, line in enumerate(lines):
        try:
            lines[n] = json.loads(line)
        except json.JSONDecodeError:
            if n < len(lines) - 1:
                raise error(f"{log_path}: line {n + 1} is not a JSON record") from None
            lines.pop()  # the last: the loop ends here
    return lines


def start_log(log_path, resume_iter=None):
    """A new run starts a new log; a resumed one keeps the records before the checkpoint's iteration."""
    try:
        kept = read_log(log_path) if resume_iter is not None and os.path.exists(log_path) else []
    except ValueError as e:
        raise SystemExit(f"error: {e}; move the file aside to resume") from None
    with open(log_path + ".tmp", "w") as f:
        f.writelines(json.dumps(record) + "\n" for record in kept if record["iter"] < resume_iter)
    os.replace(log_path + ".tmp", log_path)


def model_as_run(checkpoint, device, sequence_parallel=True):
    """A checkpoint's model as its run computed at its last iteration, every TP rank in this process on a
    lossless link (sample.py, bench tools): with its sync width and dtype (sync_fraction and sync_dtype are
    run settings, not model_args), its sequence parallelism (with a sync_dtype, SP's two-shot quantized sync
    is another function; sequence_parallel=False for lengths it cannot split, as sampling's) and, for a
    block_schedule, the pattern in force at iter_num."""
    from comms import SimComm
    from patterns import parse_block_schedule, pattern_at
    config, args = checkpoint.get("config", {}), dict(checkpoint["model_args"], dropout=0.0)
    comm = SimComm(args["tp_size"], sync_fraction=config.get("sync_fraction", 1.0), sync_dtype=config.get("sync_dtype", ""),
                   sequence_parallel=sequence_parallel and bool(config.get("sequence_parallel")))
    model = GPT(GPTConfig(**args), comm)
    if config.get("block_schedule"):
        model.set_block_types(pattern_at(parse_block_schedule(config["block_schedule"], args["n_layer"]), checkpoint["iter_num"]))
    model.load_state_dict(checkpoint["model"])
    return model.to(device)
