"""MNLI fine-tuning: data/mnli/prepare.py on small MNLI-format files, label_eval.py's accuracy on
hand-made logits, and a fine-tune of a tiny local transformers GPT-2 where lossless TP=2 equals TP=1."""

import contextlib
import json
import os
import random
import sys
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import label_eval
from bench.harness import records, run, run_script, run_train
from conftest import ROOT, assert_one_line_error
from model import GPT, GPTConfig
from step import Grid

sys.path.insert(0, os.path.join(ROOT, "data"))
from common import gpt2_encoding  # noqa: E402

LABEL_IDS = [6407, 16126, 10352]  # " True", " Neither", " False": entailment, neutral, contradiction
CLASSES = ["entailment", "neutral", "contradiction"]
GLUE_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
               "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"]


def examples(n, seed):
    """n (premise, hypothesis, class name) triples with a learnable rule: the hypothesis repeats the
    premise (entailment), negates it (contradiction) or says something else (neutral)."""
    rng = random.Random(seed)
    who, what = ["The king", "A fool", "My lord", "The queen"], ["sings", "sleeps", "runs", "reads"]
    out = []
    for _ in range(n):
        w, v = rng.choice(who), rng.choice(what)
        label = rng.choice(CLASSES)
        hyp = {"entailment": f"{w} {v}.", "contradiction": f"{w} never {v}.", "neutral": f"{w} is tall."}[label]
        out.append((f"{w} {v} at night, \"they say.", hyp, label))  # an unbalanced quote, as GLUE's TSVs have
    return out


def write_tsv(path, rows):
    with open(path, "w") as f:
        f.write("\t".join(GLUE_HEADER) + "\n")
        for i, (premise, hypothesis, label) in enumerate(rows):
            f.write("\t".join([str(i), "1", f"{i}n", "fiction", "(x)", "(x)", "(x)", "(x)", premise, hypothesis,
                               label, label]) + "\n")


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for premise, hypothesis, label in rows:  # the hub's form: the label as 0/1/2
            f.write(json.dumps({"premise": premise, "hypothesis": hypothesis, "label": CLASSES.index(label)}) + "\n")


def mnli_dir(base, n_train=60, n_val=5):
    """A GLUE-style MNLI directory: train.tsv (with one unlabelled '-' row), dev_matched.tsv,
    dev_mismatched.jsonl, and a test file prepare.py must skip."""
    base.mkdir(parents=True, exist_ok=True)
    write_tsv(base / "train.tsv", examples(n_train, 0) + [("No one agreed.", "Hm.", "-")])
    write_tsv(base / "dev_matched.tsv", examples(n_val, 1))
    write_jsonl(base / "dev_mismatched.jsonl", examples(n_val, 2))
    (base / "test_matched.tsv").write_text("index\tsentence1\tsentence2\n0\ta\tb\n")
    return base


def prepare(*args, env=None):
    script = os.path.join(ROOT, "data", "mnli", "prepare.py")
    return run([sys.executable, script, *args], env=env) if env else run_script(script, *args)


