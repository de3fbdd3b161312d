"""Converting trained models between patterns, init_from weights (checkpoints, GPT-2) and schedules."""

import json
import os

import pytest
import torch
from torch.nn import functional as F

import checkpoint as ckpt
from bench.harness import run_tool, run_train
from conftest import TINY, assert_one_line_error
from model import GPT, GPTConfig, parse_block_schedule, pattern_at
from test_model import SMALL, batch, make, randomize, reference_forward, rel_err

TP4 = dict(n_layer=4, tp_size=2, block_types="tp")


def save_checkpoint(model, path, iter_num=7):
    """A checkpoint as train.py writes it (the parts init_from reads)."""
    args = {k: getattr(model.config, k) for k in ("n_layer", "n_head", "n_embd", "block_size", "bias", "dropout",
                                                  "tp_size", "block_types", "vocab_size")}
    torch.save({"model": model.state_dict(), "model_args": args, "iter_num": iter_num, "config": {}}, path)


@pytest.mark.parametrize("pattern, tp_size", [("parallel,spd", 2), ("spd", 2), ("tp", 4), ("parallel", 1)])
def test_conversion_keeps_the_weights_bit_identical(tmp_path, pattern, tp_size):
    source = make(**TP4)
    randomize(source)
    path = str(tmp_path / "ckpt.pt")
    save_checkpoint(source, path)
    weights = ckpt.read_weights(path)
    assert weights.shape == dict(n_layer=4, n_head=4, n_embd=32, block_size=16, bias=True, vocab_size=37)
    target = make(seed=9, n_layer=4, tp_size=tp_size, block_types=pattern)
    optimizer = target.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    text = ckpt.init_weights(weights, target, optimizer, target.comm, init_optimizer=False)
    assert path in text and "tp x4" in text and "fresh optimizer" in text
    expected = source.dense_state_dict()
    got = target.dense_state_dict() if tp_size > 1 else target.state_dict()
    for name, tensor in expected.items():  # a re-cut of every shard: the same numbers, bit for bit
        assert torch.equal(got[name], tensor), name
    if tp_size == 2:  # the same tp_size: even the sim layout (stacked shards) is the same
        for name, tensor in source.state_dict().items():
            assert torch.equal(target.state_dict()[name], tensor), name


