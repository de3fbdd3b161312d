"""
MNLI (GLUE) in GPT-2 BPE, rendered as text a GPT-2 continues with a label word.

    python data/mnli/prepare.py                          # nyu-mll/glue mnli from the Hugging Face hub
    python data/mnli/prepare.py --input glue_data/MNLI   # or local GLUE TSVs / jsonl files (offline)

Each example is rendered as

    {premise}
    Question: {hypothesis} True, False or Neither?
    Answer: True<|endoftext|>

with the label words " True" / " Neither" / " False" for entailment / neutral / contradiction
(each one GPT-2 token). Writes next to this file (or --out_dir):
  train.bin            every rendered train example, concatenated (uint16, nanoGPT's format): the
                       model fine-tunes on them as a language model
  val.bin              the rendered dev_matched examples (val loss)
  val_matched.npz      the label sets (label_eval.py): per dev example the prompt up to and including
  val_mismatched.npz   "Answer:" (tokens int32 (N, width) right-padded with 50256), answer_pos (the
                       last prompt token, whose next-token logits choose the label) and label (0/1/2)
  labels.json          the label words and their token ids
--input takes a directory holding train / dev_matched / dev_mismatched files (.tsv or .jsonl; test
files are skipped) or the files themselves, the split read from the name. TSV: GLUE's columns
sentence1, sentence2, gold_label. jsonl: premise, hypothesis, label (0/1/2 as on the hub, or the
word; sentence1 / sentence2 / gold_label also work). Unlabelled examples ('-', -1) are skipped.
No meta.pkl: train.py would read one as a char-level vocabulary.
"""

import argparse
import csv
import glob
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import PrepareError, fail, gpt2_encoding, output_dir, write_tokens  # noqa: E402

CLASSES = ("entailment", "neutral", "contradiction")  # label 0, 1, 2, as nyu-mll/glue mnli numbers them
WORDS = (" True", " Neither", " False")  # what the model says after "Answer:" for each class
TEMPLATE = "{premise}\nQuestion: {hypothesis} True, False or Neither?\nAnswer:"
EOT = 50256
SPLITS = ("train", "val_matched", "val_mismatched")
HUB_SPLITS = {"train": "train", "val_matched": "validation_matched", "val_mismatched": "validation_mismatched"}

csv.field_size_limit(1 << 24)


def is_test(name):
    """'test' as a word of a file name (test_matched, mnli-test.jsonl), not inside one (latest_train)."""
    return re.search(r"(^|[^a-z])test([^a-z]|$)", name) is not None


def split_of(path):
    """Which split a file holds, from its name (GLUE's and the hub's names)."""
    name = os.path.basename(path).lower()
    if is_test(name):  # test_matched.tsv, mnli_test_matched.jsonl: never read as a dev split
        raise PrepareError(f"--input {path!r} is a test split (no labels); give train / dev_matched / dev_mismatched")
    for needle, split in (("mismatched", "val_mismatched"), ("matched", "val_matched"), ("train", "train")):
        if needle in name:
            return split
    raise PrepareError(f"--input {path!r}: cannot tell its split from the name (want train, dev_matched "
                       f"or dev_mismatched in it)")


def local_files(inputs):
    """--input's files by split: {split: [paths]}."""
    paths = []
    for item in inputs:
        if os.path.isdir(item):
            found = sorted(p for ext in ("tsv", "jsonl") for p in glob.glob(os.path.join(item, f"*.{ext}")))
            paths += [p for p in found if not is_test(os.path.basename(p).lower())]
        elif os.path.isfile(item):
            paths.append(item)
        else:
            raise PrepareError(f"--input {item!r} is neither a file nor a directory")
    by_split = {}
    for path in paths:
        if not path.endswith((".tsv", ".jsonl")):
            raise PrepareError(f"--input {path!r}: expected a .tsv or .jsonl file")
        by_split.setdefault(split_of(path), []).append(path)
    for split, name in (("train", "train"), ("val_matched", "dev_matched")):
        if split not in by_split:
            raise PrepareError(f"--input {' '.join(inputs)}: no {name} file (.tsv or .jsonl) found")
    return by_split


