"""A run that dies loses nothing, a resumed run is the same run, a mistake costs seconds.

Faults are injected with TP_SYNC_FAULT (see faults.py): a process killed halfway
through writing a checkpoint, a NaN loss, a rank that dies or hangs.
"""

import json
import os
import pickle
import shutil
import sys
import time

import numpy as np
import pytest
import torch

from bench.harness import records as harness_records
from bench.harness import run, run_train, torchrun
from conftest import ROOT, TINY, assert_one_line_error

TIMING = ("ms_per_iter", "tokens_per_s", "mfu", "time_s")


def records(out_dir, name="metrics.jsonl"):
    """What a run logged, without the wall-clock keys (they differ between two runs of one thing)."""
    return [{k: v for k, v in r.items() if k not in TIMING} for r in harness_records(out_dir, name)]


@pytest.mark.slow
def test_kill_during_save_keeps_the_previous_checkpoint(char_data, tmp_path):
    args = [*TINY, f"--data_dir={char_data}", "--eval_interval=5", "--always_save_checkpoint=True",
            "--max_iters=15", "--loss_model=bernoulli", "--loss_rate=0.05", "--packet_bytes=64"]
    straight, crashed = str(tmp_path / "straight"), str(tmp_path / "crashed")
    assert run_train(*args, f"--out_dir={straight}").returncode == 0
    killed = run_train(*args, f"--out_dir={crashed}", env={"TP_SYNC_FAULT": "kill_in_save:2"})
    assert killed.returncode == -9  # SIGKILL with the second checkpoint (iteration 10) half written
    assert os.path.getsize(os.path.join(crashed, "ckpt.pt.tmp")) > 0
    assert torch.load(os.path.join(crashed, "ckpt.pt"), weights_only=False)["iter_num"] == 5
    resumed = run_train(*args, f"--out_dir={crashed}", "--init_from=resume")
    assert resumed.returncode == 0, resumed.stderr
    assert records(crashed) == records(straight)  # bit for bit, lossy link streams included


@pytest.mark.slow
def test_corrupt_or_truncated_checkpoint_is_a_one_line_error(char_data, tmp_path):
    args = [*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--max_iters=10"]
    assert run_train(*args).returncode == 0
    path = os.path.join(tmp_path, "ckpt.pt")
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 3])
    assert_one_line_error(run_train(*args, "--init_from=resume"), "ckpt.pt is not a readable checkpoint")
    open(path, "wb").write(b"not a checkpoint at all")
    assert_one_line_error(run_train(*args, "--init_from=resume"), "ckpt.pt is not a readable checkpoint")
    torch.save(torch.zeros(3), path)  # a torch file, not a checkpoint
    assert_one_line_error(run_train(*args, "--init_from=resume"), "ckpt.pt is a torch file but not a checkpoint")


def test_a_foreign_checkpoint_is_a_one_line_error(tmp_path):
    """A checkpoint-shaped file whose weights are not this GPT's (upstream nanoGPT's compiled names)."""
    from checkpoint import CheckpointError, read_weights
    path = str(tmp_path / "ckpt.pt")
    args = dict(n_layer=1, n_head=2, n_embd=8, block_size=8, bias=False, vocab_size=10, dropout=0.0)
    torch.save({"model_args": args, "model": {"_orig_mod.transformer.wte.weight": torch.zeros(10, 8)}}, path)
    with pytest.raises(CheckpointError, match=r"ckpt.pt: its weights do not fit this project's GPT \(RuntimeError"):
        read_weights(path)


@pytest.mark.slow
def test_nonfinite_step_stops_the_run_and_keeps_the_last_good_checkpoint(char_data, tmp_path):
    args = [*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--eval_interval=5",
            "--always_save_checkpoint=True", "--max_iters=20"]
    result = run_train(*args, env={"TP_SYNC_FAULT": "nan_loss:7"})
    assert_one_line_error(result, "iteration 7: non-finite loss nan", "last checkpoint (iteration 5) is kept",
                          "--nonfinite=skip")
    checkpoint = torch.load(os.path.join(tmp_path, "ckpt.pt"), weights_only=False)
    assert checkpoint["iter_num"] == 5
    assert all(torch.isfinite(t).all() for t in checkpoint["model"].values())


