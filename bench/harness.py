"""
The harness that bench scripts and tests share, so that a pattern, a link or a timed step
means the same thing in every measurement and every check:

- PATTERNS and LINKS: the block patterns and lossy links that runs are compared over;
- run, run_train, torchrun, records: launch train.py (one process or under torchrun; in the tests,
  in the test's process, or its ranks forked by ranks_here) and read back what it logged;
- build, random_batch, train_steps: a model, a fixed batch and timed AdamW steps, in process;
- draw, runs, standard_error: a link's loss flags and the statistics tests check them by.

Import it as `from bench.harness import ...` with the repository root on sys.path (the
bench scripts put it there; tests/conftest.py does for the tests).
"""

import faulthandler
import io
import json
import math
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from contextlib import nullcontext, redirect_stderr, redirect_stdout

import numpy as np
import torch

from step import clip_grad_norm_
from links import FWD, LINK_DEFAULTS, GilbertElliottLoss
from model import GPT, GPTConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The sync-count patterns (12 layers, TP=2) that every comparison covers: name -> block_types.
PATTERNS = {"24comm": "tp", "12comm": "spd", "6comm": "parallel,spd", "2comm": "parallel*5,spd"}

# The pipelined comparisons' patterns (12 layers): name -> (block_types, pp_split). The 24comm cut lies
# between tp blocks, the others inside a run of parallel blocks, where pending partials d cross it.
PIPELINE_CASES = {"24comm": ("tp", "6"), "7comm": ("spd,parallel", "2"), "2comm": ("parallel*5,spd", "3")}

# The links the comparisons run over, as link config keys (links.LINK_DEFAULTS). 64-byte
# packets and high loss rates, so that a short run of a narrow model loses many packets.
LINKS = {
    "lossless": dict(loss_model="none"),
    "bernoulli": dict(loss_model="bernoulli", loss_rate=0.05, packet_bytes=64),
    "gilbert_elliott": dict(loss_model="gilbert_elliott", ge_preset="heavy", packet_bytes=64),
}


def link_args(link):
    """A link config dict -> train.py's `--key=value` arguments, in the dict's order."""
    unknown = set(link) - set(LINK_DEFAULTS)
    assert not unknown, f"not link keys: {sorted(unknown)}"
    return [f"--{key}={value}" for key, value in link.items()]


# --- train.py as a subprocess ---------------------------------------------------------

def run(args, env=None, timeout=600):
    """Run a command (python scripts via this interpreter) in the repository root; capture its output.

    One thread per process (OMP_NUM_THREADS=1 unless env says otherwise): several processes
    share a few cores, and oversubscribed threads make timings and collectives crawl.
    timeout: a hung run fails its caller after 10 minutes; pass None for long benchmark runs.
    """
    # PYTHONFAULTHANDLER: a process ended by SIGABRT (a hung run, below) prints every thread's Python stack first
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1",
                **(env or {})}  # env wins
    # a session of its own: the command and everything it starts (torchrun's ranks) end together, below
    with subprocess.Popen(args, cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except BaseException:  # hung past timeout, or the test's time limit (pytest-timeout) or Ctrl-C stopped us
            end_hung([process.pid, *descendants(process.pid)])
            out, err = process.communicate()
            sys.stderr.write(f"harness: {' '.join(map(str, args))[:300]} did not finish; its output, with the "
                             f"stack of every Python process it started:\n{out[-4000:]}\n{err[-20000:]}\n")
            raise
    return subprocess.CompletedProcess(args, process.returncode, out, err)


def descendants(pid):
    """The pids of pid's children, their children and so on (Linux's /proc; elsewhere none)."""
    parents = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
        except (OSError, ValueError, IndexError):  # not a process, or one that just ended
            pass
    found, todo = [], [pid]
    while todo:
        found += (children := parents.get(todo.pop(), []))
        todo += children
    return found


def end_hung(pids, grace_s=5.0, first_signal=signal.SIGABRT):
    """End processes that hang: SIGABRT first (or first_signal), so each Python one prints every thread's
    stack (faulthandler, on where PYTHONFAULTHANDLER or faulthandler.enable() set it), then SIGKILL whatever is
    left after grace_s. All are stopped first, then signalled and resumed one at a time, each let end before
    the next: stacks that share a stderr do not interleave, and no parent (torchrun) sees a child end and
    tears the others down before their stacks are printed."""
    for pid in pids:
        _signal(pid, signal.SIGSTOP)
    deadline = time.monotonic() + grace_s
    for pid in pids:
        _signal(pid, first_signal)
        _signal(pid, signal.SIGCONT)
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.02)
    for pid in pids:
        _signal(pid, signal.SIGKILL)


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _alive(pid):
    """pid still runs (not a zombie waiting for its parent to collect it)."""
    stat = _proc_stat(pid)
    return stat is not None and stat[0] != "Z"