def test_prepare_writes_prompts_labels_and_tokens(tmp_path):
    src, out = mnli_dir(tmp_path / "glue"), tmp_path / "out"
    result = prepare("--input", str(src), "--out_dir", str(out))
    assert result.returncode == 0, result.stderr
    assert "1 unlabelled skipped" in result.stdout and "0 examples dropped" in result.stdout
    assert sorted(os.listdir(out)) == ["labels.json", "train.bin", "val.bin", "val_matched.npz", "val_mismatched.npz"]
    labels = json.load(open(out / "labels.json"))  # no meta.pkl: train.py would take GPT-2 BPE for a char vocabulary
    assert labels["token_ids"] == LABEL_IDS and labels["words"] == [" True", " Neither", " False"]
    enc = gpt2_encoding()
    for name, rows in (("val_matched", examples(5, 1)), ("val_mismatched", examples(5, 2))):
        arrays = np.load(out / f"{name}.npz")
        assert arrays["tokens"].dtype == np.int32 and arrays["tokens"].shape[0] == 5
        assert list(arrays["label"]) == [CLASSES.index(label) for _, _, label in rows]  # the word and the int agree
        for tokens, pos, (premise, hypothesis, _) in zip(arrays["tokens"], arrays["answer_pos"], rows):
            assert enc.decode(tokens[:pos + 1].tolist()) == \
                f"{premise}\nQuestion: {hypothesis} True, False or Neither?\nAnswer:"
            assert (tokens[pos + 1:] == 50256).all()  # right-padded after the last prompt token
    # train.bin: every labelled example, prompt + label word + <|endoftext|>; val.bin: dev_matched's
    train = np.fromfile(out / "train.bin", dtype=np.uint16)
    ends = np.flatnonzero(train == 50256)
    assert len(ends) == 60 and ends[-1] == len(train) - 1
    assert [int(train[e - 1]) for e in ends] == [LABEL_IDS[CLASSES.index(label)] for _, _, label in examples(60, 0)]
    val = np.fromfile(out / "val.bin", dtype=np.uint16)
    first = enc.decode(val[:np.flatnonzero(val == 50256)[0] + 1].tolist())
    premise, hypothesis, label = examples(5, 1)[0]
    assert first == f"{premise}\nQuestion: {hypothesis} True, False or Neither?\nAnswer:" \
                    f"{[' True', ' Neither', ' False'][CLASSES.index(label)]}<|endoftext|>"


def test_prepare_cuts_long_premises_from_their_start(tmp_path):
    src, out = mnli_dir(tmp_path / "glue"), tmp_path / "out"
    assert prepare("--input", str(src), "--out_dir", str(out)).returncode == 0  # an earlier val_mismatched.npz there
    long = [("one two three four five six seven eight nine ten " * 3 + "The end.", "It ends.", "entailment")]
    write_tsv(src / "dev_matched.tsv", long + examples(4, 1))
    result = prepare("--input", str(src / "train.tsv"), str(src / "dev_matched.tsv"), "--out_dir", str(out),
                     "--max_len", "24")
    assert result.returncode == 0, result.stderr
    assert "no val_mismatched.npz" in result.stdout and not os.path.exists(out / "val_mismatched.npz")
    arrays = np.load(out / "val_matched.npz")
    pos = int(arrays["answer_pos"][0])
    assert pos == 22  # prompt + label word = max_len
    text = gpt2_encoding().decode(arrays["tokens"][0, :pos + 1].tolist())
    assert text.endswith(" The end.\nQuestion: It ends. True, False or Neither?\nAnswer:") and not text.startswith("one")