@pytest.mark.slow
def test_nonfinite_step_can_be_skipped(char_data, tmp_path):
    args = [*TINY, f"--data_dir={char_data}", "--max_iters=12"]
    clean, skipped = str(tmp_path / "clean"), str(tmp_path / "skip")
    assert run_train(*args, f"--out_dir={clean}").returncode == 0
    result = run_train(*args, f"--out_dir={skipped}", "--nonfinite=skip", env={"TP_SYNC_FAULT": "nan_loss:7"})
    assert result.returncode == 0, result.stderr
    assert "iter 7: non-finite loss nan / gradient norm nan: step skipped (1 so far)" in result.stdout
    steps = {r["iter"]: r for r in records(skipped) if "val_loss" not in r}
    assert steps[6]["skipped_steps"] == 0 and steps[7]["skipped_steps"] == steps[11]["skipped_steps"] == 1
    clean_steps = {r["iter"]: r for r in records(clean) if "val_loss" not in r}
    assert steps[6]["train_loss"] == clean_steps[6]["train_loss"]  # identical until the fault
    assert all(r["grad_norm"] is not None for i, r in steps.items() if i != 7)


@pytest.mark.slow
def test_exact_resume_in_dist_mode(char_data, tmp_path):
    args = [*TINY, f"--data_dir={char_data}", "--tp_mode=dist", "--always_save_checkpoint=True",
            "--block_types=parallel,spd", "--loss_model=gilbert_elliott", "--ge_preset=heavy", "--packet_bytes=64"]
    straight, broken = str(tmp_path / "straight"), str(tmp_path / "broken")
    assert torchrun(2, *args, "--max_iters=20", f"--out_dir={straight}").returncode == 0
    assert torchrun(2, *args, "--max_iters=10", "--lr_decay_iters=20", f"--out_dir={broken}").returncode == 0
    second = torchrun(2, *args, "--max_iters=20", "--init_from=resume", f"--out_dir={broken}")
    assert second.returncode == 0, second.stderr[-2000:]
    assert records(broken) == records(straight)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["exit:3@1", "hang:3@1"])
def test_a_dead_or_hung_rank_ends_the_run_in_bounded_time(char_data, tmp_path, fault):
    start = time.time()
    result = torchrun(2, *TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--tp_mode=dist",
                      "--max_iters=50", "--dist_timeout_s=15", env={"TP_SYNC_FAULT": fault}, timeout=240)
    elapsed = time.time() - start
    assert result.returncode != 0
    assert elapsed < 120, elapsed  # not the 10-minute default, let alone forever
    if fault.startswith("hang"):  # the survivor's collective timed out and it said so in one line
        assert "error: rank 0: a collective failed, another rank died or hung (dist_timeout_s=15)" in result.stderr


# Each text as torch raises it (gloo's two measured here with torch 2.13; NCCL's from its messages).
PEER_LOST = ["[third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete",
             "[third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:30628. This is typically caused by a remote worker crashing.",
             "NCCL error in: ProcessGroupNCCL.cpp:1971, remote process exited or there was a network error, NCCL version 2.21.5\nncclRemoteError: A call failed"]
A_BUG = ["NCCL error in: ProcessGroupNCCL.cpp:1971, invalid usage (run with NCCL_DEBUG=WARN for details)\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
         "CUDA error: an illegal memory access was encountered (NCCL kernel)", "gloo does not support the dtype Float8_e4m3fn"]


@pytest.mark.parametrize("kind, text", [*((RuntimeError, t) for t in PEER_LOST), *((torch.distributed.DistBackendError, t) for t in PEER_LOST[2:]),
                                        (torch.distributed.DistNetworkError, "failed to recv, got 0 bytes"),
                                        *((RuntimeError, t) for t in A_BUG), (torch.distributed.DistBackendError, A_BUG[0]),
                                        (ValueError, "a plain mistake that says timeout")])
def test_only_a_lost_peer_ends_a_rank_with_the_one_line(monkeypatch, capsys, kind, text):
    """A failed collective is one line when a peer died or hung; any other error, an NCCL misuse
    included, keeps its traceback (a bug of this process, not of its peer)."""
    import faults
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored after the test
    monkeypatch.setattr(sys, "__excepthook__", lambda *a: print("traceback", file=sys.stderr))
    monkeypatch.setattr(os, "_exit", lambda code: sys.exit(f"exit {code}"))
    faults.report_failed_collectives(3, 15)
    try:
        sys.excepthook(kind, kind(text), None)
    except SystemExit as end:
        print(end.code, file=sys.stderr)
    lost = kind is torch.distributed.DistNetworkError or text in PEER_LOST
    first = text.splitlines()[0][-160:]
    expected = f"error: rank 3: a collective failed, another rank died or hung (dist_timeout_s=15): {first}\nexit 1\n"
    assert capsys.readouterr().err == (expected if lost else "traceback\n")