IN_PROCESS = False  # tests/conftest.py: run_train runs train.py in the test's process (train_here)


def run_train(*args, env=None, timeout=600):
    """train.py in this process's interpreter, one process (IN_PROCESS, no env, from the main thread: in this
    process; train_here swaps process-wide state, sys.argv and stdout, so concurrent runs get processes)."""
    if IN_PROCESS and not env and threading.current_thread() is threading.main_thread():
        return train_here(*args)
    return run([sys.executable, os.path.join(ROOT, "train.py"), *args], env=env, timeout=timeout)


def train_here(*args):
    """train.py run in this process, seen as a subprocess sees it: its arguments, its stdout and stderr,
    its exit status (an exception: its traceback on stderr and status 1), one thread (as run()'s
    OMP_NUM_THREADS=1), in the repository root. No interpreter start and no torch import: 1.4 s less per
    run on a 2-core host. A run that needs a process of its own (a fault that kills it, torchrun's
    ranks, an environment of its own) goes through run()."""
    return _here(os.path.join(ROOT, "train.py"), args)


def run_tool(module, *args):
    """`python -m module args` (a bench tool), in this process as train_here runs train.py (IN_PROCESS, from
    the main thread; otherwise a subprocess): the same CompletedProcess, without an interpreter's start."""
    if IN_PROCESS and threading.current_thread() is threading.main_thread():
        return _here(module, args, as_module=True)
    return run([sys.executable, "-m", module, *args])


def run_script(path, *args):
    """`python path args` (a data preparation script), in this process as run_tool runs a module."""
    if IN_PROCESS and threading.current_thread() is threading.main_thread():
        return _here(path, args)
    return run([sys.executable, path, *args])


def _here(target, args, as_module=False):
    saved = (sys.argv, torch.get_num_threads(), os.getcwd())
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    sys.argv = [target, *args]
    torch.set_num_threads(1)
    os.chdir(ROOT)
    try:
        with redirect_stdout(stdout), redirect_stderr(stderr):
            if as_module:
                with warnings.catch_warnings():  # a module the tests imported already: run afresh, as -m does
                    warnings.filterwarnings("ignore", "'.*' found in sys.modules", RuntimeWarning)
                    runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
    except SystemExit as e:  # sys.exit(message): the message on stderr, status 1, as Python does
        code = e.code if isinstance(e.code, int) or e.code is None else print(e.code, file=stderr) or 1
    except Exception:  # what the interpreter would print (a Ctrl-C still stops the tests)
        stderr.write(traceback.format_exc())
        code = 1
    finally:
        sys.argv = saved[0]
        torch.set_num_threads(saved[1])
        os.chdir(saved[2])
        torch.use_deterministic_algorithms(False)  # deterministic=True sets it for the process
    command = [sys.executable, *(["-m"] if as_module else []), target, *args]
    return subprocess.CompletedProcess(command, code or 0, stdout.getvalue(), stderr.getvalue())


