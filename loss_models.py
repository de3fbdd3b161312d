"""
The packet-loss models of a link (docs/lossy-links.md, "Lossy links"): Bernoulli and Gilbert-Elliott, and the
named Gilbert-Elliott presets. A model draws the lost flags of the next packets of one link's
stream (links.py owns the streams, the messages and the statistics).
"""

import math

import torch


class BernoulliLoss:
    """Each packet is lost independently with probability loss_rate."""
    name = "bernoulli"

    def __init__(self, loss_rate):
        self.loss_rate = loss_rate

    @property
    def stationary_loss(self):
        return self.loss_rate

    @property
    def mean_burst(self):
        """Mean run of consecutive lost packets: 1 / (1 - q)."""
        return 1.0 / (1.0 - self.loss_rate) if self.loss_rate < 1 else math.inf

    @property
    def can_lose(self):
        return self.loss_rate > 0

    def both_arrive(self, distance):
        """P(a packet and the one `distance` after it on the stream both arrive): independent, (1 - q)^2."""
        return (1.0 - self.loss_rate) ** 2

    def describe(self):
        return f"bernoulli(loss_rate={self.loss_rate:g})"

    def sample(self, n, stream):
        """Lost flags of the next n packets of one link's stream. Below 1e-4 the uniforms are float64: float32's
        steps of 2^-24 would make a rate of 1e-7 come out as 1.2e-7 (the studies' rates keep their float32 masks)."""
        dtype = torch.float64 if self.loss_rate < 1e-4 else torch.float32
        return torch.rand(n, generator=stream.generator, device=stream.device, dtype=dtype) < self.loss_rate


