"""
How a TP comm is switched for one pass or one stretch of code (comms.TPComm inherits these): evaluation
through a lossless network or the link's eval streams, a dry pass that only finds shapes, activation
checkpointing's recompute (the same syncs, neither counted again nor drawn again), and bench/'s timing
of the wall time spent in collectives.
"""

import contextlib
import time

import torch

from links import LosslessLink
from masks import AllArrive, Recorded, Replayed


class PassContexts:
    """Mixed into comms.TPComm: needs self.link, self.counter, self.dry, self.replaying, self.timing."""

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
        self.replaying = replay
        try:
            with self.link.masks_from(source()):
                yield
        finally:
            self.replaying = False

    @contextlib.contextmanager
    def timed(self):
        """bench/: the wall time inside (a collective, or the wait for one) added to counter.comm_seconds."""
        start = time.perf_counter()
        yield
        if self.timing:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.counter.comm_seconds += time.perf_counter() - start
