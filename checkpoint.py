"""
Checkpoints: one file, written atomically, in the `sim` layout; resuming from it; and the
other files a run leaves to continue and trace it (its log, run_info.json).

Every sharded weight (and its AdamW moments) is stored with all TP ranks' shards
stacked on the leading axis, as a `sim` model holds them; replicated weights once.
A `dist` run gathers its shards into that layout before saving and cuts its own
shard out when loading, so a checkpoint moves freely between the two modes: a
`sim` run resumed in `dist` mode (or the other way round) continues the same run.
The link models' states are stored per TP group, merged over the group's ranks. What
differs between the modes (gathering shards, cutting one out, which link streams a process
draws from) is asked of the execution mode's object (comms.py).
"""

import datetime
import importlib.metadata
import io
import json
import os
import platform
import signal
import subprocess
import sys

import torch
import torch.distributed as dist

import faults
from links import LossyLink
from model import MODEL_KEYS, GPTConfig


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
    stacked = comm.gather_shards([model_state[n] for n in names] + [optim_state["state"][i][k] for i, k in moments])
    if stacked is None:
        return None, None
    model_state.update(zip(names, stacked))
    optim_state["state"] = {i: dict(v) for i, v in optim_state["state"].items()}  # not the live state
    for (i, k), t in zip(moments, stacked[len(names):]):
        optim_state["state"][i][k] = t
    return model_state, optim_state


def collect(model, optimizer, comm, dp_rank):
    """What a checkpoint holds of the model, the optimizer and the network: collectives, on every
    rank. The model and optimizer come from one TP group (the data-parallel replicas are equal),
    the link states from every TP group, merged over the group's processes."""
    model_state = optim_state = None
    if dp_rank == 0:
        model_state, optim_state = gather(model, optimizer, comm)
    pieces = {"model": model_state, "optimizer": optim_state}
    if comm.link.lossy:  # so a resumed run draws exactly the masks an unbroken run draws
        states = [comm.link.state_dict()]
        if dist.is_initialized():
            states = [None] * dist.get_world_size()
            dist.all_gather_object(states, comm.link.state_dict())
        per_group = comm.processes_per_tp_group(comm.tp_size)
        pieces["link"] = [LossyLink.merge_states(states[g:g + per_group]) for g in range(0, len(states), per_group)]
        pieces["link_model"] = comm.link.describe()
    return pieces


def restore(path, model, optimizer, scaler, comm, dp_rank, dp_world, device):
    """Continue the run saved at path: load this process's part of the model, optimizer, scaler
    and link state. Returns the checkpoint's remaining fields (iter_num, best_val_loss, ...) and
    a note for the log, or None. CheckpointError for a missing file or another model."""
    checkpoint = load(path, device)
    saved, ours = GPTConfig(**checkpoint["model_args"]), model.config
    for key in (*MODEL_KEYS, "vocab_size"):  # the same model (dropout may change)
        if key != "dropout" and getattr(saved, key) != getattr(ours, key):
            raise CheckpointError(f"resume: {path} has {key}={getattr(saved, key)!r}, "
                                  f"this config has {key}={getattr(ours, key)!r}")
    model_state, optim_state = checkpoint.pop("model"), checkpoint.pop("optimizer")
    names, indices = _sharded_keys(model, optimizer)
    for n in names:
        model_state[n] = comm.own_shard(model_state[n])
    for i, k in _moments(optim_state, indices):
        optim_state["state"][i][k] = comm.own_shard(optim_state["state"][i][k])
    model.load_state_dict(model_state)
    optimizer.load_state_dict(optim_state)
    scaler.load_state_dict(checkpoint.get("scaler", {}))
    link, note = comm.link, None
    if link.lossy and checkpoint.get("link_model") == link.describe() and len(checkpoint["link"]) == dp_world:
        link.load_state_dict(comm.own_link_state(checkpoint["link"][dp_rank]), device)  # the streams go on
    elif link.lossy:
        note = f"resume: the checkpoint's link was {checkpoint.get('link_model', 'lossless')}; streams start fresh"
    return checkpoint, note


def start_log(log_path, resume_iter=None):
    """A new run starts a new log. A resumed run keeps what the interrupted run logged before
    the checkpoint's iteration and drops the rest, which this run does again."""
    kept = []
    if resume_iter is not None and os.path.exists(log_path):
        with open(log_path) as f:
            kept = [line for line in f if line.strip() and json.loads(line)["iter"] < resume_iter]
    with open(log_path + ".tmp", "w") as f:
        f.writelines(kept)
    os.replace(log_path + ".tmp", log_path)


def describe_run(device, processes):
    """What produced a run, so every result can be traced to its code (out_dir/run_info.json,
    and a copy in every checkpoint): git commit and whether the tree had local changes,
    package versions, device, command line."""
    here = os.path.dirname(os.path.abspath(__file__))

    def git(*args):
        try:
            out = subprocess.run(["git", *args], cwd=here, capture_output=True, text=True, timeout=10)
            return out.stdout.strip() if out.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            return ""

    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for package in ("numpy", "tiktoken", "datasets", "wandb", "megatron-core"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    commit = git("rev-parse", "HEAD")
    return {"git_commit": commit or None,
            "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")) if commit else None,
            "versions": versions, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name() if str(device).startswith("cuda") else platform.processor() or "cpu",
            "processes": processes, "argv": sys.argv, "host": platform.node(),
            "started": datetime.datetime.now().isoformat(timespec="seconds")}
