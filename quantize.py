"""
sync_dtype: what a sync's message becomes when it is sent in fewer bits (DESIGN section 8). The
receiver gets the dequantized values; a rank's own contribution never leaves it and stays exact.
"""

import torch

# sync_dtype: what a sync sends, quantized ('' keeps the communication dtype); fp8 and int8 with a
# per-token absmax scale (a float32 per row of C channels, counted in the bytes)
SYNC_DTYPES = {"": None, "bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn, "int8": torch.int8}
per_token = {torch.float8_e4m3fn: 448.0, torch.int8: 127.0}  # dtype -> its largest value


def quantized(x, dtype):
    """x as a receiver gets it when it is sent in `dtype` (None: x itself): bfloat16 by a cast, float8 and
    int8 scaled per token (row) by absmax / the dtype's largest value, rounded, and scaled back.

    A non-finite value (an overflow upstream) arrives as itself, as a bfloat16 cast keeps it, and the
    row's scale is its finite values' absmax: an inf scale would turn every value of the row into NaN
    (0 x inf), numbers that differ from what was sent. The run's NaN guard sees the non-finite loss."""
    if dtype is None or x.dtype == dtype:
        return x
    if dtype not in per_token:
        return x.to(dtype).to(x.dtype)
    work = torch.promote_types(x.dtype, torch.float32)  # the scale and its product: float32, or float64
    sent_dtype, x = x.dtype, x.detach().to(work)
    finite = torch.isfinite(x)
    scale = torch.where(finite, x.abs(), 0).amax(-1, keepdim=True).clamp(min=1e-30) / per_token[dtype]  # (..., 1)
    q = torch.where(finite, x, 0) / scale
    q = q.round().clamp(-127, 127).to(dtype) if dtype == torch.int8 else q.to(dtype)
    return torch.where(finite, q.to(work) * scale, x).to(sent_dtype)
