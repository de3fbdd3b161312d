"""
The sync counter: every sync and mirror exchange as it really happens, eager or compiled, with its
bytes and, for ladder syncs, whether another sublayer ran while it was in flight. comms.py counts
into it; train.py checks it against the model's analytic counts (patterns.py).
"""

import numpy as np
import torch

FIRST_SLOT = 5  # SyncCounter's tally: forward, backward, sync_bytes, hidden, hidden_bwd, then one slot per sync point
class SyncCounter:
    """Counts forward syncs and backward mirror exchanges as they really happen, eager or compiled;
    the model's analytic count (GPT.sync_points) is checked against it, so a miscounting block is caught.

    Every count goes through `add`, into a tally laid out [forward, backward, sync_bytes, hidden (ladder
    syncs that landed after another sublayer ran: not exposed), hidden_bwd (their mirror exchanges, sent
    behind that sublayer's backward), one slot per sync point]. Eager code adds on the host (a numpy array: no kernel, no device sync); a compiled graph
    cannot run Python per call, so it adds in place to the same layout in a tensor on its own device,
    with no guard on the counts (an int would be a guard, and every new value a recompile). Reading sums
    the two. `slots` maps a sync point to its index: fixed by the model before anything is compiled
    (GPT.__init__, `lay_out`), grown eagerly for a point it did not name."""

    def __init__(self):
        self.slots, self.host, self.traced = {}, np.zeros(FIRST_SLOT, dtype=np.int64), None
        self.in_graph = False  # a compiled graph counted into `traced` (set while tracing): reads include it
        self.reset()

    def lay_out(self, points, device):
        """Name every sync point the model can count and make the compiled tally on the model's device
        before torch.compile first traces a pass: an existing tensor is one fixed graph input (made while
        tracing, its creation changed a guard and the second call recompiled the whole model)."""
        self.slots = {point: FIRST_SLOT + i for i, point in enumerate(points)}
        self.traced = torch.zeros(FIRST_SLOT + len(self.slots), dtype=torch.long, device=device)
        self.reset()

    def move_to(self, device):  # GPT.to(device): the tally goes where the weights go
        if self.traced is not None and self.traced.device != device:
            self.traced = self.traced.to(device)

    def reset(self):
        self.replicated_bytes = 0  # payload of the replicated-gradient all-reduce (`dist` mode)
        self.moved_bytes = 0  # `dist`, eager: the bytes handed to the syncs' collectives (what they moved)
        self.comm_seconds = 0.0  # wall time inside collectives, when the comm's `timing` is on
        self.recomputed = 0  # syncs run again by activation checkpointing (not sync points: `dist` repeats the traffic)
        self.host = np.zeros(FIRST_SLOT + len(self.slots), dtype=np.int64)
        if self.in_graph:  # an eager run launches no kernel here either
            self.traced.zero_()

    def add(self, point, nbytes, forward, backward, hidden=0, device=None, hidden_bwd=0):
        """Count `forward` syncs and `backward` mirror exchanges at `point`, each a message of nbytes,
        `hidden` ladder syncs landed behind another sublayer's compute, and `hidden_bwd` of their mirror
        exchanges sent behind its backward."""
        if torch.compiler.is_compiling():
            if self.traced is None or self.traced.device != device:  # a model that did not lay it out (recompiles once)
                self.traced = torch.zeros(FIRST_SLOT + len(self.slots), dtype=torch.long, device=device)
            tally, self.in_graph = self.traced, True
        else:
            if point not in self.slots:
                self.slots[point] = FIRST_SLOT + len(self.slots)
            if len(self.host) < FIRST_SLOT + len(self.slots):
                self.host = np.pad(self.host, (0, FIRST_SLOT + len(self.slots) - len(self.host)))
            tally = self.host
        tally[0] += forward
        tally[1] += backward
        tally[2] += nbytes * (forward + backward)
        tally[3] += hidden
        tally[4] += hidden_bwd
        if point in self.slots:
            tally[self.slots[point]] += forward

    def _read(self):  # a host sync after a compiled pass, on a GPU
        counts = np.pad(self.host, (0, FIRST_SLOT + len(self.slots) - len(self.host)))
        if self.in_graph:  # an eager run reads no device tensor (no host sync)
            counts[:len(self.traced)] += self.traced.cpu().numpy()
        return counts

    def totals(self):
        """[forward, backward, hidden, hidden_bwd, sync_bytes, moved_bytes] from one read (one host sync
        after a compiled pass)."""
        counts = self._read()
        return [int(counts[0]), int(counts[1]), int(counts[3]), int(counts[4]), int(counts[2]), self.moved_bytes]

    @property
    def forward(self):
        return int(self._read()[0])

    @property
    def backward(self):
        return int(self._read()[1])

    @property
    def sync_bytes(self):
        return int(self._read()[2])

    @property
    def hidden(self):
        return int(self._read()[3])

    @property
    def points(self):
        """Sync point name -> forward syncs since the last reset, in the order the slots were named."""
        counts = self._read()
        return {p: int(counts[i]) for p, i in self.slots.items() if i < len(counts) and counts[i]}