def label_index(value):
    """0/1/2 from the hub's int or GLUE's word; None for an unlabelled example ('-', -1, '', null);
    ValueError for anything else (1.0, "3", "yes": a label this script would otherwise drop unseen)."""
    text = value.strip().lower() if isinstance(value, str) else value
    if text in CLASSES:
        return CLASSES.index(text)
    if text in ("-", "", "-1", -1, None):
        return None
    if isinstance(text, str) and text.isdigit():
        text = int(text)
    if isinstance(text, int) and not isinstance(text, bool) and 0 <= text < 3:
        return text
    raise ValueError(f"label {value!r} is none of {', '.join(CLASSES)}, 0-2, or unlabelled ('-', -1)")


def read_file(path):
    """(premise, hypothesis, label or None) of every example in one TSV or jsonl file."""
    if path.endswith(".tsv"):
        with open(path, encoding="utf-8", newline="") as f:
            rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)  # GLUE's TSVs have unbalanced quotes
            header = next(rows, [])
            missing = [c for c in ("sentence1", "sentence2", "gold_label") if c not in header]
            if missing:
                raise PrepareError(f"{path}: no {', '.join(missing)} column (GLUE MNLI TSV expected)")
            cols = [header.index(c) for c in ("sentence1", "sentence2", "gold_label")]
            for n, row in enumerate(rows, 2):
                if len(row) <= max(cols):
                    raise PrepareError(f"{path} line {n}: {len(row)} columns, the header has {len(header)}")
                try:
                    label = label_index(row[cols[2]])
                except ValueError as e:
                    raise PrepareError(f"{path} line {n}: {e}")
                yield row[cols[0]], row[cols[1]], label
        return
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                example = (rec["premise"] if "premise" in rec else rec["sentence1"],
                           rec["hypothesis"] if "hypothesis" in rec else rec["sentence2"],
                           rec["label"] if "label" in rec else rec["gold_label"])
            except (ValueError, KeyError, TypeError) as e:
                raise PrepareError(f"{path} line {n}: not a JSON object with premise, hypothesis and label ({e})")
            try:
                yield example[0], example[1], label_index(example[2])
            except ValueError as e:
                raise PrepareError(f"{path} line {n}: {e}")


def hub_examples():
    """{split: examples} from nyu-mll/glue mnli; PrepareError (one line) where the hub is unreachable."""
    try:
        from datasets import load_dataset  # only this path needs it
        glue = load_dataset("nyu-mll/glue", "mnli")
    except Exception as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise PrepareError(f"could not load nyu-mll/glue mnli from the Hugging Face hub ({why}); offline, "
                           f"pass GLUE's MNLI files: --input DIR with train.tsv, dev_matched.tsv and "
                           f"dev_mismatched.tsv (or .jsonl with premise, hypothesis, label)")
    return {split: [(r["premise"], r["hypothesis"], label_index(r["label"])) for r in glue[hub]]
            for split, hub in HUB_SPLITS.items()}


class Renderer:
    """Examples -> token ids; a prompt longer than max_len - 1 (room for the label word) loses the
    start of its premise, and one that does not fit even so is dropped."""

    def __init__(self, enc, max_len):
        self.enc, self.max_len = enc, max_len
        self.label_ids = [enc.encode_ordinary(w) for w in WORDS]
        assert all(len(ids) == 1 for ids in self.label_ids), "each label word must be one GPT-2 token"
        self.label_ids = [ids[0] for ids in self.label_ids]
        self.truncated = self.dropped = self.unlabelled = 0

    def prompt(self, premise, hypothesis):
        # encoded in two pieces (the premise, then the rest from "\n") so the premise can be cut token-wise;
        # the pieces meet at a newline, where GPT-2's BPE splits anyway: the same ids as the whole text
        head = self.enc.encode_ordinary(premise.strip())
        tail = self.enc.encode_ordinary(TEMPLATE.format(premise="", hypothesis=hypothesis.strip()))
        room = self.max_len - 1 - len(tail)  # the label token must fit too
        if room < 0:
            self.dropped += 1
            return None
        if len(head) > room:
            self.truncated += 1
            head = head[len(head) - room:]
        return head + tail

    def render(self, examples):
        """-> [(prompt ids, label)] of the labelled examples that fit."""
        out = []
        for premise, hypothesis, label in examples:
            if label is None:
                self.unlabelled += 1
                continue
            ids = self.prompt(premise, hypothesis)
            if ids is not None:
                out.append((ids, label))
        return out

    def stream(self, rendered):
        """Examples as one token stream: prompt, label word, <|endoftext|>."""
        return np.array([t for ids, label in rendered for t in (*ids, self.label_ids[label], EOT)], dtype=np.uint16)


