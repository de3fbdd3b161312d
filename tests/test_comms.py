"""The sync point as an autograd function: forward formula, mirror backward, counting."""

import pytest
import torch

from comms import SimComm
from links import LosslessLink


def test_sync_forward_adds_every_partial_to_every_rank():
    torch.manual_seed(0)
    comm = SimComm(tp_size=3)
    b = torch.randn(1, 2, 4, 5)
    d = torch.randn(3, 2, 4, 5)
    out = comm.sync(b, d, "p")
    assert out.shape == (1, 2, 4, 5)  # lossless: all ranks agree, kept once
    assert torch.allclose(out, b + d[0] + d[1] + d[2], atol=1e-6)  # summation order: ulps
    b_per_rank = torch.randn(3, 2, 4, 5)  # ranks that disagree on b keep their own b_r
    out = comm.sync(b_per_rank, d, "q")
    for r in range(3):
        assert torch.allclose(out[r], b_per_rank[r] + d.sum(0), atol=1e-6)


def test_sync_backward_is_the_mirror_exchange():
    comm = SimComm(tp_size=3)
    b = torch.randn(3, 2, 5, dtype=torch.float64, requires_grad=True)
    d = torch.randn(3, 2, 5, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 2, 5, dtype=torch.float64)
    comm.sync(b, d, "p").backward(g)
    assert torch.allclose(b.grad, g)  # each rank's b gets its own output gradient
    for j in range(3):  # each partial d_j reaches every rank, so it gets every rank's gradient
        assert torch.allclose(d.grad[j], g.sum(0))
    assert torch.autograd.gradcheck(lambda b_, d_: comm.sync(b_, d_, "p"), (b, d))
    shared_b = torch.randn(1, 2, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda b_, d_: comm.sync(b_, d_, "p"), (shared_b, d))


def test_counter_counts_forward_syncs_and_backward_exchanges():
    comm = SimComm(tp_size=2)
    b = torch.randn(1, 3, requires_grad=True)
    d = torch.randn(2, 3, requires_grad=True)
    out = comm.sync(b, d, "h0.mlp")
    out = comm.sync(out, d * 2, "h1.mlp")
    assert (comm.counter.forward, comm.counter.backward) == (2, 0)
    assert comm.counter.points == {"h0.mlp": 1, "h1.mlp": 1}
    out.sum().backward()
    assert (comm.counter.forward, comm.counter.backward) == (2, 2)
    comm.counter.reset()
    assert (comm.counter.forward, comm.counter.backward, comm.counter.points) == (0, 0, {})


def test_a_sync_over_one_rank_is_the_identity_and_not_counted():
    comm = SimComm(tp_size=1)
    b, d = torch.randn(1, 4), torch.randn(1, 4)
    assert torch.equal(comm.sync(b, d, "p"), b + d)
    assert comm.counter.forward == 0
    assert not LosslessLink().lossy and "lossless" in LosslessLink().describe()


def test_the_mode_is_chosen_once_by_name():
    import pytest
    from comms import DistComm, comm_for
    assert isinstance(comm_for("sim", 2), SimComm) and isinstance(comm_for("dist", 1), DistComm)
    assert SimComm.processes_per_tp_group(4) == 1 and DistComm.processes_per_tp_group(4) == 4
    with pytest.raises(ValueError, match="tp_mode='mpi': allowed are 'sim'"):
        comm_for("mpi", 2)


def test_a_model_refuses_a_comm_of_another_tp_size():
    import pytest
    from model import GPT, GPTConfig
    with pytest.raises(ValueError, match="the comm's tp_size=4 differs from the model's tp_size=2"):
        GPT(GPTConfig(block_size=8, vocab_size=11, n_layer=2, n_head=4, n_embd=16, tp_size=2), SimComm(4))


def test_evaluating_swaps_the_link_for_the_block_only():
    """Eval is lossless unless asked; a lossy eval draws from its own fresh streams (the same
    masks at every eval) and leaves training's streams where they were."""
    from links import BernoulliLoss, LossyLink
    training = LossyLink(BernoulliLoss(0.5), seed=3, packet_bytes=16)
    comm = SimComm(2, training)
    b, d = torch.zeros(1, 1, 64), torch.randn(2, 1, 64)
    with comm.evaluating():
        assert isinstance(comm.link, LosslessLink)
        assert torch.equal(comm.sync(b, d, "p")[0], d.sum(0))
    assert comm.link is training and training.sent == {}  # nothing drawn from training's streams
    outs = []
    for _ in range(2):
        with comm.evaluating(lossy=True):
            assert comm.link is not training and comm.link.purpose == 1
            outs.append(comm.sync(b, d, "p"))
    assert torch.equal(outs[0], outs[1])  # every eval sees the same packets
    assert not torch.equal(outs[0][0], d.sum(0))  # and they are lossy
    assert comm.link is training and training.sent == {}


