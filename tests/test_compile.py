"""torch.compile: a lossless sync is traced into the graph (no graph break) with its count
right, a lossy one stays a graph break, and compiled losses, gradients, counts and packets
equal eager ones. The fused `sim` path (a sublayer summed over ranks in its own GEMM) equals
the per-rank partials it replaces."""

import pytest
import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

from comms import SimComm
from bench.harness import run_train
from conftest import TINY
from links import BWD, FWD, link_from
from model import GPT, GPTConfig
from patterns import parse_block_types

# syncs per pass by hand (DESIGN section 3): tp 2 per block, spd 1, a run of parallel blocks 1 where it
# ends, ladder 2; n_layer=2 keeps tracing cheap, 6 for the pattern that needs them
PATTERNS = {"tp": 4, "tp,spd": 3, "spd": 2, "spd,parallel": 2, "parallel*5,spd": 1, "parallel": 1,
            "ladder": 4, "parallel,ladder": 3}
LINKS = {"lossless": {}, "zero": {"loss_model": "gilbert_elliott", "ge_preset": "zero"},
         "bernoulli": {"loss_model": "bernoulli", "loss_rate": 0.05, "packet_bytes": 64}}
RELIABLE = {"loss_model": "bernoulli", "loss_rate": 0.05, "packet_bytes": 64, "transport": "reliable"}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def build(pattern, link, comm_class=SimComm, **sync):
    torch.manual_seed(0)
    n_layer = len(parse_block_types(pattern, 6)) if "*" in pattern else 2
    config = GPTConfig(block_size=16, vocab_size=37, n_layer=n_layer, n_head=4, n_embd=32, tp_size=2, block_types=pattern)
    return GPT(config, comm_class(2, link_from(dict(LINKS.get(link, RELIABLE), seed=5)), **sync))


def step(model, forward):
    idx = torch.randint(37, (3, 16), generator=torch.Generator().manual_seed(1))
    model.comm.counter.reset()
    _, loss = forward(idx, idx)
    loss.backward()
    model.comm.deliver_traced(1)  # as step.py does: a compiled pass's packets on a link that loses none
    counter = model.comm.counter
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}, \
        (counter.forward, counter.backward, dict(counter.points), counter.hidden, counter.sync_bytes)


@pytest.mark.parametrize("pattern", ["tp", "ladder"])
def test_a_lossless_model_is_one_graph_forward_and_backward(pattern):
    """One forward and one backward graph: a graph break would have split them."""
    graphs = {"forward": 0, "backward": 0}

    def compiler(kind):
        def compile_graph(gm, inputs):
            graphs[kind] += 1
            return make_boxed_func(gm)  # AOTAutograd calls a compiled graph with its arguments boxed
        return compile_graph
    model = build(pattern, "lossless")
    backend = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"))
    _, _, counts = step(model, torch.compile(model, backend=backend))
    assert graphs == {"forward": 1, "backward": 1}
    assert counts[:2] == (model.sync_points, model.sync_points) == (4, 4)  # counted inside the graph
    assert counts[0] - counts[3] == model.exposed_syncs == (1 if pattern == "ladder" else 4)  # exposed, too


@pytest.mark.parametrize("pattern", [pytest.param("tp", marks=pytest.mark.slow), "parallel,ladder"])
def test_a_reliable_link_compiles_to_the_lossless_graph(pattern):
    """transport='reliable' delivers every packet, so its syncs are traced into the graph as lossless
    ones are (no graph break: it broke the graph and ran eager syncs, so under inductor the numbers were not
    the lossless run's); its packets and resend rounds are drawn after the step (deliver_traced), the same
    draws as the eager syncs make."""
    from torch._dynamo.utils import counters
    eager = build(pattern, "reliable")
    step(eager, eager)
    results = {}
    for link in ("reliable", "lossless"):
        model = build(pattern, link)
        counters.clear()
        results[link] = step(model, torch.compile(model, backend="aot_eager"))
        assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"], link  # no graph break
        results[link + " stats"] = model.comm.link.stats() if link == "reliable" else None
    (loss_r, grads_r, counts_r), (loss_l, grads_l, counts_l) = results["reliable"], results["lossless"]
    assert torch.equal(loss_r, loss_l) and counts_r == counts_l
    assert all(torch.equal(grads_r[name], grads_l[name]) for name in grads_l)
    stats = results["reliable stats"]
    assert stats == eager.comm.link.stats() and stats["fwd"]["retransmissions"] > 0 and stats["bwd"]["messages"] > 0


FAST = {("tp", "bernoulli"), ("spd,parallel", "lossless"), ("parallel,ladder", "bernoulli")}  # the fast tier's share


@pytest.mark.parametrize("pattern, link", [
    pytest.param(p, k, marks=() if (p, k) in FAST else pytest.mark.slow) for p in sorted(PATTERNS) for k in sorted(LINKS)])