def test_prepare_errors_are_one_line(tmp_path):
    src = mnli_dir(tmp_path / "glue")
    assert_one_line_error(prepare("--input", str(tmp_path / "nope")), "nope")
    assert_one_line_error(prepare("--input", str(src / "train.tsv")), "no dev_matched file")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "train.jsonl").write_text('{"premise": "a", "hypothesis": "b", "label": 0}\n[1, 2]\n')
    write_jsonl(tmp_path / "bad" / "dev_matched.jsonl", examples(2, 0))
    assert_one_line_error(prepare("--input", str(tmp_path / "bad")), "train.jsonl line 2")
    (tmp_path / "notes.tsv").write_text("a\tb\n")
    assert_one_line_error(prepare("--input", str(tmp_path / "notes.tsv")), "cannot tell its split")
    # a label that is neither a class nor unlabelled is named, not dropped as unlabelled
    (tmp_path / "bad" / "train.jsonl").unlink()
    write_tsv(tmp_path / "bad" / "train.tsv", examples(3, 0) + [("a", "b", "yes")])
    assert_one_line_error(prepare("--input", str(tmp_path / "bad")), "train.tsv line 5", "label 'yes'")
    (tmp_path / "bad" / "train.tsv").unlink()
    with open(tmp_path / "bad" / "train.jsonl", "w") as f:  # a float from a dataframe export
        f.write(json.dumps({"premise": "a", "hypothesis": "b", "label": 1.0}) + "\n")
    assert_one_line_error(prepare("--input", str(tmp_path / "bad")), "train.jsonl line 1", "label 1.0")
    # a test split is refused wherever "test" is in its name (a hub export's mnli_test_matched.jsonl)
    import importlib.util
    spec = importlib.util.spec_from_file_location("mnli_prepare", os.path.join(ROOT, "data", "mnli", "prepare.py"))
    mnli_prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mnli_prepare)
    assert mnli_prepare.split_of("latest_dev_matched.tsv") == "val_matched"  # "test" inside a word is no test split
    write_jsonl(tmp_path / "mnli_test_matched.jsonl", examples(2, 0))
    assert_one_line_error(prepare("--input", str(src / "train.tsv"), str(tmp_path / "mnli_test_matched.jsonl"),
                                  "--out_dir", str(tmp_path / "o")), "test split")
    # no local files and no hub: one line saying so and how to pass local files
    offline = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    assert_one_line_error(prepare("--out_dir", str(tmp_path / "o"), env=offline), "nyu-mll/glue", "--input DIR")


def test_choose_takes_the_largest_label_logit_and_the_first_on_ties():
    logits = torch.zeros(4, 50257)
    logits[:, 0] = 100.0  # the largest logit of all is no label word: it must not matter
    logits[0, LABEL_IDS] = torch.tensor([1.0, 3.0, 2.0])
    logits[1, LABEL_IDS] = torch.tensor([-1.0, -3.0, -0.5])
    logits[2, LABEL_IDS] = torch.tensor([2.0, 5.0, 5.0])  # a tie: the lower label index
    logits[3, LABEL_IDS] = 7.0  # all tied: entailment
    assert label_eval.choose(logits, torch.tensor(LABEL_IDS)).tolist() == [1, 2, 1, 0]


class StubStep:
    """What label_metrics needs of a train step; evaluate returns hand-made logits: each example (known
    by its first token, 100 + its index) has `margin` on the label it predicts at the answer position."""

    def __init__(self, predictions, vocab=16, label_ids=(3, 5, 7)):
        self.predictions, self.vocab, self.label_ids = predictions, vocab, label_ids
        self.module, self.grid, self.reports, self.calls = torch.nn.Linear(1, 1), Grid(), True, []
        self.comm, self.model = self, types.SimpleNamespace(head_float32=False)
        self.evaluating = lambda lossy=False: contextlib.nullcontext()

    def evaluate(self, X, Y):
        assert self.model.head_float32  # the label logits are float32 ones (model.py)
        self.calls.append((X.clone(), Y.clone()))
        logits = torch.zeros(*X.shape, self.vocab)
        for b, example in enumerate((X[:, 0] - 100).tolist()):
            logits[b, :, self.label_ids[self.predictions[example]]] = 2.0
        return logits, F.cross_entropy(logits.reshape(-1, self.vocab), Y.reshape(-1), ignore_index=-1)


def label_set(labels, answer_pos, width=12, label_ids=(3, 5, 7)):
    tokens = np.full((len(labels), width), 50256, dtype=np.int32)
    for i, pos in enumerate(answer_pos):
        tokens[i, :pos + 1] = 100 + i  # (a stand-in vocabulary above the stub's; the stub reads token 0 only)
    return dict(tokens=tokens, answer_pos=np.array(answer_pos), label=np.array(labels),
                label_ids=np.array(label_ids))


