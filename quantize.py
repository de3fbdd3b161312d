"""
sync_dtype: what a sync's message becomes when it is sent in fewer bits (DESIGN section 8). The
receiver gets the dequantized values; a rank's own contribution never leaves it and stays exact.
What crosses is what is counted: `pack` gives the wire bytes (the payload in its dtype, and for int8
and float8 a float32 scale per row), `unpack` what a receiver makes of them; `sim` applies the same
codec without the bytes (`quantized`), so both modes deliver the same values.
"""

import torch

# sync_dtype: what a sync sends, quantized ('' keeps the communication dtype); fp8 and int8 with a
# per-token absmax scale (a float32 per row of C channels, counted in the bytes)
SYNC_DTYPES = {"": None, "bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn, "int8": torch.int8}
per_token = {torch.float8_e4m3fn: 448.0, torch.int8: 127.0}  # dtype -> its largest value


def encode(x, dtype):
    """x's message in `dtype` as it crosses: (payload in dtype, float32 scale per row (..., 1), or None for
    bfloat16). A row's scale is its finite values' absmax / the dtype's largest value; a non-finite value
    is sent as 0 (`quantized` and `pack` say what the receiver gets in its place)."""
    if dtype not in per_token:
        return x.detach().to(dtype), None
    x = x.detach()
    finite = torch.isfinite(x)
    limit = per_token[dtype]
    work = torch.promote_types(x.dtype, torch.float32)  # a bfloat16 message's scale is still a float32's
    absmax = torch.where(finite, x, 0).abs().amax(-1, keepdim=True).to(work).clamp(min=1e-30)
    scale = (absmax / limit).float()  # (..., 1): what the wire carries
    q = (torch.where(finite, x, 0).to(work) / scale.to(work)).clamp(-limit, limit)
    return (q.round() if dtype == torch.int8 else q).to(dtype), scale


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


def pack(x, dtype):
    """The bytes a rank hands to the collective for x (..., C) sent in `dtype`: (rows, bytes per row) uint8,
    each row its payload then (int8, float8) its float32 scale, so one all-gather moves exactly the counted
    bytes on any backend. An int8 or float8 payload cannot carry a non-finite value: its row's scale is
    sent as NaN, so the row arrives non-finite (the NaN guard stops the run, as in `sim`)."""
    payload, scale = encode(x, dtype)
    rows = payload.reshape(-1, x.shape[-1]).view(torch.uint8)
    if scale is None:
        return rows
    scale = torch.where(torch.isfinite(x).all(-1, keepdim=True), scale, float("nan"))
    return torch.cat([rows, scale.reshape(-1, 1).view(torch.uint8)], dim=1)


def unpack(wire, dtype, like):
    """What a receiver makes of another rank's `pack` output: values shaped and typed like `like`."""
    C = like.shape[-1]
    payload = wire[:, :C * dtype.itemsize].contiguous().view(dtype)
    scale = wire[:, C * dtype.itemsize:].contiguous().view(torch.float32) if dtype in per_token else None
    return decode(payload, scale, like.dtype).view_as(like)
