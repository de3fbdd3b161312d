"""
OpenWebText in GPT-2 BPE, in nanoGPT's format (about 9B train tokens: a 17 GB train.bin).

    python data/openwebtext/prepare.py --num_proc=16                # the Hugging Face dataset
    python data/openwebtext/prepare.py --files shards/*.parquet     # local parquet, jsonl or text files

Documents are shuffled into train and val (val_fraction of the documents), each is
encoded with encode_ordinary and ends with the <|endoftext|> token (50256).
"""

import argparse
import os
import sys

import numpy as np
from tqdm import tqdm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import PrepareError, fail, gpt2_encoding, output_dir  # noqa: E402

BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".txt": "text"}


def load_documents(args):
    try:
        from datasets import load_dataset
    except ImportError:
        fail("this script reads its documents with Hugging Face `datasets`: pip install datasets")
    if not args.files:
        try:
            return load_dataset(args.dataset, num_proc=args.num_proc)["train"]
        except Exception as e:  # offline, a gated or renamed dataset, a loading script newer `datasets` refuse
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
            fail(f"could not load {args.dataset} from the Hugging Face hub ({type(e).__name__}: {why}); pass the "
                 f"documents as local files instead: --files shards/*.parquet (or .jsonl / .txt), or --dataset another name")
    kinds = set()
    for path in args.files:
        if not os.path.isfile(path):
            fail(f"--files: {path!r} does not exist")
        ext = os.path.splitext(path)[1].lower()
        if ext not in BUILDERS:
            fail(f"--files: {path!r} has extension {ext!r}; allowed: {', '.join(BUILDERS)}")
        kinds.add(BUILDERS[ext])
    if len(kinds) > 1:
        fail(f"--files mixes {' and '.join(sorted(kinds))} files; give one kind at a time")
    kind = kinds.pop()
    extra = {"sample_by": "document"} if kind == "text" else {}  # a text file is one document
    docs = load_dataset(kind, data_files=list(args.files), split="train", **extra)
    if args.text_field not in docs.column_names:
        fail(f"--text_field={args.text_field!r} is not a column of {args.files[0]}; columns: {docs.column_names}")
    return docs


def write_split(dset, path):
    """Concatenate the tokenized documents of dset into one uint16 file (atomically)."""
    total = int(np.sum(dset["len"], dtype=np.uint64))
    tmp = path + ".tmp"
    arr = np.memmap(tmp, dtype=np.uint16, mode="w+", shape=(total,))
    n_shards = min(1024, len(dset))
    idx = 0
    for i in tqdm(range(n_shards), desc=f"writing {os.path.basename(path)}"):
        batch = dset.shard(num_shards=n_shards, index=i, contiguous=True).with_format("numpy")
        ids = np.concatenate(batch["ids"])
        arr[idx:idx + len(ids)] = ids
        idx += len(ids)
    arr.flush()
    del arr
    os.replace(tmp, path)
    return total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--files", nargs="+", help="local .parquet/.jsonl/.txt files instead of the hub dataset")
    parser.add_argument("--dataset", default="Skylion007/openwebtext", help="Hugging Face dataset name")
    parser.add_argument("--text_field", default="text")
    parser.add_argument("--num_proc", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--val_fraction", type=float, default=0.0005)
    parser.add_argument("--seed", type=int, default=2357)
    parser.add_argument("--out_dir", default="", help="where to write (default: next to this script)")
    args = parser.parse_args(argv)
    if args.num_proc < 1:
        fail(f"--num_proc={args.num_proc} must be at least 1")
    if not 0.0 < args.val_fraction < 1.0:
        fail(f"--val_fraction={args.val_fraction} must be in (0, 1)")
    try:
        enc = gpt2_encoding()
    except PrepareError as e:
        fail(e)

    docs = load_documents(args)
    if len(docs) < 2:
        fail(f"{len(docs)} document(s): need at least 2 to make a train and a val split")
    n_val = max(1, round(len(docs) * args.val_fraction))  # at least one val document
    split = docs.train_test_split(test_size=n_val, seed=args.seed, shuffle=True)
    split["val"] = split.pop("test")
    field = args.text_field

    def tokenize(example):
        ids = enc.encode_ordinary(example[field])
        ids.append(enc.eot_token)  # documents are separated by <|endoftext|>
        return {"ids": ids, "len": len(ids)}

    tokenized = split.map(tokenize, remove_columns=docs.column_names, desc="tokenizing",
                          num_proc=args.num_proc if len(docs) >= 2 * args.num_proc else None)
    out = output_dir(args.out_dir, os.path.dirname(os.path.abspath(__file__)))
    for name, dset in tokenized.items():
        n = write_split(dset, os.path.join(out, f"{name}.bin"))
        print(f"{name}: {len(dset):,} documents, {n:,} tokens -> {os.path.join(out, name + '.bin')}")


if __name__ == "__main__":
    main()
