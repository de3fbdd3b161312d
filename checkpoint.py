"""
Checkpoints: one file, written atomically, in the `sim` layout; and what else a run leaves
to trace it (run_info.json).

Every sharded weight (and its AdamW moments) is stored with all TP ranks' shards
stacked on the leading axis, as a `sim` model holds them; replicated weights once.
A `dist` run gathers its shards into that layout before saving and cuts its own
shard out when loading, so a checkpoint moves freely between the two modes: a
`sim` run resumed in `dist` mode (or the other way round) continues the same run.
The link models' states are stored per TP group, merged over the group's ranks.
"""

import datetime
import importlib.metadata
import io
import os
import platform
import signal
import subprocess
import sys

import torch
import torch.distributed as dist


class CheckpointError(Exception):
    pass


def fault(name, rank=0):
    """A fault the tests inject through TP_SYNC_FAULT, e.g. "nan_loss:5,exit:7@1,kill_in_save:2":
    the number (an iteration or a save count) for `name`, or None. "@r" limits it to global rank r.
    Never set in normal runs."""
    for item in filter(None, os.environ.get("TP_SYNC_FAULT", "").split(",")):
        key, _, value = item.partition(":")
        value, _, only = value.partition("@")
        if key == name and (not only or int(only) == rank):
            return int(value)
    return None


_saves = 0


def save(checkpoint, path):
    """Write to a temporary file, flush it to disk, then rename: a kill mid-save leaves the old file."""
    global _saves
    _saves += 1
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        if fault("kill_in_save") == _saves:  # test hook: die with half the file written
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
        return torch.load(path, map_location=device, weights_only=False)
    except FileNotFoundError:
        raise CheckpointError(f"{path} does not exist") from None
    except Exception as e:  # a truncated or foreign file: say which, not a pickle traceback
        raise CheckpointError(f"{path} is not a readable checkpoint ({type(e).__name__}: {str(e)[:80]})") from None


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
    """(model state, optimizer state) in the `sim` layout, on TP rank 0; None on other TP ranks.

    `dist` mode: a collective over the TP group, called by the ranks of one group only.
    """
    model_state, optim_state = model.state_dict(), optimizer.state_dict()
    if comm.mode == "sim" or comm.tp_size == 1:
        return model_state, optim_state
    names, indices = _sharded_keys(model, optimizer)
    moments = _moments(optim_state, indices)
    tensors = [model_state[n] for n in names] + [optim_state["state"][i][k] for i, k in moments]
    flat = torch.cat([t.reshape(-1).float() for t in tensors])  # one message for all of them
    parts = [torch.empty_like(flat) for _ in range(comm.tp_size)]
    dist.all_gather(parts, flat, group=comm.group)
    if comm.rank != 0:
        return None, None
    sizes = [t.numel() for t in tensors]
    per_rank = [part.split(sizes) for part in parts]
    stacked = [torch.cat([chunks[k].view_as(t) for chunks in per_rank]).to(t.dtype) for k, t in enumerate(tensors)]
    for n, t in zip(names, stacked):
        model_state[n] = t
    optim_state["state"] = {i: dict(v) for i, v in optim_state["state"].items()}  # not the live state
    for (i, k), t in zip(moments, stacked[len(names):]):
        optim_state["state"][i][k] = t
    return model_state, optim_state


def local(model_state, optim_state, model, optimizer, comm):
    """Cut this process's TP shard out of a `sim`-layout state (in place); `sim` mode keeps all."""
    if comm.mode == "sim":
        return model_state, optim_state
    names, indices = _sharded_keys(model, optimizer)
    r = comm.rank
    for n in names:
        model_state[n] = model_state[n][r:r + 1]
    for i, k in _moments(optim_state, indices):
        optim_state["state"][i][k] = optim_state["state"][i][k][r:r + 1]
    return model_state, optim_state


def merge_link_states(states, tp_procs):
    """Per-process link states -> one state per TP group (its ranks' streams and summed statistics)."""
    groups = []
    for g in range(len(states) // tp_procs):
        members = states[g * tp_procs:(g + 1) * tp_procs]
        merged = {"streams": {}, "sent": {}, "lost": {}, "bursts": {}}
        for state in members:
            merged["streams"].update(state["streams"])
            for key in ("sent", "lost", "bursts"):
                for k, v in state[key].items():
                    merged[key][k] = merged[key].get(k, 0) + v
        groups.append(merged)
    return groups


def link_state_for(group_state, comm):
    """The part of a TP group's link state that this process holds.

    `dist` mode: the streams into this rank (it draws the masks of what it receives);
    the statistics go to TP rank 0, so that sums over processes stay right.
    """
    if comm.mode == "sim":
        return group_state
    keep_stats = comm.rank == 0
    return {"streams": {k: v for k, v in group_state["streams"].items() if k[1] == comm.rank},
            "sent": group_state["sent"] if keep_stats else {},
            "lost": group_state["lost"] if keep_stats else {},
            "bursts": group_state["bursts"] if keep_stats else {}}


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