def torchrun(nproc, *args, env=None, timeout=600, launcher=False):
    """train.py under torchrun on this machine: nproc processes. In the tests (IN_PROCESS) without an env of
    their own, the ranks are forked from a server that imported torch once (ranks_here); a run with an env
    (an injected fault that kills or hangs a rank) and `launcher=True` (a test of the launch itself) run torchrun."""
    # A collective hung for 5 minutes fails the run with the collective's own line (the caller's
    # --dist_timeout_s, later in args, wins) before this 10-minute timeout kills it blind.
    args = ("--dist_timeout_s=300", *args)
    if IN_PROCESS and not env and not launcher:
        return ranks_here(nproc, args, timeout)
    # --standalone: a rendezvous on a free local port, so concurrent launches do not collide.
    result = run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                  os.path.join(ROOT, "train.py"), *args], env=env, timeout=timeout)
    said = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    if result.returncode and said:  # the ranks' own lines, repeated last: torchrun's report would bury them in a tail
        result.stderr += "\nthe ranks said (repeated from above):\n" + "".join(f"  {line}\n" for line in said)
    return result


RANK_PRELOAD = ["bench.harness", "checkpoint", "comms", "configurator", "faults", "label_eval", "megatron_shim", "provenance",
                "data.common", "pipeline", "torch.nn.parallel", "torch.distributed"]  # what train.py imports


def ranks_here(nproc, args, timeout=600):
    """train.py's nproc ranks as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT; one
    thread each), forked from a server that imported torch and the model once: no interpreter start and
    no torch import per rank (3 to 4 s each on a 2-core host). Each rank writes its own stdout and stderr
    at the file level (a rank that ends with os._exit loses nothing); the result joins them in rank order.
    As under torchrun, the first rank to fail ends the others and gives the status. The same
    CompletedProcess as torchrun's, for the tests."""
    import multiprocessing
    import multiprocessing.connection
    import tempfile
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(RANK_PRELOAD)  # imported once, when the server starts
    # The rendezvous store lives here, as torchrun's agent hosts it, not in rank 0: a rank 0 that exits
    # first (faults.fail) must not take the store its peers are still reading from.
    store = torch.distributed.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    with tempfile.TemporaryDirectory() as logs:
        for name in (f"{rank}.{kind}" for rank in range(nproc) for kind in ("out", "err")):  # made here, empty: a rank
            open(os.path.join(logs, name), "w").close()  # a peer's failure ended before it opened its own said nothing
        ranks = [context.Process(target=_rank_main, args=(rank, nproc, store.port, args, logs)) for rank in range(nproc)]
        for process in ranks:
            process.start()
        deadline, codes = time.monotonic() + timeout, [None] * nproc
        try:
            while not any(codes) and None in codes:  # until a rank fails or all have ended
                if time.monotonic() >= deadline:  # hung: the except below prints every rank's stack
                    raise subprocess.TimeoutExpired(["torchrun", *args], timeout)
                multiprocessing.connection.wait([ranks[rank].sentinel for rank in range(nproc) if codes[rank] is None],
                                                timeout=min(1.0, max(0.0, deadline - time.monotonic())))
                codes = [_exit_code(ranks[rank]) if codes[rank] is None else codes[rank] for rank in range(nproc)]
        except BaseException:  # hung past timeout, or the test's time limit (pytest-timeout) or Ctrl-C stopped us
            end_hung([ranks[rank].pid for rank in range(nproc) if codes[rank] is None])
            for rank in range(nproc):
                sys.stderr.write(f"harness: rank {rank} of a run that did not finish ({' '.join(args)[:300]}), "
                                 f"{_rank_state(ranks[rank].pid, logs, rank)}; its stderr with every thread's stack:\n"
                                 f"{open(os.path.join(logs, f'{rank}.err')).read()[-20000:]}\n")
            raise
        # as torchrun does: a rank failed, so the others are ended
        end_hung([ranks[rank].pid for rank in range(nproc) if codes[rank] is None], first_signal=signal.SIGTERM)
        code = next((code for code in codes if code), 0)
        out, err = ("".join(open(os.path.join(logs, f"{rank}.{kind}")).read() for rank in range(nproc))
                    for kind in ("out", "err"))
    return subprocess.CompletedProcess(["torchrun", f"--nproc_per_node={nproc}", "train.py", *args], code, out, err)


