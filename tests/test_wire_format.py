"""The wire format of a quantized sync (DESIGN section 8): an int8 message crossing a lossy link as its packets
of values and scales, rotated or not, against the receiver's view built by hand in float64."""

import math

import pytest
import scipy.linalg
import torch

from comms import SimComm
from links import FWD, link_from
from rotation import blocks
from test_lost_packets import LoseOnly


def wire_reference(x, lost, packet_bytes, rotation, signs=None):
    """By hand, in float64: what a receiver holds of an int8 message x (rows, C) whose packets `lost`
    were lost (DESIGN section 8, wire format). Not rotated: the rows' bytes, each row its float32 scale
    (4 bytes) then its C values, packed whole rows to a packet, or a row longer than a packet spread
    over packets in that byte order; a value arrives if its byte's packet and its scale's first byte's
    packet arrived. Rotated: the message padded to whole packets of packet_bytes - 4 values, signs, a
    Hadamard transform per block (scipy's matrix), each packet's values quantized with one scale,
    the lost packets zero, the inverse."""
    rows, C = x.shape

    def int8(v):  # (n, k) -> each row quantized with its own float32 absmax scale, dequantized
        scale = torch.tensor(v.abs().amax(-1, keepdim=True).numpy() / 127.0, dtype=torch.float32).double()
        return (v / scale).round().clamp(-127, 127) * scale

    if rotation == "none":
        out, row_bytes = torch.zeros(rows, C, dtype=torch.float64), 4 + C
        for i in range(rows):
            if row_bytes <= packet_bytes:
                packet_of = [i // (packet_bytes // row_bytes)] * (C + 1)  # scale, then each value
            else:
                spans = math.ceil(row_bytes / packet_bytes)
                packet_of = [i * spans + 0] + [i * spans + (4 + e) // packet_bytes for e in range(C)]
            for e in range(C):
                if packet_of[0] not in lost and packet_of[1 + e] not in lost:
                    out[i, e] = int8(x[i:i + 1])[0, e]
        return out
    unit = packet_bytes - 4
    n_packets = math.ceil(rows * C / unit)
    flat = torch.zeros(n_packets * unit, dtype=torch.float64)
    flat[:rows * C] = x.reshape(-1)
    packets = (flat * signs).view(n_packets, unit)
    hs = [(start, torch.tensor(scipy.linalg.hadamard(size), dtype=torch.float64) / size ** 0.5)
          for start, size in blocks(n_packets)]
    rotated = torch.cat([h @ packets[start:start + len(h)] for start, h in hs])
    arrived = int8(rotated) * torch.tensor([p not in lost for p in range(n_packets)], dtype=torch.float64)[:, None]
    back = torch.cat([h.T @ arrived[start:start + len(h)] for start, h in hs]).reshape(-1) * signs
    return back[:rows * C].view(rows, C)


@pytest.mark.parametrize("rotation, packet_bytes, rows, lost", [
    ("none", 32, 7, {1}),          # 14-byte rows, two to a packet: packet 1 carries rows 2 and 3 and their scales
    ("none", 8, 5, {2, 7}),        # a row spans two packets, its scale in the first: packet 2 loses row 1 whole
    ("hadamard", 12, 7, {3}),      # 8 values and a scale a packet: 9 packets, blocks of 8 and 1
    ("hadamard", 12, 7, {8}),      # the last packet, a block of its own
])
def test_a_quantized_message_crosses_as_its_packets_of_values_and_scales(rotation, packet_bytes, rows, lost):
    """An int8 sync over a lossy link (the `sim` crossing, links.exchange): rank 0 receives rank 1's message
    as the wire format builds it by hand, a lost packet taking its values and its scales; the packets
    sent are the wire format's; the bytes counted are its payload and scales."""
    from links import exchange
    from quantize import SYNC_DTYPES, quantized
    C, dtype = 10, SYNC_DTYPES["int8"]
    link = link_from({"loss_model": "bernoulli", "loss_rate": 0.5, "packet_bytes": packet_bytes, "seed": 4,
                      "sync_rotation": rotation})
    source = LoseOnly(lost)
    source.arrived = lambda link, key, point, n, device, _a=source.arrived: sizes.append(n) or _a(link, key, point, n, device)
    sizes = []
    link.use(source)
    x = torch.randn(2, rows, C, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    got = exchange(x, quantized(x, dtype), link, FWD, "p", 1, dtype)
    n_packets = math.ceil(rows * C / (packet_bytes - 4)) if rotation == "hadamard" else \
        (math.ceil(rows / (packet_bytes // (4 + C))) if 4 + C <= packet_bytes else rows * math.ceil((4 + C) / packet_bytes))
    signs = link.rotate.signs(1, FWD, n_packets * (packet_bytes - 4), "cpu").double() if link.rotate else None
    want = x[0] + wire_reference(x[1], lost, packet_bytes, rotation, signs)
    assert torch.allclose(got[0], want, atol=1e-12, rtol=0), (got[0] - want).abs().max()
    assert sizes == [n_packets, n_packets]  # the messages on links 1 -> 0 and 0 -> 1
    if rotation == "none" and packet_bytes == 8:
        assert (got[0, 1] == x[0, 1]).all()  # row 1's scale was lost: none of rank 1's row 1 arrived
    comm = SimComm(2, link, sync_dtype="int8")
    scales = 4 * (n_packets if rotation == "hadamard" else rows)
    assert comm.message_bytes(x, FWD) == (n_packets * (packet_bytes - 4) if rotation == "hadamard" else rows * C) + scales
