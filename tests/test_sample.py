"""sample.py on a tiny trained TP checkpoint: prompt kept, length, seeding, greedy, user errors."""

import os
import sys

import pytest

from bench.harness import run, run_train
from conftest import ROOT, TINY, assert_one_line_error

pytestmark = pytest.mark.slow  # end-to-end runs of sample.py: the full suite, not the fast tier

SEP = "---------------"


def sample(*args):
    return run([sys.executable, os.path.join(ROOT, "sample.py"), "--device=cpu", *args])


def samples(result):
    """The printed samples: the text between the header line and each separator."""
    assert result.returncode == 0, result.stderr
    body = result.stdout.split("\n", 1)[1]
    return [s.strip("\n") for s in body.split(SEP)[:-1]]


@pytest.fixture(scope="module")
def trained(char_data, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("sample") / "out")
    result = run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={out}", "--max_iters=30",
                       "--tp_size=2", "--block_types=parallel,spd", "--sync_fraction=0.5",
                       "--loss_model=bernoulli", "--loss_rate=0.05")  # a lossy run, sampled lossless
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.slow
@pytest.mark.timeout(300)  # 47 s with the cores shared four ways
def test_samples_continue_the_prompt_reproducibly(trained):
    args = [f"--out_dir={trained}", "--start=The king", "--num_samples=2", "--max_new_tokens=40"]
    first = sample(*args, "--seed=1")
    header = first.stdout.splitlines()[0]
    assert "iteration 30" in header and "[parallel,spd] x2" in header and "tp=2" in header, header
    assert "sync_fraction 0.5, lossless (the run's link: bernoulli)" in header, header  # what it reproduces, what not
    texts = samples(first)
    assert len(texts) == 2
    for text in texts:
        assert text.startswith("The king") and len(text) == len("The king") + 40, repr(text)
    assert samples(sample(*args, "--seed=1")) == texts  # seeded: the same samples again
    assert samples(sample(*args, "--seed=2")) != texts
    greedy = samples(sample(*args, "--seed=3", "--top_k=1"))
    assert greedy[0] == greedy[1]  # top_k=1 leaves no randomness


def test_prompt_from_a_file(trained, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("A fool loves")
    texts = samples(sample(f"--out_dir={trained}", f"--start=FILE:{prompt}", "--num_samples=1",
                           "--max_new_tokens=5"))
    assert texts[0].startswith("A fool loves") and len(texts[0]) == len("A fool loves") + 5


@pytest.mark.parametrize("args, needle", [
    (["--out_dir={missing}"], "ckpt.pt does not exist"),
    (["--out_dir={trained}", "--start=Zebra\u20ac"], "lacks: 'Z\u20ac'"),
    (["--out_dir={trained}", "--start=FILE:{missing}/p.txt"], "no such file"),
    (["--out_dir={trained}", "--temperature=0"], "temperature=0.0 must be > 0"),
    (["--out_dir={trained}", "--top_k=-1"], "top_k=-1 must be >= 0"),
    (["--out_dir={trained}", "--start=FILE:{latin1}"], "is not UTF-8 text (byte 1)"),
    (["--out_dir={trained}", "--start=FILE:{tmp}"], "a directory, not a file"),
    (["--out_dir={trained}", "--tempreature=1"], "did you mean 'temperature'"),
    (["--out_dir={trained}", "--num_samples=0"], "num_samples=0 must be at least 1"),
    (["--out_dir={trained}", "--device=gpu"], "device='gpu': allowed values"),  # not blamed on the checkpoint
])
def test_sample_mistakes_are_one_line_errors(trained, tmp_path, args, needle):
    missing, latin1 = str(tmp_path / "nothing"), tmp_path / "latin1.txt"
    latin1.write_bytes("Dönitz".encode("latin-1"))
    result = sample(*(a.format(trained=trained, missing=missing, latin1=latin1, tmp=tmp_path) for a in args))
    assert_one_line_error(result, needle)


def test_a_run_whose_tokenizer_is_gone_is_one_line(trained, tmp_path):
    """A char model whose data folder lost its meta.pkl: one line, not GPT-2's BPE decoding its ids."""
    import torch
    checkpoint = torch.load(os.path.join(trained, "ckpt.pt"), weights_only=False)
    checkpoint["config"]["data_dir"] = str(tmp_path / "moved")
    (tmp_path / "out").mkdir()
    torch.save(checkpoint, tmp_path / "out" / "ckpt.pt")
    assert_one_line_error(sample(f"--out_dir={tmp_path / 'out'}"), "meta.pkl is missing", "not GPT-2's")
    (tmp_path / "moved").mkdir()
    (tmp_path / "moved" / "meta.pkl").write_bytes(b"")  # a prepare run killed mid-write
    assert_one_line_error(sample(f"--out_dir={tmp_path / 'out'}"), "meta.pkl is not readable (EOFError)")