def _exit_code(process):
    """A rank's exit status, or None while it runs. The forkserver that forked the rank reports it through the
    process's sentinel once it has collected the rank; until then a rank that ended is a zombie whose status
    Linux shows in /proc, read here, so a report the forkserver is late with or never sends cannot hang the
    run. (One CI run hung here for 120 s with both ranks' stderr empty, which is what a rank that finished
    leaves.)"""
    if process.exitcode is not None:
        return process.exitcode
    stat = _proc_stat(process.pid)
    return os.waitstatus_to_exitcode(int(stat[-1])) if stat and stat[0] == "Z" else None


def _proc_stat(pid):
    """The fields of /proc/<pid>/stat after the command's name (state first, exit status last), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _rank_state(pid, logs, rank):
    """Where a rank that did not finish was, in words: running (and in which kernel wait), ended but not
    collected, or gone; how far its stdout got."""
    stat = _proc_stat(pid)
    state = "gone" if stat is None else "ended, not collected by the forkserver" if stat[0] == "Z" else "running"
    if state == "running":
        try:
            with open(f"/proc/{pid}/wchan") as f:
                state += f" (kernel wait: {f.read() or 'none'})"
        except OSError:
            pass
    last = (open(os.path.join(logs, f"{rank}.out")).read().strip().splitlines() or ["nothing"])[-1][:200]
    return f"pid {pid} {state}, last stdout line: {last}"


def _rank_main(rank, world, port, args, logs):
    """One rank (ranks_here's child): its environment, its files as fd 1 and 2, train.py as __main__."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                      TORCHELASTIC_USE_AGENT_STORE="True")
    for fd, kind in ((1, "out"), (2, "err")):
        os.dup2(os.open(os.path.join(logs, f"{rank}.{kind}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    sys.stdout, sys.stderr = (open(fd, "w", buffering=1, closefd=False) for fd in (1, 2))
    faulthandler.enable(all_threads=True)  # a hung rank ended by SIGABRT (ranks_here) prints its stacks to its file
    torch.set_num_threads(1)
    os.chdir(ROOT)
    sys.argv = [os.path.join(ROOT, "train.py"), *args]
    code = 0
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as e:  # as the interpreter: a message on stderr and status 1
        code = e.code if isinstance(e.code, int) or e.code is None else print(e.code, file=sys.stderr) or 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(code or 0)


def records(out_dir, name="metrics.jsonl"):
    """The records a run logged (metrics.jsonl, or eval.jsonl), one dict per line."""
    with open(os.path.join(out_dir, name)) as f:
        return [json.loads(line) for line in f]


# What two runs of one function (another layout, another summation order) must agree on: these
# within float tolerance, and every count and packet statistic exactly.
FLOAT_KEYS = ("train_loss", "val_loss", "val_accuracy", "grad_norm")
COUNT_KEYS = ("syncs_measured", "sync_points", "packets_sent", "packets_lost", "loss_bursts",
              "packets_lost_fwd", "packets_lost_bwd", "packets_sent_gather", "packets_lost_gather")


def record_differences(a, b):
    """Two runs' records, step by step -> ({float key: largest |a - b| / max(1, |a|)}, [count keys
    that differ at some step]). The runs must have logged the same iterations."""
    if [r["iter"] for r in a] != [r["iter"] for r in b]:
        raise ValueError("the runs logged different iterations")
    def gap(x, y):  # a None (a skipped step's gradient norm) matches only None
        return (0.0 if x is y else math.inf) if x is None or y is None else abs(x - y) / max(1.0, abs(x))
    floats = {key: max((gap(x[key], y.get(key)) for x, y in zip(a, b) if key in x), default=0.0) for key in FLOAT_KEYS}
    counts = [key for key in COUNT_KEYS if any(x.get(key) != y.get(key) for x, y in zip(a, b))]
    return floats, counts


# --- a model and timed training steps, in this process -----------------------------------

def build(model_args, comm=None, device="cpu"):
    """(model, AdamW) from torch seed 0, so every config of a comparison starts from the same draw.

    model_args: GPTConfig's keywords; comm: the execution mode (default: sim, lossless).
    The learning rate is small: a benchmark times steps, it does not train.
    """
    torch.manual_seed(0)
    model = GPT(GPTConfig(**model_args), comm).to(device)
    optimizer = model.configure_optimizers(0.1, 1e-4, (0.9, 0.95), device.split(":")[0])
    return model, optimizer


def add_step_args(parser, rounds):
    """The measured model and rounds of the dist step-time tools (bench/step_time.py, bench/scheme_time.py)."""
    parser.add_argument("--n_embd", type=int, default=256)
    parser.add_argument("--n_head", type=int, default=8)
    parser.add_argument("--block_size", type=int, default=128)
    parser.add_argument("--batch_sizes", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--vocab_size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=rounds)


def random_batch(vocab_size, batch_size, block_size, seed=0, device="cpu"):
    """(x, y), each (batch_size, block_size) token ids, drawn in that order from one seeded generator."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(vocab_size, (batch_size, block_size), generator=g).to(device)
    y = torch.randint(vocab_size, (batch_size, block_size), generator=g).to(device)
    return x, y


def autocast(device, dtype):
    """train.py's mixed-precision context: autocast to dtype, or nothing for float32."""
    device_type = device.split(":")[0]
    if dtype == "float32":
        return torch.autocast(device_type, enabled=False)
    return torch.autocast(device_type, dtype=getattr(torch, dtype))


def synchronize(device):
    """Wait for queued GPU work, so a timer stops when the work is done, not when it is queued."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def train_steps(model, optimizer, x, y, n, ctx=nullcontext(), device="cpu", reduce_and_clip=False):
    """n full training steps on the batch (x, y): forward, backward, AdamW; seconds per step.

    model may be a torch.compile'd module. reduce_and_clip: also sum the replicated
    gradients over the TP group and clip by the whole model's norm, as train.py's step
    does (in `dist` mode that all-reduce is part of what a step costs).
    """
    start = time.perf_counter()
    for _ in range(n):
        with ctx:
            _, loss = model(x, y)
        loss.backward()
        if reduce_and_clip:
            model.comm.reduce_replicated_grads(model.parameters())
            clip_grad_norm_(model.parameters(), 1.0, model.comm.grad_norm(model.parameters()))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    synchronize(device)
    return (time.perf_counter() - start) / n


# --- link statistics ----------------------------------------------------------------

def draw(link, n_packets, messages=20, src=0, dst=1, direction=FWD):
    """Lost flags (bool, (n_packets,)) of `messages` consecutive messages on one link, concatenated."""
    per = n_packets // messages
    return np.concatenate([(~link.arrived(src, dst, direction, "p", per, "cpu")).numpy() for _ in range(messages)])


def runs(flags):
    """Lengths of the maximal runs of True and of False, without the two cut-off end runs."""
    change = np.flatnonzero(np.diff(flags.astype(np.int8))) + 1
    bounds = np.concatenate([[0], change, [len(flags)]])
    lengths, values = np.diff(bounds)[1:-1], flags[bounds[:-1]][1:-1]
    return lengths[values], lengths[~values]


def standard_error(model, n):
    """Standard error of the observed loss fraction of n packets of one stationary stream.

    Bernoulli: sqrt(q (1 - q) / n). Gilbert-Elliott: the loss indicators are correlated
    through the state, whose autocorrelation decays as lambda^t with lambda = 1 - p - r, which
    adds 2 (h_loss - g_loss)^2 pi_b (1 - pi_b) lambda / (1 - lambda) to the per-packet variance.
    """
    q = model.stationary_loss
    var = q * (1 - q)
    if isinstance(model, GilbertElliottLoss):
        lam, bad = 1 - model.p - model.r, model.stationary_bad
        var += 2 * ((1 - model.h) - (1 - model.k)) ** 2 * bad * (1 - bad) * lam / (1 - lam)
    return math.sqrt(var / n)