def test_a_ladder_sync_times_its_wait_at_landing(monkeypatch):
    """`dist`: a ladder's all-reduce is issued in cross and waited for in land; comm_ms must count the
    wait (the part a hidden sync did not hide), not only the issue. A fake clock: the wait takes 0.05 s."""
    import comm_contexts
    from comms import DistComm
    clock = [100.0]
    monkeypatch.setattr(comm_contexts.time, "perf_counter", lambda: clock[0])

    class SlowWork:  # an async all-reduce that is still running when its sync lands
        def wait(self):
            clock[0] += 0.05
    comm = DistComm(tp_size=2)
    comm.timing = True
    comm.in_flight["h0.attn"] = SlowWork()
    comm.land(torch.zeros(1, 3), torch.ones(1, 3), "h0.attn", hidden=True)
    assert not comm.in_flight and comm.counter.comm_seconds == pytest.approx(0.05)


def test_a_ladder_hides_its_backward_exchange_behind_the_next_sublayers_backward(monkeypatch):
    """`dist`: a ladder sync's mirror exchange is sent as soon as its gradient exists (at its landing, in
    the backward) and waited for where the partials' gradient is consumed, so the backward of the
    sublayer that ran while the forward all-reduce was in flight runs in between; the gradients are
    those of the same function without the overlap (the all-reduce stands in for one rank: the identity)."""
    import comms
    events = []

    class Work:
        def __init__(self, number):
            self.number = number

        def wait(self):
            events.append(f"wait {self.number}")

    def all_reduce(tensor, group=None, async_op=False):  # the n-th collective, numbered as issued
        number = sum(e.startswith("issue") for e in events)
        events.append(f"issue {number}")
        return Work(number) if async_op else None

    monkeypatch.setattr(comms.dist, "all_reduce", all_reduce)
    g = torch.Generator().manual_seed(0)
    w = [torch.randn(4, 4, generator=g, requires_grad=True) for _ in range(3)]
    x = torch.randn(1, 2, 4, generator=g)
    w[1].register_hook(lambda grad: events.append("sublayer 2 backward"))
    comm = comms.DistComm(tp_size=2)
    m1 = comm.send(x @ w[0], "s1", later=True)  # sublayer 1: issue 0
    m2 = comm.send(x @ w[1], "s2", later=True)  # sublayer 2 runs while s1 is in flight: issue 1
    b = comm.land(x, m1, "s1", hidden=True)
    d3 = b @ w[2]  # sublayer 3 runs while s2 is in flight
    (comm.land(b, m2, "s2", hidden=True) + d3).square().sum().backward()
    # backward: s2's exchange (issue 2) and s1's (issue 3) sent at their landings; s1's waited for only
    # after the backward of sublayer 2, which ran while it was in flight
    backward = events[events.index("wait 1") + 1:]
    assert backward.index("issue 3") < backward.index("sublayer 2 backward") < backward.index("wait 3"), events
    got = [p.grad.clone() for p in w]
    for p in w:
        p.grad = None
    ((x + x @ w[0] + x @ w[1]) + (x + x @ w[0]) @ w[2]).square().sum().backward()
    assert all(torch.allclose(a, p.grad) for a, p in zip(got, w))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_ladders_hidden_backward_exchange_sends_the_message_dtype_under_autocast(monkeypatch, dtype):
    """Under autocast a ladder's message is bfloat16 (float16) and b + message float32: the hidden mirror
    exchange once all-reduced that float32 gradient, moving 1.5x the bytes counted and summing other values
    than the exchange not hidden (which autograd hands the message's dtype). Hidden or not, the same
    gradients and the bytes moved equal the bytes counted. The all-reduce stands in for a peer whose
    gradient is this rank's shifted by one element, so that where the sum is rounded shows."""
    import comms
    from model import GPT, GPTConfig

    class Done:
        def wait(self):
            pass

    def all_reduce(tensor, group=None, async_op=False):  # a sum in the tensor's own dtype, as gloo and NCCL do
        tensor.add_(tensor.reshape(-1).roll(1).view_as(tensor))
        return Done() if async_op else None

    monkeypatch.setattr(comms.dist, "all_reduce", all_reduce)
    torch.manual_seed(0)
    comm = comms.DistComm(tp_size=2)
    model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=32, tp_size=2,
                          block_types="ladder"), comm)
    idx = torch.randint(32, (2, 8), generator=torch.Generator().manual_seed(1))
    grads = []
    for hide in (True, False):  # False: each mirror exchange sent and waited for in _Sync's backward
        comm.hide_backward = hide
        comm.counter.reset()
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype):
            loss = model(idx, idx)[1]
        loss.backward()
        forward, backward, _, hidden_bwd, counted, moved = comm.counter.totals()
        assert (backward, hidden_bwd) == (4, 3 if hide else 0) and moved == counted, (hide, moved, counted)
        grads.append({name: p.grad for name, p in model.named_parameters()})
    assert all(torch.equal(grads[0][name], grads[1][name]) for name in grads[0])