def test_compiled_equals_eager(pattern, link):
    """... and a lossy sync is a graph break (its link runs eagerly), a lossless one is not."""
    from torch._dynamo.utils import counters
    eager = build(pattern, link)
    loss, grads, counts = step(eager, eager)
    compiled = build(pattern, link)
    counters.clear()
    loss_c, grads_c, counts_c = step(compiled, torch.compile(compiled, backend="aot_eager"))
    loses = any(compiled.comm.link.loses(d) for d in (FWD, BWD))
    assert bool(counters["graph_break"]) == loses, dict(counters["graph_break"])
    assert torch.allclose(loss, loss_c, rtol=0, atol=1e-6), (loss, loss_c)
    for name in grads:
        assert torch.allclose(grads[name], grads_c[name], rtol=1e-4, atol=1e-7), name
    assert counts == counts_c and counts[0] == counts[1] == eager.sync_points == PATTERNS[pattern]
    if eager.comm.link.lossy:  # the same packets sent and lost
        assert eager.comm.link.stats() == compiled.comm.link.stats()


@pytest.mark.parametrize("pattern, link, sync", [("spd,parallel", "bernoulli", {}),
                                                pytest.param("tp", "lossless", {"sync_dtype": "int8"}, marks=pytest.mark.slow)])
def test_compiled_equals_eager_under_sequence_parallelism(pattern, link, sync):
    """A GPU run compiles by default: an SP sync is a graph break (eager, as a lossy sync), the rest compiled."""
    eager, compiled = (build(pattern, link, sequence_parallel=True, **sync) for _ in range(2))
    loss, grads, counts = step(eager, eager)
    loss_c, grads_c, counts_c = step(compiled, torch.compile(compiled, backend="aot_eager"))
    assert torch.allclose(loss, loss_c, rtol=0, atol=1e-6), (loss, loss_c)
    for name in grads:
        assert torch.allclose(grads[name], grads_c[name], rtol=1e-4, atol=1e-7), name
    assert counts == counts_c and counts[0] == counts[1] == PATTERNS[pattern]
    if eager.comm.link.lossy:  # the same packets sent and lost, each half's
        assert eager.comm.link.stats() == compiled.comm.link.stats()


class UnfusedSimComm(SimComm):
    sums_in_gemm = False  # every sublayer writes its per-rank partials and the sync sums them


@pytest.mark.parametrize("pattern", ["tp", pytest.param("tp,spd", marks=pytest.mark.slow),
                                     pytest.param("parallel*5,spd", marks=pytest.mark.slow)])
def test_summing_in_the_gemm_equals_summing_partials(pattern):
    fused, unfused = build(pattern, "lossless"), build(pattern, "lossless", UnfusedSimComm)
    assert fused.comm.sums_in_gemm and not unfused.comm.sums_in_gemm
    loss, grads, counts = step(fused, fused)
    loss_u, grads_u, counts_u = step(unfused, unfused)
    assert torch.allclose(loss, loss_u, rtol=0, atol=1e-6)
    for name in grads:  # the same function, another summation order
        assert torch.allclose(grads[name], grads_u[name], rtol=1e-4, atol=1e-7), name
    assert counts == counts_u


def test_the_sync_count_check_catches_an_extra_sync(char_data, tmp_path, monkeypatch):
    """The startup check of measured vs analytic syncs must be able to fail (the fault patches this run's
    model only, so the run can be in the test's process)."""
    monkeypatch.setenv("TP_SYNC_FAULT", "extra_sync:0")
    result = run_train(*TINY, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--max_iters=2", "--block_types=tp")
    assert result.returncode != 0
    assert "sync count mismatch: the model claims 8 per pass (8 exposed), measured 9.0 forward" in result.stderr


def test_counting_inside_the_graph_never_recompiles():
    """The counts live in a tensor the graph updates, so no guard depends on them: calls without
    a reset in between (gradient accumulation, evaluation) reuse the one compiled graph."""
    from torch._dynamo.utils import counters
    model = build("tp", "lossless")
    compiled = torch.compile(model, backend="aot_eager")
    idx = torch.randint(37, (3, 16), generator=torch.Generator().manual_seed(1))
    counters.clear()
    for call in range(4):  # a count read as a guard would recompile each call: 4 graphs, not 1
        if call % 2 == 0:
            model.comm.counter.reset()
        _, loss = compiled(idx, idx)
        loss.backward()
    # one graph: the tally is on the model's device before the first trace (SyncCounter.lay_out), so every
    # call, reset or not, reuses the first (made while tracing, it recompiled the second call)
    assert counters["stats"]["unique_graphs"] == 1
    counter = model.comm.counter
    assert (counter.forward, counter.backward) == (2 * 4, 2 * 4)  # calls 2 and 3, 4 syncs each
    assert counter.points == {f"h{i}.{s}": 2 for i in range(2) for s in ("attn", "mlp")}
    with torch.no_grad():  # an eval pass: forward syncs, no backward exchange
        compiled(idx, idx)
    assert (counter.forward, counter.backward) == (12, 8)
    assert build("tp", "lossless").to("meta").comm.counter.traced.device.type == "meta"  # it goes where the weights go