def test_label_metrics_counts_real_examples_only():
    labels, predictions = [0, 1, 2, 0, 1], [0, 1, 0, 1, 1]  # 3 of 5 right; example 0 right
    step = StubStep(predictions)
    prompts_5 = label_set(labels, [3, 5, 2, 7, 4])
    metrics = label_eval.label_metrics(step, {"val_matched": prompts_5}, 100, 4, 8, "cpu")
    # batches of 4: the second holds example 4 and three copies of example 0, which must not count
    assert metrics["val_matched_label_accuracy"] == pytest.approx(3 / 5)
    right, wrong = -np.log(np.exp(2) / (np.exp(2) + 15)), -np.log(1 / (np.exp(2) + 15))  # 16-token vocabulary
    assert metrics["val_matched_label_loss"] == pytest.approx((3 * right + 2 * wrong) / 5)
    assert [tuple(X.shape) for X, _ in step.calls] == [(4, 8), (4, 8)]
    X, Y = step.calls[1]
    assert (Y[1:] == -1).all()  # the copies score nothing
    assert Y[0].tolist() == [-1] * 4 + [5] + [-1] * 3  # example 4: its label's token at its answer position
    assert not step.model.head_float32  # training and the other evals keep the autocast head
    # the first n_examples only, the same at every eval
    again = label_eval.label_metrics(StubStep(predictions), {"val_matched": prompts_5}, 2, 4, 8, "cpu")
    assert again["val_matched_label_accuracy"] == 1.0


