"""The sync point as an autograd function: forward formula, mirror backward, counting."""

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
