"""
Model FLOPs utilisation (MFU): the training FLOPs of the dense model over the device's peak.

Every pattern and execution mode is charged the dense model's FLOPs, so MFU compares the
useful work of configs that simulate, shard or drop syncs on an equal footing. A mixture of experts
is charged its active parameters: the router, and experts_top_k of its n_experts experts per token.
"""

import torch


def flops_per_token(model):
    """Training FLOPs per token of the dense model (PaLM appendix B, as nanoGPT); MoE: active parameters."""
    cfg = model.config
    N = model.get_num_params()
    if cfg.n_experts:  # each expert: the dense MLP's 8C^2 weights (+ biases); a token runs top_k of them
        expert = 8 * cfg.n_embd ** 2 + (5 * cfg.n_embd if cfg.bias else 0)
        N -= cfg.n_layer * (cfg.n_experts - cfg.experts_top_k) * expert
    return 6 * N + 12 * cfg.n_layer * cfg.n_head * (cfg.n_embd // cfg.n_head) * cfg.block_size


def estimate_mfu(model, tokens_per_iter, dt, peak_flops):
    """Achieved dense-model FLOP/s over the device peak. tokens_per_iter counts this process's
    tokens; peak_flops is this process's device peak (peak_flops_per_device)."""
    return flops_per_token(model) * tokens_per_iter / dt / peak_flops


# Dense matmul peak FLOP/s per device, from vendor datasheets (SXM parts, no sparsity).
# 'bf16' is the tensor-core rate used under autocast; 'tf32' the rate for float32 matmuls
# where PyTorch allows TF32 tensor cores (train.py's tf32=True); 'fp32' full float32. The CPU entry is
# rough: cores x 2.5 GHz x 32 fp32 FLOP/cycle (two AVX2 FMA units); pass
# peak_flops=... to train.py for your machine.
PEAK_FLOPS = {
    "H200": {"bf16": 989e12, "tf32": 494e12, "fp32": 67e12},
    "H100": {"bf16": 989e12, "tf32": 494e12, "fp32": 67e12},
    "A100": {"bf16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
    "cpu-core": {"bf16": 80e9, "fp32": 80e9},
}


def peak_flops_per_device(device_type, dtype):
    """The peak of this process's device for `dtype` ('bfloat16', 'float32', ...), or None. A float32
    run's GPU peak is TF32's only where torch lets matmuls use it (step.set_numerics sets the flag)."""
    precision = "fp32" if dtype == "float32" else "bf16"
    if device_type == "cpu":
        return PEAK_FLOPS["cpu-core"][precision] * torch.get_num_threads()
    name = torch.cuda.get_device_name()
    for key, peaks in PEAK_FLOPS.items():
        if key in name:
            return peaks["tf32" if precision == "fp32" and torch.backends.cuda.matmul.allow_tf32 else precision]
    return None  # unknown device: MFU is not reported rather than made up
