"""
Where a lossy link's packet masks come from (links.LossyLink.source): one choice at a time, held by the
link. Drawn from the streams as the syncs run (the default); Planned, for pipeline stages, drawn in
the unpipelined order; Recorded and Replayed, for activation checkpointing's recompute; AllArrive,
for a pass that only finds shapes. A source answers two questions for one message on the link
key = (src, dst, direction): which of its packets arrived (`arrived`, an unreliable link), and how
many rounds a reliable link needed to deliver it (`resent`).
"""

import torch

FWD, BWD = 0, 1  # the directions of a pass (links.py's names too)


# Where a lossy link's masks come from: one choice at a time, held by the link (LossyLink.source).
class Drawn:
    """The default: each message's masks drawn from its link's stream as the syncs run."""
    points = ()  # sync points known before they run (a Planned source's)

    def arrived(self, link, key, point, n_packets, device):
        return link.counted(point, key[2], *link.draw(link.stream(*key, device), n_packets))

    def resent(self, link, key, point, n_packets, device):
        """A reliable link's message on key's link: its resend rounds, drawn and counted."""
        link.count_rounds(point, key[2], link.resend_rounds(link.stream(*key, device), n_packets))

    def begin_round(self, micro_batches):
        pass

    def fresh(self):
        return Drawn()


class Planned(Drawn):
    """Pipeline stages (pipeline.py) run a stage's syncs in another order than the unpipelined
    model (micro-batches interleave across stages), but each stream must be drawn in the unpipelined
    order: per step (a "round"), a stream is drawn at once for every micro-batch and every sync point
    of the model (points, in forward order), and this stage takes the masks of its own points."""

    def __init__(self, points, own_points, phases=("",)):
        # phases: a sync point's messages on a link, in the order both passes run them: under sequence
        # parallelism its reduce-scatter ('h3.mlp') then its all-gather ('h3.mlp/gather'), whose backward
        # mirrors run in that order too, while the backward pass runs the points themselves in reverse
        self.args = list(points), list(own_points), tuple(phases)
        self.points = [p + phase for p in points for phase in phases]  # forward order
        self.backward = [p + phase for p in list(points)[::-1] for phase in phases]
        self.own = {p + phase for p in own_points for phase in phases}
        self.queued, self.drawn, self.round_size = {}, set(), 1

    def begin_round(self, micro_batches):
        leftover = [key for key, masks in self.queued.items() if masks]
        if leftover:  # a sync the plan expected never ran: the model and the plan disagree
            raise RuntimeError(f"lossy link: masks drawn for {leftover[0]} were never used")
        self.queued, self.drawn, self.round_size = {}, set(), micro_batches

    def arrived(self, link, key, point, n_packets, device):
        lost, starts = self._planned(link, key, point, n_packets, device, link.draw)
        return link.counted(point, key[2], lost, starts)

    def resent(self, link, key, point, n_packets, device):
        """A reliable link's resend rounds, drawn in the same unpipelined order (each stage would
        otherwise draw its first messages from the stream's start: stage 1 repeating stage 0's draws)."""
        link.count_rounds(point, key[2], self._planned(link, key, point, n_packets, device, link.resend_rounds))

    def _planned(self, link, key, point, n_packets, device, draw):
        """This stage's next draw for `point` on key's link; draw(stream, n_packets): a message's draws."""
        if key not in self.drawn:
            self.drawn.add(key)
            stream = link.stream(*key, device)
            for _ in range(self.round_size):  # the backward pass runs the points in reverse
                for p in self.points if key[2] == FWD else self.backward:
                    drawn = draw(stream, n_packets)
                    if p in self.own:
                        self.queued.setdefault((*key, p), []).append((n_packets, drawn))
        planned, drawn = self.queued[(*key, point)].pop(0)
        if planned != n_packets:
            raise RuntimeError(f"lossy link: sync point {point} sent {n_packets} packets, the plan drew {planned}")
        return drawn

    def fresh(self):
        return Planned(*self.args)


class Recorded:
    """Activation checkpointing: a block's forward keeps every mask it takes from `inner` on its
    tape, in order, so that its recompute in the backward pass (Replayed) sees the same packets."""

    def __init__(self, inner, tape):
        self.inner, self.tape = inner, tape

    @property
    def points(self):
        return self.inner.points

    def arrived(self, link, key, point, n_packets, device):
        arrived = self.inner.arrived(link, key, point, n_packets, device)
        self.tape.setdefault((*key, point), []).append(arrived)
        return arrived

    def resent(self, link, key, point, n_packets, device):  # a recompute counts nothing: no tape needed
        self.inner.resent(link, key, point, n_packets, device)


class Replayed:
    """A checkpointed block's recompute: the masks its forward took, again; nothing counted twice."""
    points = ()

    def __init__(self, tape):
        self.tape = tape

    def arrived(self, link, key, point, n_packets, device):
        return self.tape[(*key, point)].pop(0)


class AllArrive:
    """A pass that only finds shapes (comms.TPComm.dry_run): every packet arrives, nothing drawn or counted."""
    points = ()

    def arrived(self, link, key, point, n_packets, device):
        return torch.ones(n_packets, dtype=torch.bool, device=device)
