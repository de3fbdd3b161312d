"""
megatron-core as the tensor-parallel backend (`--tp_backend=megatron`, with `tp_mode='dist'`).

The linear layers of every block become megatron-core's ColumnParallelLinear and
RowParallelLinear, doing the matmuls with megatron's own autograd function
(`linear_with_grad_accumulation_and_async_allreduce`). Megatron's collectives are turned
off: ColumnParallelLinear with `disable_grad_reduce=True` (no input-gradient all-reduce:
the Megatron `f`), RowParallelLinear with its output all-reduce (the Megatron `g`)
replaced by the identity while it runs. comms.py then performs every sync exactly as with
the native backend, so the lossy links, the sync counter and the packet statistics apply
unchanged, and `tp`, `spd` and `parallel` blocks all work: the backend changes the layer
implementation, not the semantics.

The wrappers keep the native parameters (weight (1, out/T, in) and (1, out, in/T), biases
as in model.py) and hand megatron a view of them, so initialisation, checkpoints (the
`sim` layout) and the other backend are interchangeable. megatron-core is imported only
when asked for.
"""

import contextlib
import importlib.util
import warnings

import torch

import model

INSTALL = "pip install 'megatron-core==0.16.1' (Python 3.11) or 'megatron-core>=0.17' (Python 3.12+)"


class BackendError(Exception):
    pass


def available():
    """Whether megatron-core can be imported here (without importing it: that takes seconds)."""
    return importlib.util.find_spec("megatron") is not None and importlib.util.find_spec("megatron.core") is not None


def choose(tp_backend, tp_procs, tp_size, pp_size=1):
    """(use megatron-core?, why) for train.py's tp_backend key; BackendError for a request that cannot be met.
    tp_procs: processes per TP group (the execution mode's processes_per_tp_group)."""
    real_tp = tp_procs > 1
    if tp_backend == "auto":
        if not real_tp:
            return False, "auto: megatron needs tp_mode='dist'"
        if pp_size > 1:  # pipeline.py runs the native layers only (it refuses tp_backend='megatron')
            return False, "auto: pipelines run the native layers"
        return (True, "auto: megatron-core is installed") if available() else \
            (False, "auto: megatron-core is not installed")
    if tp_backend == "megatron" and not real_tp:
        raise BackendError(f"tp_backend='megatron' needs tp_mode='dist' and tp_size > 1 (this run: "
                           f"{tp_procs} process per TP group, tp_size={tp_size}); the native backend simulates TP "
                           f"in one process")
    return tp_backend == "megatron", f"tp_backend={tp_backend!r}"


def _megatron():
    """The parts of megatron-core used here, or BackendError with the install command."""
    if not available():
        raise BackendError(f"tp_backend='megatron' but megatron-core is not installed: {INSTALL}")
    with warnings.catch_warnings():  # it warns at import that Apex/Transformer Engine are absent
        warnings.simplefilter("ignore")
        from megatron.core import tensor_parallel
        from megatron.core.model_parallel_config import ModelParallelConfig
        from megatron.core.tensor_parallel import layers
    if not hasattr(layers, "reduce_from_tensor_model_parallel_region"):
        raise BackendError("this megatron-core's RowParallelLinear no longer calls "
                           "reduce_from_tensor_model_parallel_region; supported: 0.16.x (" + INSTALL + ")")
    return tensor_parallel, ModelParallelConfig, layers


@contextlib.contextmanager
def _no_row_reduce(layers):
    """RowParallelLinear all-reduces its output; comms.py does that instead (at the sync point)."""
    original = layers.reduce_from_tensor_model_parallel_region
    layers.reduce_from_tensor_model_parallel_region = lambda input_, group=None: input_
    try:
        yield
    finally:
        layers.reduce_from_tensor_model_parallel_region = original


def _config(ModelParallelConfig, tp_size, device):
    return ModelParallelConfig(tensor_model_parallel_size=tp_size, use_cpu_initialization=device.type == "cpu",
                               perform_initialization=False, params_dtype=torch.float32,
                               gradient_accumulation_fusion=False, sequence_parallel=False)


class ColumnParallelLinear(model.ColumnParallelLinear):
    """model.ColumnParallelLinear computed by megatron-core's ColumnParallelLinear."""

    def __init__(self, in_features, out_features, tp_size, ranks, bias, groups=1, group=None, device="cpu"):
        super().__init__(in_features, out_features, tp_size, ranks, bias, groups)
        tensor_parallel, ModelParallelConfig, _ = _megatron()
        # kept out of the module tree: it holds no parameters of its own, and its state_dict
        # entries (_extra_state) would make checkpoints differ from the native backend's
        self.__dict__["mcore"] = tensor_parallel.ColumnParallelLinear(
            in_features, out_features, config=_config(ModelParallelConfig, tp_size, torch.device(device)),
            init_method=lambda w: None, bias=False, gather_output=False, skip_weight_param_allocation=True,
            disable_grad_reduce=True, tp_group=group)

    def forward(self, x):
        # x: (1, N, in), megatron's [sequence, batch, hidden] with sequence 1 -> (1, N, out/T)
        out, _ = self.mcore(x, weight=self.weight[0])
        return out if self.bias is None else out + self.bias[0]


class RowParallelLinear(model.RowParallelLinear):
    """model.RowParallelLinear computed by megatron-core's RowParallelLinear, its all-reduce off."""

    def __init__(self, in_features, out_features, tp_size, ranks, bias, group=None, device="cpu"):
        super().__init__(in_features, out_features, tp_size, ranks, bias)
        _, ModelParallelConfig, self._layers = _megatron()
        self.__dict__["mcore"] = self._layers.RowParallelLinear(  # outside the module tree, as above
            in_features, out_features, config=_config(ModelParallelConfig, tp_size, torch.device(device)),
            init_method=lambda w: None, bias=False, input_is_parallel=True, skip_bias_add=True, tp_group=group)
        del self.mcore.weight  # its weight is ours: a view is handed to it at every call

    def forward(self, x):
        # x: (1, N, in/T) -> this rank's partial output (1, N, out), bias/T included as natively
        self.mcore.weight = self.weight[0]
        with _no_row_reduce(self._layers):
            out, _ = self.mcore(x)
        return out if self.bias is None else out + self.bias / self.tp_size


def linear_factory(group, device):
    """The (column, row) layer classes for model.GPT, bound to the TP process group.
    Raises BackendError now, not halfway through building the model, if megatron-core is missing."""
    _megatron()

    def column(*args, **kwargs):
        return ColumnParallelLinear(*args, **kwargs, group=group, device=device)

    def row(*args, **kwargs):
        return RowParallelLinear(*args, **kwargs, group=group, device=device)
    return column, row
