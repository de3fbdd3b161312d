"""
Label accuracy of a classification fine-tune (MNLI: data/mnli/prepare.py): the model reads a prompt
ending in "Answer:" and its next-token logits at that position choose among the label words.

    label_sets = load(data_dir, dataset) # {} for a dataset without label sets: nothing changes for it
    metrics = label_metrics(train_step, label_sets, n_examples, batch_size, block_size, device)
    # {"val_matched_label_accuracy": ..., "val_matched_label_loss": ..., "val_mismatched_...": ...}

The label loss is the mean cross-entropy of the right label token over the whole vocabulary (what the
fine-tune trains); the accuracy is the choice among the label words only.
"""

import json
import os
import zipfile

import numpy as np
import torch
import torch.distributed as dist

from data.common import PrepareError

PAD = 50256  # <|endoftext|>: what the prompts are padded with (never read: the model is causal)


def load(data_dir, dataset=""):
    """name -> dict(tokens (N, W) int32, answer_pos (N,), label (N,), label_ids (3,)) for each
    <name>.npz next to labels.json; {} where the dataset has no labels.json (mnli must have one, and
    val_matched.npz beside it). PrepareError (one line) for a missing or unreadable file."""
    path, again = os.path.join(data_dir, "labels.json"), f"run python data/{dataset or 'mnli'}/prepare.py again"
    if not os.path.exists(path):
        if dataset == "mnli":  # the label metrics a fine-tune's config promises: never silently none
            raise PrepareError(f"{path} not found: {again}")
        return {}
    sets, file = {}, path
    try:
        with open(path) as f:
            label_ids = np.array(json.load(f)["token_ids"], dtype=np.int64)
        for name in ("val_matched", "val_mismatched"):
            file = os.path.join(data_dir, f"{name}.npz")
            if os.path.exists(file):
                with np.load(file) as arrays:
                    sets[name] = dict({k: arrays[k] for k in ("tokens", "answer_pos", "label")}, label_ids=label_ids)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:  # a cut-off or foreign file
        raise PrepareError(f"{file} is not readable ({type(e).__name__}: {e}): {again}")
    if "val_matched" not in sets:
        raise PrepareError(f"{os.path.join(data_dir, 'val_matched.npz')} not found beside {path}: {again}")
    return sets


def choose(logits_at_answer, label_ids):
    """(B, vocab) next-token logits at the answer position, (K,) label token ids -> (B,) the chosen
    label index: the label word with the highest logit. A tie goes to the lowest label index (torch.argmax
    returns the first maximum): the same logits always give the same choice."""
    return logits_at_answer[:, label_ids].argmax(-1)


def prompts(label_set, n, block_size):
    """The first n prompts as (n, block_size) int64 inputs and their answer positions (n,). A prompt
    longer than block_size keeps its last block_size tokens (the question and "Answer:"), so the
    answer position is always inside the block; shorter ones are right-padded."""
    tokens, answer_pos = label_set["tokens"][:n], label_set["answer_pos"][:n]
    X = np.full((n, block_size), PAD, dtype=np.int64)
    start = np.maximum(answer_pos + 1 - block_size, 0)  # the first token kept
    for i in range(n):
        row = tokens[i, start[i]:answer_pos[i] + 1]
        X[i, :len(row)] = row
    return torch.from_numpy(X), torch.from_numpy(answer_pos - start)


@torch.no_grad()
def label_metrics(train_step, label_sets, n_examples, batch_size, block_size, device, lossy=False):
    """Label accuracy and label loss on the first n_examples of each set (the same ones at every eval),
    in (batch_size, block_size) batches shared over the data-parallel ranks as Step.estimate shares its
    batches; the last batch is filled up with copies of the first example, left out of every count.
    The network is lossless unless lossy (then the link's eval streams, as Step.estimate)."""
    if not label_sets:
        return {}  # a dataset without label sets: its evals are what they were
    out = {}
    train_step.module.eval()
    train_step.model.head_float32 = True  # the label logits in float32: under bf16 close ones tie (model.py)
    with train_step.comm.evaluating(lossy=lossy):
        for name, label_set in label_sets.items():
            n = min(n_examples, len(label_set["label"]))
            X_all, pos_all = prompts(label_set, n, block_size)  # (n, block_size), (n,)
            label_ids = torch.from_numpy(label_set["label_ids"])
            labels = torch.from_numpy(label_set["label"][:n])
            totals = torch.zeros(3, device=device)  # label loss sum, correct, examples
            n_batches = -(-n // batch_size)
            for k in range(train_step.grid.dp_rank, n_batches, train_step.grid.dp_world):
                rows = torch.arange(k * batch_size, (k + 1) * batch_size)
                real = rows < n  # (B,) False: a copy that fills the last batch
                rows = torch.where(real, rows, 0)
                pos = pos_all[rows]  # (B,)
                Y = torch.full((batch_size, block_size), -1, dtype=torch.long)  # -1: ignored by the loss
                Y[real, pos[real]] = label_ids[labels[rows[real]]]  # only the label token is scored
                logits, loss = train_step.evaluate(X_all[rows].to(device), Y.to(device))
                if logits is not None:  # (B, L, vocab), on a pipeline's last stage only
                    real, target = real.to(device), labels[rows].to(device)
                    chosen = choose(logits[torch.arange(batch_size, device=device), pos.to(device)], label_ids.to(device))
                    # loss: the mean over the real rows (a copy's targets are all ignored), so times their count
                    totals += torch.stack([loss.float() * real.sum(), ((chosen == target) & real).sum().float(),
                                           real.sum().float()])
            if dist.is_initialized():  # counted once per TP group: by its rank 0, whose logits `sim` reports
                totals *= train_step.reports
                dist.all_reduce(totals)
            out[f"{name}_label_accuracy"] = totals[1].item() / totals[2].item()
            out[f"{name}_label_loss"] = totals[0].item() / totals[2].item()
    train_step.module.train()
    train_step.model.head_float32 = False
    return out