def test_set_block_types_touches_no_weight_and_recounts():
    model = make(**TP4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert model.set_block_types("spd,parallel") and model.sync_points == 3
    assert not model.set_block_types("spd,parallel")  # no change: nothing switched
    assert [b.kind for b in model.transformer.h] == ["spd", "parallel"] * 2
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    idx, targets = batch()
    model.comm.counter.reset()
    model(idx, targets)[1].backward()
    assert model.comm.counter.forward == model.comm.counter.backward == 3


@pytest.mark.parametrize("kind", ["spd", "parallel"])
@pytest.mark.parametrize("block", [0, 2, 3])
def test_one_block_conversion_changes_only_that_block(kind, block):
    """Block `block` of a trained tp model becomes `kind`: the hand-written reference of exactly that
    pattern (tests/test_model.py), and every block before it computes bit for bit what it did."""
    dense = make(n_layer=4)
    randomize(dense, seed=3)
    model = make(**TP4)
    model.load_dense_state_dict(dense.state_dict())
    idx, _ = batch()
    outputs = []
    hooks = [b.register_forward_hook(lambda m, i, o: outputs.append(o[0].clone())) for b in model.transformer.h]
    with torch.no_grad():
        model(idx, idx)
        kinds = ["tp"] * 4
        kinds[block] = kind
        model.set_block_types(kinds)
        logits, _ = model(idx, idx)
        expected = reference_forward(dense.state_dict(), kinds, 2, SMALL["n_head"], idx)
    for h in hooks:
        h.remove()
    assert rel_err(logits, expected) < 1e-5
    tp_out, converted = outputs[:4], outputs[4:]
    for i in range(block):
        assert torch.equal(tp_out[i], converted[i]), i
    if kind == "spd":  # a parallel block's own output is the unsynchronised b: compare after its sync
        assert rel_err(converted[block], tp_out[block]) > 1e-4


def test_schedules_parse_and_say_what_is_wrong():
    schedule = parse_block_schedule("0:tp;300:spd; 450:parallel,spd", 4)
    assert [s for s, _ in schedule] == [0, 300, 450]
    assert pattern_at(schedule, 299) == ("tp",) * 4 and pattern_at(schedule, 300) == ("spd",) * 4
    assert pattern_at(schedule, 10 ** 6) == ("parallel", "spd") * 2
    for bad, message in [("300:tp", "must start at iteration 0"), ("0:tp;5:spd;5:tp", "iterations increase"),
                         ("0:tp;spd", "is not iteration:pattern"), ("0:tp;x:spd", "is not iteration:pattern"),
                         ("0:tpp", "^block_schedule: unknown block type 'tpp'"), ("0:tp,spd,spd", "does not tile n_layer=4")]:
        with pytest.raises(ValueError, match=message):
            parse_block_schedule(bad, 4)
    with pytest.raises(ValueError, match="^block_types: unknown block type 'tpp'"):  # train.py's schedule of block_types
        parse_block_schedule("0:tpp", 4, "block_types")


def records(out_dir):
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


SCHEDULE = "--block_schedule=0:tp;4:spd;7:parallel,spd"  # 8, then 4, then 2 syncs (4 layers)


@pytest.mark.slow
def test_a_schedule_switches_counts_and_resumes_exactly(char_data, tmp_path):
    common = [*TINY, f"--data_dir={char_data}", "--always_save_checkpoint=True", "--eval_interval=3",
              SCHEDULE, "--lr_decay_iters=10"]
    straight, broken = str(tmp_path / "straight"), str(tmp_path / "broken")
    result = run_train(*common, "--max_iters=10", f"--out_dir={straight}")
    assert result.returncode == 0, result.stderr
    assert "blocks: schedule 0: tp x4 (8 syncs); 4: spd x4 (4 syncs); 7: [parallel,spd] x2 (2 syncs)" in result.stdout
    assert "iter 4: blocks -> spd x4, 4 syncs" in result.stdout
    steps = {r["iter"]: r for r in records(straight) if "val_loss" not in r}
    for it, r in steps.items():  # the analytic count and the counter follow the pattern in force
        assert r["sync_points"] == r["syncs_measured"] == (8 if it < 4 else 4 if it < 7 else 2), r
    # interrupted at 6 (after the first switch, before the second), resumed to 10: the same log
    assert run_train(*common, "--max_iters=6", f"--out_dir={broken}").returncode == 0
    second = run_train(*common, "--max_iters=10", "--init_from=resume", f"--out_dir={broken}")
    assert second.returncode == 0, second.stderr
    assert "sync points: 4 per pass" in second.stdout.splitlines()[0]  # spd in force at iteration 6
    drop = ("ms_per_iter", "tokens_per_s", "mfu", "time_s")
    assert [{k: v for k, v in r.items() if k not in drop} for r in records(broken)] == \
           [{k: v for k, v in r.items() if k not in drop} for r in records(straight)]
    # a changed schedule on resume is refused, naming both
    assert_one_line_error(run_train(*common[:-2], "--block_types=tp", "--max_iters=12", "--init_from=resume",
                                    f"--out_dir={broken}"),
                          "block_schedule='0:tp;4:spd;7:parallel,spd'", "block_schedule=''")


@pytest.mark.slow
def test_init_from_a_checkpoint_starts_a_new_run_under_another_pattern(char_data, tmp_path):
    common = [*TINY, f"--data_dir={char_data}", "--max_iters=4"]
    source = str(tmp_path / "source")
    assert run_train(*common, "--block_types=tp", f"--out_dir={source}").returncode == 0
    # resume continues the same run: another pattern is refused, naming both (init_from=<path> is the way)
    assert_one_line_error(run_train(*common, "--block_types=spd", "--init_from=resume", f"--out_dir={source}"),
                          "has block_types=tp x4,", "this config has block_types=spd x4", "init_from=<its ckpt.pt>")
    # zero-shot: the converted model, evaluated once
    new = str(tmp_path / "new")
    result = run_train(*common, f"--init_from={source}/ckpt.pt", "--block_types=parallel,spd", f"--out_dir={new}")
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert "sync points: 2 per pass" in first and f"weights: {source}/ckpt.pt (iter 4, blocks tp x4" in first
    assert records(new)[0]["iter"] == 0  # a new run: its own log, iterations and optimizer
    # a new run never writes into a directory that holds a checkpoint, its source's included
    assert_one_line_error(run_train(*common, f"--init_from={source}", f"--out_dir={source}"), "ckpt.pt exists")
    assert_one_line_error(run_train(*common, f"--init_from={source}", "--init_optimizer=True", "--tp_size=4",
                                    f"--out_dir={tmp_path / 'x'}"), "init_optimizer=True needs")
    assert run_train(*common, f"--init_from={source}", "--init_optimizer=True", "--block_types=spd",
                     f"--out_dir={tmp_path / 'y'}").returncode == 0


def test_init_from_refuses_a_given_shape_the_weights_contradict(tmp_path):
    """The weights decide n_layer, n_head, n_embd and bias: one that a config file or --key gave otherwise is
    one line naming both values, not replaced unseen; not given (train.py's default), it is replaced."""
    source = make(**TP4)
    save_checkpoint(source, str(tmp_path / "ckpt.pt"))
    config = dict(out_dir=str(tmp_path / "new"), init_from=str(tmp_path / "ckpt.pt"), eval_only=False, block_size=16,
                  n_layer=12, n_head=4, n_embd=64, bias=True, n_experts=0)
    with pytest.raises(ckpt.CheckpointError, match=r"has n_embd=32, this config sets n_embd=64: the weights decide"):
        ckpt.new_run_weights(dict(config), 37, given={"n_embd"})
    replaced = dict(config)
    ckpt.new_run_weights(replaced, 37, given={"n_head", "bias", "block_size"})  # the same values: no conflict
    assert (replaced["n_layer"], replaced["n_embd"]) == (4, 32)


@pytest.mark.parametrize("args, message", [
    (["--init_from=no/such/ckpt.pt"], "init_from='no/such/ckpt.pt': allowed values are"),
    (["--block_schedule=0:tp;3"], "block_schedule: '3' in '0:tp;3' is not iteration:pattern"),
    (["--block_schedule=10:tp"], "must start at iteration 0"),
    (["--block_schedule=0:tp;5:spdd"], "unknown block type 'spdd'"),
])
@pytest.mark.slow
def test_bad_inputs_are_one_line_errors(char_data, tmp_path, args, message):
    assert_one_line_error(run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", *args), message)


@pytest.mark.slow
def test_a_file_that_is_not_a_checkpoint_is_one_line(char_data, tmp_path):
    bogus = tmp_path / "ckpt.pt"
    bogus.write_text("not a checkpoint")
    assert_one_line_error(run_train(*TINY, f"--data_dir={char_data}", f"--init_from={bogus}",
                                    f"--out_dir={tmp_path / 'out'}"), "is not a readable checkpoint")


def test_transformers_gpt2_gives_the_same_logits(tmp_path):
    transformers = pytest.importorskip("transformers")
    hf_config = transformers.GPT2Config(n_layer=3, n_embd=32, n_head=4, vocab_size=101, n_positions=32,
                                        activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0,
                                        attn_pdrop=0.0)
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(hf_config).eval()
    with torch.no_grad():  # non-zero biases and gains everywhere, so a missed transpose or bias shows
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    hf.save_pretrained(str(tmp_path))
    weights = ckpt.read_weights(str(tmp_path))
    assert weights.shape == dict(n_layer=3, n_head=4, n_embd=32, block_size=32, bias=True, vocab_size=101)
    idx = torch.randint(101, (2, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(idx).logits
    for tp_size in (1, 2, 4):
        model = GPT(GPTConfig(**weights.shape, tp_size=tp_size, block_types="tp"))
        optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
        ckpt.init_weights(weights, model, optimizer, model.comm, init_optimizer=False)
        with torch.no_grad():
            logits, _ = model(idx, idx)
        assert rel_err(logits, expected) < 1e-5, tp_size
    # shorter contexts crop the position embeddings, as nanoGPT does
    model = GPT(GPTConfig(**dict(weights.shape, block_size=16), tp_size=2, block_types="spd"))
    ckpt.init_weights(weights, model, model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu"), model.comm, False)
    assert torch.equal(model.transformer.wpe.weight, weights.dense["transformer.wpe.weight"][:16])


def test_sensitivity_of_pretrained_gpt2(char_data, tmp_path):
    """bench/sensitivity.py on pretrained GPT-2 weights (a save_pretrained directory, as init_from takes it):
    its all-tp loss at TP=2 is the transformers model's own loss on the same sample, and the greedy
    patterns convert the least sensitive blocks first."""
    transformers = pytest.importorskip("transformers")
    from bench.sensitivity import val_sample
    hf_config = transformers.GPT2Config(n_layer=4, n_embd=32, n_head=4, vocab_size=101, n_positions=32,
                                        activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(hf_config).eval()
    source = tmp_path / "gpt2-tiny"
    hf.save_pretrained(str(source))
    out = tmp_path / "out"
    result = run_tool("bench.sensitivity", str(source), "--tp_size=2", "--eval_batches=2", "--batch_size=3",
                      f"--data_dir={char_data}", f"--out={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    with open(out / "gpt2-tiny.json") as f:
        study = json.load(f)
    sample = val_sample(char_data, 32, 2, 3, 0)
    with torch.no_grad():
        expected = sum(F.cross_entropy(hf(w[:, :-1]).logits.flatten(0, 1), w[:, 1:].flatten()).item()
                       for w in sample) / 2
    assert abs(study["base"] - expected) < 1e-5
    assert len(study["delta"]["spd"]) == 4 and sorted(study["ranking"]) == [0, 1, 2, 3]
    assert study["ranking"] == sorted(range(4), key=lambda i: study["delta"]["spd"][i])
    greedy = [r for r in study["patterns"] if r["family"] == "greedy"]
    assert [r["syncs"] for r in greedy] == [8, 6, 5, 4]  # 2n, 2n-2, n+1 (only the most sensitive block tp), n
    for r in greedy:
        spd = {i for i, kind in enumerate(r["kinds"]) if kind == "spd"}
        assert spd == set(study["ranking"][:8 - r["syncs"]]) and r["kinds"].count("tp") == r["syncs"] - 4
    bad = run_tool("bench.sensitivity", str(source), "--tp_size=3", f"--data_dir={char_data}", f"--out={out}")
    assert_one_line_error(bad, "n_head=4 is not divisible by tp_size=3")
