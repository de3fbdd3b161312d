"""
sync_dtype: what a sync's message becomes when it is sent in fewer bits (DESIGN section 8). The
receiver gets the dequantized values; a rank's own contribution never leaves it and stays exact.
What crosses is what is counted: `pack` gives the wire bytes (the payload in its dtype, and for int8
and float8 a float32 scale per row), `unpack` what a receiver makes of them; `sim` applies the same
codec without the bytes (`quantized`), so both modes deliver the same values.
"""

import math

import torch

# sync_dtype: what a sync sends, quantized ('' keeps the communication dtype); fp8 and int8 with a
# per-token absmax scale (a float32 per row of C channels, counted in the bytes)
SYNC_DTYPES = {"": None, "bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn, "int8": torch.int8}
per_token = {torch.float8_e4m3fn: 448.0, torch.int8: 127.0}  # dtype -> its largest value


def encode(x, dtype):
    """x's message in `dtype` as it crosses: (payload in dtype, float32 scale per row (..., 1), or None for
    bfloat16). A row's scale is its finite values' absmax / the dtype's largest value (a float32; OverflowError
    for a float64 row past float32's range); a non-finite value is sent as 0 (`quantized` and `pack` say what
    the receiver gets in its place)."""
    if dtype not in per_token:
        return x.detach().to(dtype), None
    limit = per_token[dtype]
    work = torch.promote_types(x.dtype, torch.float32)  # a bfloat16 message's scale is still a float32's
    clean = x.detach().nan_to_num(0.0, 0.0, 0.0).to(work)  # a non-finite value sent as 0: one pass
    absmax = clean.abs().amax(-1, keepdim=True)
    scale = (absmax / limit).float()  # (..., 1): what the wire carries, rounded to the nearest float32
    # Below float32's normal range (a row under limit * 2**-126: 1.5e-36 for int8) the scale's rounding step,
    # 2**-149, is no longer small against it: rounded down, it would clip a row's largest values at the limit (or,
    # rounded to 0, make them 0/0). There a scale rounded down is rounded up instead (the next float32): no value
    # passes the limit, and the scale is at most 2**-149 above absmax / limit (int8: a value off by at most
    # absmax / 254 + 2**-150). An all-zero row (0/0 fails `<= limit`) gets the smallest scale and arrives exact;
    # a float64 row too small for any float32 scale arrives within 2**-150.
    coarse = (scale < torch.finfo(torch.float32).tiny) & ~(absmax / scale.to(work) <= limit)
    scale = torch.where(coarse, torch.nextafter(scale, torch.full_like(scale, math.inf)), scale)
    if work == torch.float64 and torch.isinf(scale).any():  # float32 and narrower rows cannot get here: no host sync
        ceiling = limit * torch.finfo(torch.float32).max
        raise OverflowError(f"sync_dtype={str(dtype).removeprefix('torch.')}: a message row's largest value "
                            f"{absmax.max().item():.3g} needs a scale past float32's largest (the wire's scales are "
                            f"float32): a float64 run's messages must stay below {ceiling:.3g}")
    q = clean.div_(scale.to(work)).clamp_(-limit, limit)  # in place: `clean` is this function's own copy
    return (q.round_() if dtype == torch.int8 else q).to(dtype), scale


def decode(payload, scale, out_dtype):
    """The values a receiver gets from a payload and its scales, in out_dtype."""
    if scale is None:
        return payload.to(out_dtype)
    work = torch.promote_types(out_dtype, torch.float32)  # the product in float32 (float64 for float64 runs)
    return (payload.to(work) * scale.to(work)).to(out_dtype)


def quantized(x, dtype):
    """x as a receiver gets it when it is sent in `dtype` (None: x itself), without building the wire bytes
    (`sim`). A non-finite value (an overflow upstream) arrives as itself, as a bfloat16 cast keeps it, and
    its row's other values as the codec sends them: the run's NaN guard sees the non-finite loss."""
    if dtype is None or x.dtype == dtype:
        return x
    out = decode(*encode(x, dtype), x.dtype)
    return out if dtype not in per_token else torch.where(torch.isfinite(x), out, x.detach())


def wire_encode(x, dtype):
    """encode, with a non-finite value's unit (the rows of x, each with its scale) made to arrive
    non-finite: an int8 or float8 payload cannot carry one, so its unit's scale is sent as NaN."""
    payload, scale = encode(x, dtype)
    if scale is not None:
        scale = torch.where(torch.isfinite(x).all(-1, keepdim=True), scale, float("nan"))
    return payload, scale


def to_bytes(payload, scale):
    """A payload (rows, n) and its float32 scales (rows, 1) or None as the uint8 rows a collective moves,
    each row its payload then its scale."""
    rows = payload.reshape(-1, payload.shape[-1]).view(torch.uint8)
    return rows if scale is None else torch.cat([rows, scale.reshape(-1, 1).view(torch.uint8)], dim=1)


def from_bytes(wire, dtype, n):
    """to_bytes's inverse: (payload (rows, n) in dtype, float32 scales (rows, 1) or None)."""
    payload = wire[:, :n * dtype.itemsize].contiguous().view(dtype)
    return payload, wire[:, n * dtype.itemsize:].contiguous().view(torch.float32) if dtype in per_token else None


def pack(x, dtype):
    """The bytes a rank hands to the collective for x (..., C) sent in `dtype`: (rows, bytes per row) uint8,
    each row its payload then (int8, float8) its float32 scale, so one all-gather moves exactly the counted
    bytes on any backend. A row holding a non-finite value arrives non-finite (wire_encode): the NaN guard
    stops the run, as in `sim`."""
    return to_bytes(*wire_encode(x.reshape(-1, x.shape[-1]), dtype))


def unpack(wire, dtype, like):
    """What a receiver makes of another rank's `pack` output: values shaped and typed like `like`."""
    return decode(*from_bytes(wire, dtype, like.shape[-1]), like.dtype).view_as(like)


def wire_bytes(rows, C, dtype, rotated=None):
    """One message's bytes on the wire: the payload and (int8, float8) a float32 scale per row, or, rotated
    (rotated = (n_packets, unit), `packets`), per packet of the rotated message, its last packet padded."""
    scale = 4 if dtype in per_token else 0
    return rotated[0] * (rotated[1] * dtype.itemsize + scale) if rotated else rows * (C * dtype.itemsize + scale)


def packets(rows, C, dtype, packet_bytes, rotated):
    """(n_packets, unit) of a message of rows x C values sent in `dtype` over a lossy direction, cut into
    packets of packet_bytes (DESIGN section 8, wire format). rotated: the message is rotated first, and
    each packet carries `unit` values of it and (int8, float8) their float32 scale. Otherwise (int8,
    float8) whole rows, each with its scale: `unit` rows a packet, or a row longer than a packet spans
    -unit packets, its scale in the first (a lost scale loses its row)."""
    scale_bytes = 4 if dtype in per_token else 0
    if rotated or not scale_bytes:  # bfloat16 not rotated: its values cut into packets, as full precision's
        unit = max(1, (packet_bytes - scale_bytes) // dtype.itemsize)
        return math.ceil(rows * C / unit), unit
    row = C * dtype.itemsize + scale_bytes
    if row <= packet_bytes:
        unit = packet_bytes // row
        return math.ceil(rows / unit), unit
    spans = math.ceil(row / packet_bytes)
    return rows * spans, -spans


def arrived_values(arrived, rows, C, dtype, unit, packet_bytes):
    """Which values of a whole-row message (not rotated) a receiver can read, from its packets' arrival
    flags: (rows, 1) or (rows, C) bool. A value needs its own packet and its row's scale's."""
    if unit > 0:
        return arrived.repeat_interleave(unit)[:rows, None]
    spans = arrived.view(rows, -unit)  # (rows, packets of a row): the scale is in the first
    where = (4 + torch.arange(C, device=arrived.device) * dtype.itemsize) // packet_bytes  # (C,) each value's packet
    return spans[:, where] & spans[:, :1]


def rescaled(model, C, dtype, unit, packet_bytes):
    """lost_fill='rescale' for a whole-row message (not rotated) whose rows span packets (unit < 0): per
    channel, 1 / P(the value is readable), so that what arrives sums to the message in expectation. A value
    in its row's first packet needs that packet, 1 - q; one further on needs its own packet and the first
    (the scale's): model.both_arrive(its packet's distance from the first). (C,) float64."""
    where = (4 + torch.arange(C) * dtype.itemsize) // packet_bytes  # (C,) each value's packet within its row
    readable = [1.0 - model.stationary_loss] + [model.both_arrive(d) for d in range(1, -unit)]
    return 1.0 / torch.tensor(readable, dtype=torch.float64)[where]