def test_under_bf16_the_label_logits_are_float32_and_do_not_tie():
    """Three label words whose head rows differ below bf16's 8 bits: the autocast head gives them one
    logit (argmax would always choose the first), the label eval's float32 head orders them."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=8, vocab_size=37, n_layer=2, n_head=4, n_embd=32, tp_size=2, block_types="spd")).eval()
    with torch.no_grad():  # rows 3, 5, 7: a bf16 row scaled by 1, 1 + 2^-12, 1 + 2^-11 (within half a bf16 step)
        model.lm_head.weight[3] = model.lm_head.weight[3].bfloat16().float()
        model.lm_head.weight[[5, 7]] = model.lm_head.weight[3] * torch.tensor([[1 + 2 ** -12], [1 + 2 ** -11]])
    X = torch.randint(8, 37, (4, 8))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        tied, _ = model(X)
        model.head_float32 = True
        apart, _ = model(X)
    assert tied.dtype == torch.bfloat16 and apart.dtype == torch.float32
    assert (tied[..., 3] == tied[..., 5]).all() and (tied[..., 5] == tied[..., 7]).all()
    z = apart[..., 3]  # a positive logit grows with the row's scale, a negative one shrinks
    up = torch.where(z > 0, 1.0, -1.0)
    assert ((apart[..., 7] - apart[..., 5]) * up > 0).all() and ((apart[..., 5] - apart[..., 3]) * up > 0).all()
    assert torch.allclose(apart, tied.float(), rtol=2 ** -7, atol=2 ** -6)  # the same head, more bits


def test_prompts_longer_than_the_block_keep_their_end():
    X, pos = label_eval.prompts(dict(tokens=np.arange(20, dtype=np.int32)[None].repeat(2, 0),
                                     answer_pos=np.array([15, 3])), 2, 8)
    assert X[0].tolist() == list(range(8, 16)) and pos.tolist() == [7, 3]
    assert X[1].tolist() == [0, 1, 2, 3] + [50256] * 4


def test_no_label_sets_for_other_datasets(tmp_path):
    assert label_eval.load(str(tmp_path)) == {} == label_eval.load(str(tmp_path), "shakespeare_char")
    assert label_eval.label_metrics(None, {}, 8, 4, 8, "cpu") == {}


def test_missing_or_cut_label_files_are_one_line_errors(tmp_path):
    """mnli without labels.json, labels.json without val_matched.npz, a cut-off npz: a PrepareError naming
    the file (train.py says it in one line), not a run without label metrics or a traceback at the first eval."""
    from data.common import PrepareError
    with pytest.raises(PrepareError, match="labels.json not found: run python data/mnli/prepare.py"):
        label_eval.load(str(tmp_path), "mnli")
    (tmp_path / "labels.json").write_text(json.dumps({"token_ids": LABEL_IDS}))
    with pytest.raises(PrepareError, match="val_matched.npz not found beside"):
        label_eval.load(str(tmp_path), "mnli")
    (tmp_path / "val_matched.npz").write_bytes(b"PK\x03\x04 cut off")
    with pytest.raises(PrepareError, match="val_matched.npz is not readable"):
        label_eval.load(str(tmp_path), "mnli")
    (tmp_path / "labels.json").write_text("{")
    with pytest.raises(PrepareError, match="labels.json is not readable"):
        label_eval.load(str(tmp_path), "mnli")


def test_lossless_tp2_fine_tune_equals_tp1(tmp_path):
    """A tiny transformers GPT-2 (GPT-2's real vocabulary) fine-tuned on prepared MNLI-format data: the
    eval records' label accuracy and losses of TP=2 (all tp blocks, lossless) are TP=1's."""
    transformers = pytest.importorskip("transformers")
    hf_config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=50257, n_positions=128,
                                        activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(hf_config).eval()
    hf.save_pretrained(str(tmp_path / "gpt2-tiny"))
    data = tmp_path / "data"
    assert prepare("--input", str(mnli_dir(tmp_path / "glue")), "--out_dir", str(data)).returncode == 0
    expected = {}  # the transformers model's own label accuracy and loss, before any step
    for split in ("val_matched", "val_mismatched"):
        arrays = np.load(data / f"{split}.npz")
        with torch.no_grad():
            logits = hf(torch.from_numpy(arrays["tokens"]).long()).logits[torch.arange(5), arrays["answer_pos"]]
        target = torch.tensor(LABEL_IDS)[arrays["label"]]
        chosen = logits[:, LABEL_IDS].argmax(-1)
        expected[f"{split}_label_accuracy"] = (chosen == torch.from_numpy(arrays["label"])).float().mean().item()
        expected[f"{split}_label_loss"] = F.cross_entropy(logits, target).item()
    common = [f"--init_from={tmp_path / 'gpt2-tiny'}", "--dataset=mnli", f"--data_dir={data}", "--block_size=64",
              "--batch_size=4", "--eval_iters=2", "--eval_interval=2", "--log_interval=1", "--max_iters=4",
              "--learning_rate=1e-3", "--warmup_iters=1", "--weight_decay=0", "--device=cpu", "--compile=False"]
    evals = {}
    for tp in ("--tp_size=1", "--tp_size=2"):
        result = run_train(*common, tp, "--block_types=tp", f"--out_dir={tmp_path / tp[2:]}")
        assert result.returncode == 0, result.stderr
        assert "matched label acc" in result.stdout
        evals[tp] = [r for r in records(str(tmp_path / tp[2:])) if "val_loss" in r]
    one, two = evals["--tp_size=1"], evals["--tp_size=2"]
    assert [r["iter"] for r in one] == [r["iter"] for r in two] == [0, 2, 4]
    for key, value in expected.items():
        assert one[0][key] == pytest.approx(value, rel=1e-5), key
    for a, b in zip(one, two):
        for split in ("val_matched", "val_mismatched"):  # 5 examples each: one batch of 4, one of 1 + 3 copies
            assert a[f"{split}_label_accuracy"] == b[f"{split}_label_accuracy"]
            assert a[f"{split}_label_accuracy"] in {k / 5 for k in range(6)}
            assert a[f"{split}_label_loss"] == pytest.approx(b[f"{split}_label_loss"], rel=1e-5)
        assert a["val_loss"] == pytest.approx(b["val_loss"], rel=1e-5)
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-5)
    assert one[-1]["val_matched_label_loss"] < one[0]["val_matched_label_loss"]  # the fine-tune learns
