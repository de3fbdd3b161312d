"""
Failures: how a user mistake found under torchrun ends every process with one line (fail), how
a failed collective ends a run (report_failed_collectives), and the faults
that the reliability tests inject into a run, through the environment variable
TP_SYNC_FAULT: comma-separated `name:number[@rank]`, e.g. "nan_loss:5,exit:7@1,kill_in_save:2".

    exit:N          the process kills itself (SIGKILL) at the start of training iteration N
    hang:N          the process stops answering at iteration N (its peers' collectives time out)
    nan_loss:N      the loss of iteration N is NaN
    kill_in_save:K  the K-th checkpoint save dies with half the file written (checkpoint.py)
    extra_sync:0    block 0 syncs once more than the model claims (the sync-count check must fail)

"@r" limits a fault to global rank r. Never set in normal runs: train.py installs the
hooks only when the variable is set, so the training loop itself holds no test code.
"""

import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def planned(name, rank=0):
    """The number (an iteration or a save count) at which fault `name` fires on `rank`, or None."""
    for item in filter(None, os.environ.get("TP_SYNC_FAULT", "").split(",")):
        key, _, value = item.partition(":")
        value, _, only = value.partition("@")
        if key == name and (not only or int(only) == rank):
            return int(value)
    return None


def enabled():
    return bool(os.environ.get("TP_SYNC_FAULT"))


def install(model, rank, current_iter):
    """Hooks on the model's training forward that fire the planned faults of this rank.
    current_iter: a function returning the training iteration in progress."""

    def before_forward(module, args):
        if module.training and planned("exit", rank) == current_iter():
            os.kill(os.getpid(), signal.SIGKILL)
        if module.training and planned("hang", rank) == current_iter():
            time.sleep(10 ** 6)

    def after_forward(module, args, output):
        logits, loss = output
        if module.training and loss is not None and planned("nan_loss", rank) == current_iter():
            return logits, loss * float("nan")
        return output

    model.register_forward_pre_hook(before_forward)
    model.register_forward_hook(after_forward)
    if planned("extra_sync", rank) is not None:
        block = model.transformer.h[0]
        run_block = block.forward

        def forward_with_an_extra_sync(b, d, flight, comm):
            b, d, flight = run_block(b, d, flight, comm)
            return comm.sync(b, torch.zeros_like(b), "extra"), d, flight
        block.forward = forward_with_an_extra_sync


# What a collective says when its peer is gone (lower case): gloo's transport, NCCL's remote and
# system errors, an aborted communicator, a timed-out wait. An NCCL "invalid usage" or a CUDA error in
# a collective is a bug of this process and keeps its traceback.
PEER_GONE = ("gloo/transport", "timed out", "timeout", "closed by peer", "connection reset", "broken pipe",
             "remote process exit", "network error", "ncclremoteerror", "remote peer", "communicator was aborted")


def report_failed_collectives(rank, timeout_s):
    """Make a collective that failed because a peer died, or hung past the timeout, end this process with
    one line on stderr instead of a traceback. Other exceptions keep their traceback."""
    def hook(kind, value, traceback):
        text = str(value)
        from_a_collective = isinstance(value, dist.DistError) or "gloo" in text or "NCCL" in text
        if isinstance(value, (dist.DistNetworkError, dist.DistStoreError)) or \
                from_a_collective and any(sign in text.lower() for sign in PEER_GONE):
            first = text.strip().splitlines()[0][-160:] if text.strip() else kind.__name__
            sys.stderr.write(f"error: rank {rank}: a collective failed, another rank died or hung "
                             f"(dist_timeout_s={timeout_s}): {first}\n")
            sys.stderr.flush()
            os._exit(1)
        sys.__excepthook__(kind, value, traceback)
    sys.excepthook = hook


SAID = "tp_sync/rank0_said_why"  # a key in the process group's store


def fail(message, grace_s=30):
    """A user mistake: one line on stderr, non-zero exit, no traceback. Every rank usually finds the
    same mistake, and rank 0 says it. The others wait (up to grace_s) until rank 0 has written its
    line before they exit, because torchrun ends the job's other processes as soon as one exits
    with an error, and a rank 0 a little behind would be killed before it said why. A mistake that
    rank 0 does not find is said by the rank that found it, once the grace has passed. Before the
    process group exists (train.py's config checks) there is no store to wait on: the others sleep
    through the grace instead, and torchrun ends them as soon as rank 0 exits with its line."""
    rank = int(os.environ.get("RANK", "0"))
    store = dist.distributed_c10d._get_default_store() if dist.is_initialized() else None
    if rank == 0:
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()
        if store is not None:
            store.set(SAID, "1")
    elif store is not None:
        try:
            store.wait([SAID], datetime.timedelta(seconds=grace_s))
        except Exception:  # rank 0 did not say it in time (or is gone): say it here
            sys.stderr.write(f"error: rank {rank}: {message}\n")
            sys.stderr.flush()
    else:  # before the process group (train.py's config checks): no store to wait on. Every rank runs the same checks
        # on the same arguments, so rank 0 finds the mistake moments apart from this rank, and torchrun ends this rank
        # once rank 0 exits with its line: a bounded sleep is the simplest reliable wait. It runs out only for a
        # mistake rank 0 did not find (rank 0 is then waiting for its peers in init_process_group): say it here
        time.sleep(grace_s)
        sys.stderr.write(f"error: rank {rank}: {message}\n")
        sys.stderr.flush()
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.exit(1)
