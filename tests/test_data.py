"""The prepare scripts on tiny local inputs, the offline GPT-2 tokenizer, and their errors."""

import json
import os
import pickle
import sys

import numpy as np
import pytest

from bench.harness import run, run_script
from conftest import ROOT, assert_one_line_error, tiny_text

sys.path.insert(0, os.path.join(ROOT, "data"))


def prepare(name, *args):  # in this process, but openwebtext's (its worker processes)
    script = os.path.join(ROOT, "data", name, "prepare.py")
    return run([sys.executable, script, *args]) if name == "openwebtext" else run_script(script, *args)


def test_char_prepare_writes_nanogpt_format(char_data):
    text = tiny_text()
    meta = pickle.load(open(os.path.join(char_data, "meta.pkl"), "rb"))
    assert meta["vocab_size"] == len(set(text))
    train = np.fromfile(os.path.join(char_data, "train.bin"), dtype=np.uint16)
    val = np.fromfile(os.path.join(char_data, "val.bin"), dtype=np.uint16)
    assert len(train) + len(val) == len(text) and len(val) == len(text) - int(len(text) * 0.9)
    assert "".join(meta["itos"][int(i)] for i in train[:200]) == text[:200]
    assert 0 < meta["unigram_val_loss"] < np.log(meta["vocab_size"])


def test_gpt2_tokenizer_works_offline():
    from common import gpt2_encoding
    enc = gpt2_encoding()
    assert enc.encode("Hello world") == [15496, 995]
    assert enc.eot_token == 50256 and enc.n_vocab == 50257


def test_bpe_prepare(tmp_path):
    (tmp_path / "a.txt").write_text("Hello world. " * 300)
    result = prepare("shakespeare", "--input", str(tmp_path / "a.txt"), "--out_dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    train = np.fromfile(tmp_path / "out" / "train.bin", dtype=np.uint16)
    assert list(train[:2]) == [15496, 995]


@pytest.mark.slow
def test_openwebtext_prepare_on_local_files(tmp_path):
    docs = [f"Document number {i}. " + tiny_text(n_words=50, seed=i) for i in range(12)]
    for i, doc in enumerate(docs):
        (tmp_path / f"doc{i}.txt").write_text(doc)
    with open(tmp_path / "docs.jsonl", "w") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc}) + "\n")
    for inputs in ([str(tmp_path / f"doc{i}.txt") for i in range(12)], [str(tmp_path / "docs.jsonl")]):
        out = tmp_path / "out"
        result = prepare("openwebtext", "--files", *inputs, "--out_dir", str(out), "--num_proc", "2",
                         "--val_fraction", "0.1")
        assert result.returncode == 0, result.stderr
        train = np.fromfile(out / "train.bin", dtype=np.uint16)
        val = np.fromfile(out / "val.bin", dtype=np.uint16)
        assert (train == 50256).sum() == 11 and (val == 50256).sum() == 1  # one <|endoftext|> per document
        assert train[-1] == 50256 and val[-1] == 50256


def test_prepare_errors_are_one_line(tmp_path):
    assert_one_line_error(prepare("shakespeare_char", "--input", str(tmp_path / "nope.txt")), "nope.txt")
    (tmp_path / "one.txt").write_text("aaaa")
    assert_one_line_error(prepare("shakespeare_char", "--input", str(tmp_path / "one.txt"),
                                  "--out_dir", str(tmp_path)), "nothing to learn")
    (tmp_path / "x.csv").write_text("text\nhello\n")
    assert_one_line_error(prepare("openwebtext", "--files", str(tmp_path / "x.csv")), ".csv")
    # the hub out of reach (offline here by setting): one line that points to --files, not datasets' traceback
    offline = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    hub = run([sys.executable, os.path.join(ROOT, "data", "openwebtext", "prepare.py"), "--out_dir", str(tmp_path)], env=offline)
    assert_one_line_error(hub, "could not load Skylion007/openwebtext", "--files")


def test_a_step_draws_the_same_batches_at_any_data_parallel_layout(char_data):
    """A step of 4 micro-batches as dp 1 x 4, 2 x 2 and 4 x 1 draws one set of sequences (sim and dist
    differ in dp at one world size, and a pair of runs must see the same data); one rank draws what it drew
    before the global index (its seeds unchanged: the studies' runs resume as they ran)."""
    sys.path.insert(0, os.path.join(ROOT, "data"))
    from common import TRAIN_DATA, Batches, step_seed
    import torch
    drawn = {}
    for dp in (1, 2, 4):
        batches = [Batches(char_data, 3, 8, 7, rank, "cpu", 4 // dp)("train", 5, k) for rank in range(dp) for k in range(4 // dp)]
        drawn[dp] = sorted(tuple(x.tolist()) for x, _ in batches for x in x)
    assert drawn[1] == drawn[2] == drawn[4] and len(set(drawn[1])) > 1
    data = np.memmap(os.path.join(char_data, "train.bin"), dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - 8, (3,), generator=torch.Generator().manual_seed(step_seed(7, TRAIN_DATA, 0, 5, 2)))
    assert Batches(char_data, 3, 8, 7, 0, "cpu", 4)("train", 5, 2)[0][0].tolist() == data[int(ix[0]):int(ix[0]) + 8].tolist()


def test_read_prepared_names_what_is_missing_and_refuses_char_ids_without_their_tokenizer(char_data, tmp_path):
    """A dataset name with no prepare script lists the ones there are; the user's own data_dir is not told to run
    a prepare script that writes elsewhere; char-level ids without meta.pkl would be decoded as GPT-2 BPE."""
    import shutil
    from common import PrepareError, read_prepared
    assert read_prepared(char_data, "shakespeare_char", 16)["vocab_size"] > 0
    with pytest.raises(PrepareError, match=r"dataset='shakespeare-char' has no data/shakespeare-char/prepare.py: "
                                           r"allowed mnli, openwebtext, shakespeare, shakespeare_char"):
        read_prepared(os.path.join(ROOT, "data", "shakespeare-char"), "shakespeare-char", 16)
    with pytest.raises(PrepareError, match=r"data_dir='.*nowhere' holds no prepared data \(train.bin, val.bin\)$"):
        read_prepared(str(tmp_path / "nowhere"), "shakespeare_char", 16)
    bare = tmp_path / "bare"
    bare.mkdir()
    for split in ("train", "val"):
        shutil.copy(os.path.join(char_data, f"{split}.bin"), bare)
    with pytest.raises(PrepareError, match="no meta.pkl, yet its token ids all lie below 256"):
        read_prepared(str(bare), "shakespeare_char", 16)
    np.arange(1000, dtype=np.uint16).tofile(bare / "val.bin")  # an id of GPT-2's range: BPE data, no meta.pkl needed
    assert read_prepared(str(bare), "shakespeare_char", 16) == {}