MISTAKE = """
import os, sys, time
import torch.distributed as dist
sys.path.insert(0, {root!r})
import faults
dist.init_process_group("gloo")
rank = dist.get_rank()
time.sleep({delays}[rank])  # a rank reaches the check later than its peer
if rank in {finders}:
    faults.fail("the mistake", grace_s=2)
time.sleep(60)  # a rank that did not find it: torchrun ends it when its peer exits
"""


@pytest.mark.parametrize("finders, delays, said", [  # the fast tier: the second (a peer alone finds it)
    pytest.param((0, 1), (1, 0), "error: the mistake", marks=pytest.mark.slow),  # both find it, rank 0 1 s behind (torchrun looks every 0.1 s)
    ((1,), (0, 0), "error: rank 1: the mistake")])  # only rank 1 finds it: it says it, after the grace
def test_a_mistake_found_under_torchrun_is_said_once(tmp_path, finders, delays, said):
    """The one-line error of a distributed run: torchrun kills every process once one exits with an
    error, so a rank 0 that is late must not lose its line to a peer that found the mistake first."""
    script = tmp_path / "mistake.py"
    script.write_text(MISTAKE.format(root=ROOT, delays=list(delays), finders=finders))
    result = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                  str(script)], timeout=120)
    assert result.returncode != 0
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [said], result.stderr[-2000:]


def test_a_peer_that_finds_a_mistake_before_the_process_group_waits_for_rank_0(monkeypatch, capsys):
    """train.py's config checks run before the process group, so a rank other than 0 has no store to wait on: it
    must not exit at once (torchrun would end rank 0 before it said the mistake), so it sleeps through the grace,
    in which torchrun ends it once rank 0 has exited with its line; still alive after it (rank 0 did not find the
    mistake), it says the mistake itself."""
    import faults
    slept = []
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setattr(faults.time, "sleep", slept.append)
    with pytest.raises(SystemExit) as end:
        faults.fail("the mistake", grace_s=7)
    assert end.value.code == 1 and slept == [7]
    assert capsys.readouterr().err == "error: rank 1: the mistake\n"


def test_run_info_traces_the_code_and_its_numerics_class(char_data, tmp_path, monkeypatch):
    """run_info.json names the commit (the caller's TP_SYNC_COMMIT where given: a copy's git metadata
    can be stale) and the numerics class a contrast must not mix: device, host model, ISA, dtype as
    resolved, TF32, deterministic kernels."""
    from provenance import cpu_model
    assert run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--max_iters=2").returncode == 0
    info = json.load(open(os.path.join(tmp_path, "run_info.json")))
    assert info["versions"]["torch"] == torch.__version__ and "numpy" in info["versions"]
    assert info["git_commit"] is None or len(info["git_commit"]) == 40
    assert info["git_commit_from"] == "checkout" and info["git_commit"] == info["checkout_commit"]
    assert info["git_dirty"] in (True, False, None) and info["argv"][0].endswith("train.py")
    assert info["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert info["numerics"] == {"device": "cpu", "host": cpu_model(), "dtype": "float32", "tf32": False,
                                "cpu_capability": torch.backends.cpu.get_cpu_capability(), "deterministic": False}
    assert cpu_model() != "cpu" or not os.path.exists("/proc/cpuinfo")
    assert torch.load(os.path.join(tmp_path, "ckpt.pt"), weights_only=False)["run_info"] == info
    # resumed, as if the first part had run on another host: run_info keeps that part (bench.summary pairs it with nothing)
    saved = torch.load(os.path.join(tmp_path, "ckpt.pt"), weights_only=False)
    saved["run_info"]["numerics"] = dict(info["numerics"], host="another CPU")
    torch.save(saved, os.path.join(tmp_path, "ckpt.pt"))
    assert run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--max_iters=3",
                     "--init_from=resume").returncode == 0
    resumed = json.load(open(os.path.join(tmp_path, "run_info.json")))
    assert resumed["numerics"] == info["numerics"] and [part["numerics"]["host"] for part in resumed["earlier_parts"]] == ["another CPU"]
    part = resumed["earlier_parts"][0]
    assert part["started"] == info["started"] and part["argv"] == info["argv"] and part["versions"] == info["versions"]
    assert (part["checkout_commit"], part["git_dirty"]) == (info["checkout_commit"], info["git_dirty"])
    given = tmp_path / "given"
    monkeypatch.setenv("TP_SYNC_COMMIT", "f" * 40)  # read by the run (provenance.describe_run): in this process too
    assert run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={given}", "--max_iters=1", "--deterministic=True").returncode == 0
    info = json.load(open(given / "run_info.json"))
    assert (info["git_commit"], info["git_commit_from"]) == ("f" * 40, "caller") and info["numerics"]["deterministic"]


