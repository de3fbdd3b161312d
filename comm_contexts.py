"""
How a TP comm is switched for one pass or one stretch of code (comms.TPComm inherits these): evaluation
through a lossless network or the link's eval streams, a dry pass that only finds shapes, activation
checkpointing's recompute (the same syncs, neither counted again nor drawn again), sequence parallelism's
saving of a gathered state as its shard, and bench/'s timing of the wall time spent in collectives.
"""

import contextlib
import time
import weakref

import torch

from links import FWD, LosslessLink
from masks import AllArrive, Recorded, Replayed


class PassContexts:
    """Mixed into comms.TPComm: needs self.link, self.counter, self.dry, self.replaying, self.timing."""
    shards = None  # inside saving_shards: id(gathered state) -> (a weak reference to it, this rank's shard)
    checkpointed = False  # inside a checkpointed block (checkpoint_contexts): nothing of it is saved to shard

    @contextlib.contextmanager
    def saving_shards(self):
        """Around a training forward pass. Under sequence parallelism in `dist` over a lossless network, every
        rank's gathered state is the same, so autograd may keep what it saves of one (a LayerNorm's input) as
        this rank's shard and gather it again in the backward pass: Megatron-SP's saving, 1/T of that memory
        for one all-gather more per saved state (counted in the bytes moved). Elsewhere nothing changes."""
        if not (self.sequence_parallel and self.moves_bytes and torch.is_grad_enabled()) or self.link.loses(FWD) \
                or self.sync_dtype is not None or self.sync_fraction < 1 or torch.compiler.is_compiling():
            # quantized: a rank's own shard exact, the others' not; partial: the private channels differ
            yield
            return
        self.shards = {}
        try:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
                yield
        finally:
            self.shards = None

    def keep_shard(self, whole, shard=None):
        """Under saving_shards: whole (1, B, L, C), the same on every rank (the embedding, a sync's gathered state,
        a per-token function of one), and this rank's tokens of it (1, B, L/T, C; None: cut here): what autograd
        saves of whole, or of a view of it, is kept as the shard."""
        if self.shards is not None:
            shard = self.tokens_of(whole) if shard is None else shard
            self.shards[id(_root(whole))] = (weakref.ref(_root(whole)), shard.detach())

    def normed(self, norm, b):
        """norm(b) of a synced state b. Under saving_shards, LayerNorm being per token, the result is the same on
        every rank too: what the next layer saves of it (in autocast's dtype, as the layer would cast it) is
        kept as this rank's shard."""
        x = norm(b)
        if self.shards is not None and not self.checkpointed and self._shard_of(b) is not None:
            if torch.is_autocast_enabled(x.device.type):
                x = x.to(torch.get_autocast_dtype(x.device.type))
            self.keep_shard(x)
        return x

    def _shard_of(self, tensor):
        """This rank's kept shard of tensor (by its base), or None. An id is reused once its tensor is freed,
        and how soon differs between ranks: only the live tensor keep_shard was given matches (its weak
        reference), else a rank would gather in the backward pass where another does not, and both hang."""
        ref, shard = self.shards.get(id(_root(tensor)), (None, None))
        return shard if ref is not None and ref() is _root(tensor) else None

    def _pack(self, saved):
        shard = self._shard_of(saved)
        return saved if shard is None else _Shard(shard, saved.size(), saved.stride(), saved.storage_offset())

    def _unpack(self, packed):
        if not isinstance(packed, _Shard):
            return packed
        whole = self.gather(packed.shard, FWD, "")[0]  # contiguous (1, B, L, C), as the tensor it was cut from
        return whole.as_strided(packed.size, packed.stride, packed.offset)  # the view autograd saved

    @contextlib.contextmanager
    def evaluating(self, lossy=False):
        """Evaluate through a lossless network, or (lossy) the link's own eval streams, fresh at every eval."""
        training_link = self.link
        self.link = training_link.for_eval() if lossy else LosslessLink()
        try:
            yield
        finally:
            self.link = training_link

    @contextlib.contextmanager
    def dry_run(self):
        """A pass that only finds shapes (pipeline stages, before the first step): nothing counted or drawn."""
        self.dry = True
        try:
            with self.link.masks_from(AllArrive()):
                yield
        finally:
            self.dry = False

    def checkpoint_contexts(self):
        """torch.utils.checkpoint's context_fn, once per checkpointed block: (around its forward,
        around its recompute). The recompute computes the same function: its syncs are not
        counted again, and a lossy link hands back the packet masks this block's forward drew
        (kept on the block's own tape, freed with its graph) instead of drawing new ones."""
        tape = {}
        return self._taped(lambda: Recorded(self.link.source, tape)), self._taped(lambda: Replayed(tape), True)

    @contextlib.contextmanager
    def _taped(self, source, replay=False):
        self.replaying, self.checkpointed = replay, True  # a checkpointed block's activations are not saved
        try:
            with self.link.masks_from(source()):
                yield
        finally:
            self.replaying, self.checkpointed = False, False

    @contextlib.contextmanager
    def timed(self):
        """bench/: the wall time inside (a collective, or the wait for one) added to counter.comm_seconds."""
        start = time.perf_counter()
        yield
        if self.timing:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.counter.comm_seconds += time.perf_counter() - start


def _root(tensor):
    """The tensor a view was cut from (itself if it is none): autograd saves views, shards are kept by their base."""
    return tensor if tensor._base is None else tensor._base


class _Shard:
    """What autograd keeps of a gathered state under saving_shards: this rank's shard, gathered when unpacked."""

    def __init__(self, shard, size, stride, offset):
        self.shard, self.size, self.stride, self.offset = shard, size, stride, offset
