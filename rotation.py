"""
The random-sign Hadamard rotation of a sync's messages (`sync_rotation='hadamard'`; docs/lossy-links.md,
"When packets are lost"). The sender multiplies its message by random signs and a Hadamard
transform before cutting it into packets; the receiver applies the inverse to what arrived. A
lost packet then removes a little of every element of its block instead of all of a few.

Blocks, not padding: the transform runs along the packet axis, over blocks of a power-of-two
number of whole packets (the binary digits of the packet count, largest block first: 13 packets
are blocks of 8, 4 and 1). A full-precision or bfloat16 message keeps its packet count, so the
link draws the masks a zero-fill run draws; an int8 or float8 one is cut into packets of values,
each with its own scale, instead of whole rows (quantize.packets), so its count and masks are its
own (10 rows of 768 int8: 6 packets, not 10). A lost packet's damage stays inside its
own block; and no bytes are added but the zeros that fill out a short last packet. (Padding the
message to a power of two elements would send up to twice the packets.) The block of the odd
last packet, if any, has size 1: that packet is not spread.

Element e of a rotated packet mixes element e of every packet of its block, each with its own
random sign; the transform is orthonormal (H / sqrt(K)), so it is its own inverse. Signs are a
function of (seed, TP group, sender, direction, message length) alone: every receiver, in `sim`
or `dist`, and a resumed run use the same signs, with no state to checkpoint.
"""

import numpy as np
import torch
import torch.nn.functional as F


def blocks(n_packets):
    """(first packet, packets) of each power-of-two block covering n_packets, largest first."""
    out, start = [], 0
    for bit in reversed(range(n_packets.bit_length())):
        if n_packets >> bit & 1:
            out.append((start, 1 << bit))
            start += 1 << bit
    return out


_SYLVESTER = {}  # (n, dtype, device) -> the n x n Hadamard matrix of +-1, Sylvester's order


def sylvester(n, like):
    """H_n (n a power of two) in like's dtype and device: [[H, H], [H, -H]] from [[1]], as scipy.linalg.hadamard."""
    key = (n, like.dtype, str(like.device))
    if key not in _SYLVESTER:
        h = torch.ones(1, 1, dtype=like.dtype, device=like.device)
        while h.shape[0] < n:
            h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])
        _SYLVESTER[key] = h
    return _SYLVESTER[key]


def hadamard(x):
    """Orthonormal Walsh-Hadamard transform of x (K, P) along dim 0, K a power of two (its own inverse).
    H_K = H_a kron H_b with a * b = K, so it is two GEMMs: H_a over the views (a, b * P) and H_b over
    (a, b, P), a + b multiply-adds per element in two passes, where the butterfly makes log2 K passes
    through memory (5-10x slower on a CPU at K = 512). The GEMMs run in x's own precision: not under
    autocast (bf16 would round the message), and not in TF32 on CUDA (10 bits of mantissa)."""
    K, P = x.shape
    if K == 1:
        return x
    a = 1 << (K.bit_length() - 1) // 2
    b = K // a
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        with torch.autocast(x.device.type, enabled=False):
            y = sylvester(a, x) @ x.reshape(a, b * P)  # (a, b * P): mixes the first factor
            y = sylvester(b, x) @ y.view(a, b, P)  # (a, b, P): mixes the second
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return y.view(K, P) * K ** -0.5


def transform(x):
    """The blocked transform of x (n_packets, P): each block of whole packets on its own."""
    return torch.cat([hadamard(x[start:start + size]) for start, size in blocks(x.shape[0])])


class Rotation:
    """The signs of every sender's messages, cached per (sender, direction, length, device)."""

    def __init__(self, seed, tp_group=0):
        self.seed, self.tp_group = seed, tp_group
        self._signs = {}

    def signs(self, src, direction, n, device):
        key = (src, direction, n, str(device))
        if key not in self._signs:
            parts = [self.seed, self.tp_group, src, direction, n, 0x4AD]  # 0x4AD: not a packet stream's seed
            seed = int(np.random.SeedSequence(parts).generate_state(1)[0])
            bits = torch.randint(0, 2, (n,), generator=torch.Generator().manual_seed(seed))  # on the CPU: any device agrees
            self._signs[key] = (1.0 - 2.0 * bits.float()).to(device)
        return self._signs[key]

    def rotate(self, message, src, direction, n_packets, per_packet):
        """What the sender puts on the wire: (n_packets, per_packet) in the message's dtype."""
        n, padded = message.numel(), n_packets * per_packet
        work = torch.promote_types(message.dtype, torch.float32)
        x = F.pad(message.to(work), (0, padded - n)) * self.signs(src, direction, padded, message.device).to(work)
        return transform(x.view(n_packets, per_packet)).to(message.dtype)

    def received(self, message, arrived, src, direction, per_packet):
        """What the receiver holds of a message (flat, float32 or wider) once the packets that arrived
        (arrived: (n_packets,) bool) are rotated back: the others were zero on the wire."""
        wire = self.rotate(message, src, direction, len(arrived), per_packet)
        return self.unrotate(torch.where(arrived[:, None], wire, 0), src, direction, message.numel())

    def unrotate(self, packets, src, direction, n):
        """The receiver's inverse of what arrived (lost packets already zero): the first n elements, flat."""
        n_packets, per_packet = packets.shape
        work = torch.promote_types(packets.dtype, torch.float32)
        x = transform(packets.to(work)).reshape(-1)
        return (x * self.signs(src, direction, n_packets * per_packet, packets.device).to(work))[:n]