class GilbertElliottLoss:
    """A two-state Markov chain per link (netem's `loss gemodel p r 1-h 1-k`).

    p = P(good -> bad), r = P(bad -> good), checked once per packet; a packet is
    lost with probability 1-k in the good state and 1-h in the bad state. The
    stationary bad share is p/(p+r), the mean bad-state run 1/r packets, and the
    chain's state carries over from one message to the next on the same link
    (every chain starts in the good state).

    Sampling draws run lengths, not packets: one geometric draw per state run,
    then the per-packet states by a cumulative sum, all on the message's device,
    `block` packets ahead of the messages that use them.
    """
    name = "gilbert_elliott"

    def __init__(self, p, r, k, h):
        self.p, self.r, self.k, self.h = map(float, (p, r, k, h))  # an int 0: log1p(-0) is +0.0, not -0.0
        self.mean_run = 0.5 * (1 / max(p, 1e-12) + 1 / max(r, 1e-12))  # mean length of a run, either state
        self._log_stay_cache = {}

    @property
    def stationary_bad(self):
        return self.p / (self.p + self.r)

    @property
    def stationary_loss(self):
        bad = self.stationary_bad
        return (1 - bad) * (1 - self.k) + bad * (1 - self.h)

    @property
    def mean_burst(self):
        """Mean run of consecutive lost packets in the stationary chain.

        = P(lost) / P(a loss burst starts at a packet), with
        P(start) = sum over (s_prev, s) of pi(s_prev) (1 - loss(s_prev)) T(s_prev -> s) loss(s).
        """
        pi = {0: 1 - self.stationary_bad, 1: self.stationary_bad}
        loss = {0: 1 - self.k, 1: 1 - self.h}
        move = {(0, 0): 1 - self.p, (0, 1): self.p, (1, 0): self.r, (1, 1): 1 - self.r}
        start = sum(pi[a] * (1 - loss[a]) * move[a, b] * loss[b] for a in (0, 1) for b in (0, 1))
        return self.stationary_loss / start if start > 0 else (math.inf if self.stationary_loss > 0 else 0.0)

    @property
    def can_lose(self):
        return self.k < 1 or (self.p > 0 and self.h < 1)

    def both_arrive(self, distance):
        """P(a packet and the one `distance` after it both arrive), in the stationary chain. The chain's
        d-step transition is pi + (1-p-r)^d (I - pi), so with a_s the arrival probability in state s this is
        E[a]^2 + (1-p-r)^d Var[a] under pi: above E[a]^2 where bad states come in runs."""
        bad = self.stationary_bad
        mean = (1 - bad) * self.k + bad * self.h
        return mean ** 2 + (1 - self.p - self.r) ** distance * ((1 - bad) * self.k ** 2 + bad * self.h ** 2 - mean ** 2)

    def describe(self):
        return f"gilbert_elliott(p={self.p:g}, r={self.r:g}, k={self.k:g}, h={self.h:g})"

    block = 65536  # chain states are drawn this many packets ahead, so small messages are cheap

    def bad_states(self, n, stream):
        """States (True = bad) of the next n packets of the stream's chain."""
        parts = []
        while n > 0:
            if stream.ahead is None or len(stream.ahead) == 0:
                stream.ahead = self.draw_states(max(n, self.block), stream)
            parts.append(stream.ahead[:n])
            stream.ahead, n = stream.ahead[n:], n - len(parts[-1])
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def draw_states(self, n, stream):
        """The chain's next n states (True = bad) from its state stream.bad, which it updates."""
        device = stream.device
        # Runs needed to cover n packets: at most n + 1 (every run after the first has
        # >= 1 packet). Fewer suffice but for a probability < 1e-16 (a lower-tail bound
        # for sums of geometric variables); runs that are not needed are discarded.
        n_runs = min(n + 1, math.ceil(2 * n / self.mean_run) + 400)
        u = torch.rand(n_runs, generator=stream.generator, device=device, dtype=torch.float64)
        run_bad = _odd(n_runs, device) ^ stream.bad  # run 0 is in the last state, then they alternate
        log_stay = self._log_stay(device)[run_bad.long()]  # log P(stay) per packet in each run's state
        # Geometric on {1, 2, ...} by inversion; P(stay) = 1 gives an endless run (inf -> n)
        lengths = (torch.log1p(-u) / log_stay).nan_to_num_(nan=0.0, posinf=n).floor_().clamp_(max=n).long() + 1
        lengths[0] -= 1  # run 0 continues the previous message's last state: memoryless, so Geometric - 1
        ends = lengths.cumsum(0)
        stream.overflow += (ends[-1] < n).long()  # never seen; counted rather than assumed
        ends = ends.clamp_(max=n)
        ends[-1] = n  # (if the runs ever fell short, the last one would be stretched)
        lengths = torch.diff(ends, prepend=ends.new_zeros(1))
        bad = torch.repeat_interleave(run_bad, lengths, output_size=n)  # no host sync
        stream.bad = bad[-1]
        return bad

    def _log_stay(self, device):
        """[log P(stay good), log P(stay bad)] as float64 on device (cached)."""
        key = str(device)
        if key not in self._log_stay_cache:
            values = [math.log1p(-self.p) if self.p < 1 else -math.inf, math.log1p(-self.r) if self.r < 1 else -math.inf]
            self._log_stay_cache[key] = torch.tensor(values, dtype=torch.float64, device=device)
        return self._log_stay_cache[key]

    def sample(self, n, stream):
        bad = self.bad_states(n, stream)
        if self.k == 1 and self.h == 0:  # the classic Gilbert model: lost exactly in the bad state
            return bad
        u = torch.rand(n, generator=stream.generator, device=stream.device)
        return u < torch.where(bad, 1 - self.h, 1 - self.k)


# Named Gilbert-Elliott settings: (p, r, k, h). `zero` is the lossless control; the
# others span light to heavy loss and short to long bursts. Their stationary loss rates
# and mean burst lengths are computed by GilbertElliottLoss (the table in docs/lossy-links.md is
# checked against them by tests/test_lossy.py).
GE_PRESETS = {
    "zero": (0.0, 1.0, 1.0, 1.0),
    "light": (0.0005, 0.5, 1.0, 0.0),
    "moderate": (0.005, 0.5, 1.0, 0.0),
    "heavy": (0.025, 0.5, 1.0, 0.0),
    "bursty": (0.001, 0.1, 1.0, 0.0),
    "noisy": (0.01, 0.25, 0.998, 0.25),
}


_ODD = {}


def _odd(n, device):
    """[False, True, False, ...] of length n on device (cached: it is asked for every message)."""
    key = str(device)
    if key not in _ODD or len(_ODD[key]) < n:
        _ODD[key] = torch.arange(max(n, 2 * len(_ODD.get(key, ()))), device=device) % 2 == 1
    return _ODD[key][:n]