def test_tf32_can_be_turned_off_for_a_full_float32_class():
    """tf32=False: float32 matmuls stay float32 on CUDA (the backend flags provenance.numerics_class reads)."""
    from step import set_numerics
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        set_numerics(False, tf32=False)
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        set_numerics(False)
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# --- the bad-input campaign: mistakes through the real entry points ---------------------

def prepare(name, *args):
    return run([sys.executable, os.path.join(ROOT, "data", name, "prepare.py"), *args])


def sweep(path, *args):
    return run([sys.executable, "-m", "bench.sweep", path, *args])


@pytest.fixture(scope="module")
def campaign(char_data, tmp_path_factory):
    """Files the mistakes need: a finished run, a config with a typo, short and foreign data."""
    base = tmp_path_factory.mktemp("campaign")
    run_dir = base / "run"
    assert run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={run_dir}", "--max_iters=4").returncode == 0
    (base / "typo.py").write_text("learning_rat = 1e-3\n")
    (base / "wrongtype.py").write_text("batch_size = 'large'\n")
    (base / "short").mkdir()
    for split in ("train", "val"):  # 10 tokens: shorter than any block
        (base / "short" / f"{split}.bin").write_bytes(bytes(20))
    (base / "foreign").mkdir()
    for split in ("train", "val"):  # GPT-2-sized ids where meta.pkl says 3 characters
        np.full(4096, 60000, dtype=np.uint16).tofile(base / "foreign" / f"{split}.bin")
    (base / "bad_sweep.py").write_text('name = "x"\nconfigs = ["config/train_shakespeare_char.py"]\nseedz = [1]\n')
    (base / "othervocab").mkdir()  # a char dataset with another alphabet than the run's
    for split in ("train", "val"):
        np.arange(4096, dtype=np.uint16).__mod__(100).astype(np.uint16).tofile(base / "othervocab" / f"{split}.bin")
    with open(base / "othervocab" / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": 100, "stoi": {}, "itos": {}}, f)
    (base / "otherdata").mkdir()  # the run's alphabet, other text: the first half of its files
    shutil.copy(os.path.join(char_data, "meta.pkl"), base / "otherdata")
    for split in ("train", "val"):
        tokens = np.fromfile(os.path.join(char_data, f"{split}.bin"), dtype=np.uint16)
        tokens[:len(tokens) // 2].tofile(base / "otherdata" / f"{split}.bin")
    assert run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={base / 'moe'}", "--max_iters=1",
                     "--n_experts=2", "--experts_top_k=1").returncode == 0
    (base / "top.py").write_text('include("base.py")\n')
    (base / "base.py").write_text("learning_rat = 1e-3\n")
    return base


def mistakes(data, c):
    """(what the user did, the entry point's result, words the one-line error must contain)"""
    base = [*TINY, f"--data_dir={data}", f"--out_dir={c}/scratch", "--max_iters=2"]
    run_dir = f"{c}/run"
    resume = [*TINY, f"--data_dir={data}", f"--out_dir={run_dir}", "--init_from=resume", "--max_iters=8"]
    return [
        ("unknown key in a config file", lambda: run_train(f"{c}/typo.py", *base), ["learning_rat", "learning_rate"]),
        ("unknown key on the CLI", lambda: run_train(*base, "--bach_size=4"), ["bach_size", "batch_size"]),
        ("wrong type on the CLI", lambda: run_train(*base, "--n_layer=2.5"), ["n_layer must be int"]),
        ("wrong type in a config file", lambda: run_train(f"{c}/wrongtype.py", *base), ["batch_size must be int"]),
        ("malformed argument", lambda: run_train(*base, "max_iters=3"), ["malformed argument"]),
        ("bad block type", lambda: run_train(*base, "--block_types=tp,sdp"), ["unknown block type 'sdp'"]),
        ("pattern not tiling n_layer", lambda: run_train(*base, "--block_types=tp,tp,spd"), ["does not tile n_layer=4"]),
        ("n_head not divisible by tp_size", lambda: run_train(*base, "--tp_size=3"), ["n_head=4", "tp_size=3"]),
        ("n_embd not divisible by n_head", lambda: run_train(*base, "--n_embd=30"), ["n_embd=30", "n_head=4"]),
        ("loss rate out of range", lambda: run_train(*base, "--loss_model=bernoulli", "--loss_rate=1.5"),
         ["loss_rate=1.5"]),
        ("unknown preset", lambda: run_train(*base, "--loss_model=gilbert_elliott", "--ge_preset=wifi"),
         ["ge_preset='wifi'", "bursty"]),
        ("a lossy link with one rank", lambda: run_train(*base, "--loss_model=bernoulli", "--tp_size=1"),
         ["needs tp_size > 1"]),
        ("bad choice of value", lambda: run_train(*base, "--nonfinite=ignore"), ["nonfinite='ignore'", "'skip'"]),
        ("missing data directory", lambda: run_train(*base, f"--data_dir={c}/nowhere"),
         ["train.bin not found", "holds no prepared data"]),
        ("train.bin shorter than block_size", lambda: run_train(*base, f"--data_dir={c}/short"),
         ["10 tokens", "block_size+1=33"]),
        ("data from another tokenizer", lambda: run_train(*base, f"--data_dir={c}/foreign"),
         ["token id 60000", "another tokenizer"]),
        ("vocab size mismatch between meta.pkl and the checkpoint",
         lambda: run_train(*resume, f"--data_dir={c}/othervocab"), ["vocab_size=", "vocab_size=100"]),
        ("resume with no checkpoint", lambda: run_train(*base, "--init_from=resume"), ["does not exist"]),
        ("resume with a different model shape", lambda: run_train(*resume, "--n_layer=8"),
         ["n_layer=4", "n_layer=8"]),
        ("a new run over a checkpoint", lambda: run_train(*TINY, f"--data_dir={data}", f"--out_dir={run_dir}"),
         ["ckpt.pt exists", "--init_from=resume"]),
        ("non-existent config file", lambda: run_train("config/train_gpt3.py"), ["train_gpt3.py", "does not exist"]),
        ("dist mode without torchrun", lambda: run_train(*base, "--tp_mode=dist"), ["torchrun"]),
        ("CUDA asked for on a CPU machine", lambda: run_train(*base, "--device=cuda"), ["CUDA is not available"]),
        ("a GPU index past the machine's", lambda: run_train(*base, "--device=cuda:3"), ["device='cuda:3' but", "; use --device=cpu"]),
        ("an unknown device", lambda: run_train(*base, "--device=mps"), ["device='mps': allowed values are"]),
        ("too small packets", lambda: run_train(*base, "--loss_model=bernoulli", "--packet_bytes=2"),
         ["packet_bytes=2"]),
        ("prepare: missing input", lambda: prepare("shakespeare_char", "--input", f"{c}/none.txt"), ["none.txt"]),
        ("prepare: bad val fraction", lambda: prepare("shakespeare", "--val_fraction=1.5"), ["--val_fraction=1.5"]),
        ("prepare: unsupported file type", lambda: prepare("openwebtext", "--files", f"{c}/typo.py"), [".py"]),
        ("sweep: non-existent sweep file", lambda: sweep(f"{c}/none.py"), ["none.py", "does not exist"]),
        ("sweep: a directory for the sweep file", lambda: sweep(str(c)), ["is a directory", "a sweep's .py file"]),
        ("sweep: unknown key", lambda: sweep(f"{c}/bad_sweep.py"), ["seedz"]),
        ("resume on other data of the run's vocabulary", lambda: run_train(*resume, f"--data_dir={c}/otherdata"),
         ["was trained on data of", "init_from=<its ckpt.pt>"]),
        ("init_from a mixture of experts into dense MLPs", lambda: run_train(*base, f"--init_from={c}/moe"),
         ["has n_experts=2", "this config has n_experts=0"]),
        ("init_from weights of another width than the one given", lambda: run_train(*base, f"--init_from={run_dir}",
                                                                                  "--n_embd=64"),
         ["has n_embd=32, this config sets n_embd=64", "the weights decide"]),
        ("block_types beside a schedule that starts elsewhere", lambda: run_train(*base, "--block_types=tp",
                                                                               "--block_schedule=0:spd;1:tp"),
         ["block_types='tp' is not block_schedule='0:spd;1:tp''s first pattern"]),
        ("eval_only over a checkpoint without resume", lambda: run_train(*TINY, f"--data_dir={data}", f"--out_dir={run_dir}",
                                                                       "--eval_only=True"), ["random weights", "--init_from=resume"]),
        ("a mixture's key without a mixture", lambda: run_train(*base, "--experts_top_k=1"), ["experts_top_k=1", "n_experts=0"]),
        ("a typo in an included config file", lambda: run_train(f"{c}/top.py", *base), ["config file", "base.py", "learning_rat"]),
        ("an empty out_dir", lambda: run_train(*TINY, f"--data_dir={data}", "--out_dir="), ["out_dir=''"]),
        ("an out_dir that is a file", lambda: run_train(*TINY, f"--data_dir={data}", f"--out_dir={c}/typo.py"),
         ["typo.py' is a file, not a directory"]),
        ("backend nccl on a torch without CUDA", lambda: run_train(*base, "--backend=nccl"), ["backend='nccl'", "gloo"]),
    ]


@pytest.mark.slow
def test_bad_input_campaign(char_data, campaign):
    cases = mistakes(char_data, campaign)
    assert len(cases) >= 20
    if torch.cuda.is_available():  # on a GPU machine asking for CUDA is no mistake
        cases = [case for case in cases if "CUDA" not in case[0]]
    for what, attempt, needles in cases:
        result = attempt()
        try:
            assert_one_line_error(result, *needles)
        except AssertionError as e:
            raise AssertionError(f"{what}: {e}") from None


def test_sweep_runs_every_config_of_a_seed_before_the_next_seed(tmp_path):
    """A sweep stopped part-way must leave complete seeds (every config), which pairing needs."""
    path = tmp_path / "order.py"
    path.write_text('name = "order"\nconfigs = ["config/train_shakespeare_char_24comm.py", '
                    '"config/train_shakespeare_char_2comm.py"]\nseeds = [1, 2]\n')
    result = sweep(str(path), "--dry_run", f"--out={tmp_path}")
    assert result.returncode == 0, result.stderr
    ids = [line.split()[-1] for line in result.stdout.splitlines()[1:]]
    assert ids == ["shakespeare_char_24comm-s1", "shakespeare_char_2comm-s1",
                   "shakespeare_char_24comm-s2", "shakespeare_char_2comm-s2"]


@pytest.mark.slow
def test_a_resume_on_another_device_or_dtype_goes_on_with_a_note(char_data, tmp_path):
    """A lossy run's link streams saved on another device (a CUDA generator's state cannot be a CPU one's)
    start fresh, said in one line, instead of a traceback; a float16 run resuming a float32 checkpoint
    (no scaler state saved) starts its GradScaler fresh."""
    args = [*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--eval_interval=2", "--eval_iters=1",
            "--loss_model=bernoulli", "--loss_rate=0.05"]
    assert run_train(*args, "--max_iters=2").returncode == 0
    path = os.path.join(tmp_path, "ckpt.pt")
    checkpoint = torch.load(path, weights_only=False)
    assert checkpoint["link_device"] == "cpu"
    torch.save(dict(checkpoint, link_device="cuda"), path)
    result = run_train(*args, "--max_iters=4", "--init_from=resume")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "the checkpoint's link streams were drawn on cuda; streams start fresh" in result.stdout
    result = run_train(*args, "--max_iters=6", "--init_from=resume", "--dtype=float16")
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_torn_last_log_line_is_dropped_on_resume(tmp_path):
    """The interrupted run's last write may be torn (disk full, power): start_log drops it with the records
    after the checkpoint; a broken line before the last is no torn write, and stops the resume in one line."""
    import json
    from checkpoint import start_log
    log = tmp_path / "metrics.jsonl"
    log.write_text(json.dumps({"iter": 0}) + "\n" + json.dumps({"iter": 5}) + "\n" + '{"iter": 10, "train_lo')
    start_log(str(log), resume_iter=6)
    assert log.read_text() == json.dumps({"iter": 0}) + "\n" + json.dumps({"iter": 5}) + "\n"
    log.write_text('{"iter": 0\n' + json.dumps({"iter": 5}) + "\n")
    with pytest.raises(SystemExit, match=r"metrics.jsonl: line 1 is not a JSON record"):
        start_log(str(log), resume_iter=6)