def label_set(rendered):
    """The arrays label_eval.py reads: tokens (N, width) int32 right-padded with EOT, answer_pos (N,), label (N,)."""
    width = max(len(ids) for ids, _ in rendered)
    tokens = np.full((len(rendered), width), EOT, dtype=np.int32)
    for i, (ids, _) in enumerate(rendered):
        tokens[i, :len(ids)] = ids
    answer_pos = np.array([len(ids) - 1 for ids, _ in rendered], dtype=np.int64)
    return dict(tokens=tokens, answer_pos=answer_pos, label=np.array([l for _, l in rendered], dtype=np.int64))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--input", nargs="+", help="a GLUE MNLI directory or its .tsv / .jsonl files instead of the hub")
    parser.add_argument("--out_dir", default="", help="where to write (default: next to this script)")
    parser.add_argument("--max_len", type=int, default=1024, help="the longest rendered example, label included")
    args = parser.parse_args(argv)
    if args.max_len < 16:
        fail(f"--max_len={args.max_len} is too short for the template (at least 16)")
    try:
        enc = gpt2_encoding()
        if args.input:
            files = local_files(args.input)
            examples = {split: [e for path in paths for e in read_file(path)] for split, paths in files.items()}
            source = ", ".join(f"{split}: {' '.join(map(os.path.basename, files[split]))}" for split in SPLITS if split in files)
        else:
            examples, source = hub_examples(), "nyu-mll/glue mnli"
    except PrepareError as e:
        fail(e)
    renderer = Renderer(enc, args.max_len)
    rendered = {split: renderer.render(examples[split]) for split in SPLITS if split in examples}
    for split in ("train", "val_matched"):
        if not rendered[split]:
            fail(f"no labelled {split} example fits --max_len={args.max_len}")
    out = output_dir(args.out_dir, os.path.dirname(os.path.abspath(__file__)))
    print(f"source: {source}")
    for split, name in (("train", "train.bin"), ("val_matched", "val.bin")):
        ids = renderer.stream(rendered[split])
        write_tokens(ids, os.path.join(out, name))
        print(f"{name}: {len(rendered[split]):,} {split} examples, {len(ids):,} tokens")
    for split in ("val_matched", "val_mismatched"):
        if not rendered.get(split):
            stale = os.path.join(out, f"{split}.npz")
            if os.path.exists(stale):  # an earlier prepare's: training would report it as this data's
                os.remove(stale)
            print(f"{split}: no examples given, no {split}.npz")
            continue
        arrays = label_set(rendered[split])
        with open(os.path.join(out, f"{split}.npz.tmp"), "wb") as f:  # renamed when whole, as write_tokens does
            np.savez(f, **arrays)
        os.replace(os.path.join(out, f"{split}.npz.tmp"), os.path.join(out, f"{split}.npz"))
        counts = np.bincount(arrays["label"], minlength=3)
        print(f"{split}.npz: {len(arrays['label']):,} prompts, longest {arrays['tokens'].shape[1]} tokens, "
              f"mean {arrays['answer_pos'].mean() + 1:.1f}; labels {dict(zip(CLASSES, counts.tolist()))}")
    with open(os.path.join(out, "labels.json.tmp"), "w") as f:
        json.dump({"classes": list(CLASSES), "words": list(WORDS), "token_ids": renderer.label_ids,
                   "template": TEMPLATE}, f, indent=1)
    os.replace(os.path.join(out, "labels.json.tmp"), os.path.join(out, "labels.json"))
    print(f"labels: {dict(zip(CLASSES, WORDS))} = token ids {renderer.label_ids}; --max_len={args.max_len}: "
          f"{renderer.truncated:,} premises cut from their start, {renderer.dropped:,} examples dropped, "
          f"{renderer.unlabelled:,} unlabelled skipped -> {out}")


if __name__ == "__main__":
    main()
