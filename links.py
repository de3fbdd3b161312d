"""
The network between TP ranks: packet-loss models, their presets, the per-link packet
streams, and the statistics of what was sent and lost (docs/lossy-links.md, "Lossy links").

comms.py performs the collectives; at a sync it asks the run's link which packets of each message
arrive. A message is one rank's partial tensor, cut into packets of packet_bytes; a lost packet arrives
as zeros, and a rank's own contribution never crosses a link. Every directed link j -> r and every
direction of the pass (FWD, BWD) is its own stream with its own generator, seeded from (seed, TP group,
src, dst, direction, purpose): runs are reproducible, and a `sim` process and the `dist` process that
holds rank r draw the same masks for the link j -> r.

    link = link_from(config)        # from train.py's config keys (loss_model, loss_rate, ...)
    link.describe(), link.stats()   # the startup banner's line; packets sent / lost / bursts per direction and point
"""

import contextlib
import math

import numpy as np
import torch
import torch.distributed as dist

from loss_models import GE_PRESETS, BernoulliLoss, GilbertElliottLoss  # noqa: F401 (links' names)
from masks import BWD, FWD, Drawn  # noqa: F401 (FWD, BWD: links' names for the directions)
from quantize import arrived_values, decode, packets, per_token, rescaled, wire_encode
from rotation import Rotation

DIRECTIONS = ("fwd", "bwd")


def exchange(own, sent, link, direction, point, element_size, dtype=None):
    """`sim` mode: own (R, ...) each rank's message, sent (R, ...) the same as it crosses a link (own
    itself, or quantized; packets of element_size bytes per element). Returns (R, ...): for every rank r,
    out_r = own_r + sum_{j != r} sent_j masked by the packets of link j -> r that arrived; in its wire
    format (link.encodes(dtype)), each sender's encoding as each receiver decodes what arrived."""
    out = own.reshape(own.shape[0], -1).clone()  # a rank's own contribution never crosses a link
    if link.encodes(dtype):
        wires = [link.encode(own[j], j, direction, dtype) for j in range(own.shape[0])]
        for r in range(own.shape[0]):
            link.receive_encoded(out[r], wires, r, direction, point, dtype, own.shape[1:])
        return out.view_as(own)
    flat = sent.reshape(sent.shape[0], -1)
    for r in range(own.shape[0]):
        link.receive(out[r], flat, r, direction, point, element_size)
    return out.view_as(own)


class _Stream:
    """One directed link's packet stream in one direction: its own generator and chain state."""

    def __init__(self, seed, device):
        self.device = device
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.bad = torch.zeros((), dtype=torch.bool, device=device)  # Gilbert-Elliott state, starts good
        self.ahead = None  # Gilbert-Elliott states drawn but not used yet (after self.bad's packet)
        self.last_lost = torch.zeros((), dtype=torch.bool, device=device)  # joins bursts across messages
        self.overflow = torch.zeros((), dtype=torch.long, device=device)


class LossyLink:
    """Packet loss on every directed link j -> r between TP ranks.

    model: BernoulliLoss or GilbertElliottLoss, the same for every link.
    directions: which passes lose packets, a subset of (FWD, BWD); the other is lossless.
    A message (one rank's tensor) is cut into packets of packet_bytes; a lost packet arrives as zeros.
    Each (link, direction) has its own random stream, seeded from (seed, TP group, src, dst, direction),
    so runs are reproducible and any process holding a link draws the same masks. Statistics stay on
    the device until read. `purpose` separates the streams of evaluation from those of training.

    A lost packet (docs/lossy-links.md, "When packets are lost"): lost_fill 'zero' or 'rescale' (what arrived from
    another rank scaled by 1/(1-q), q the stationary loss); rotation 'none' or 'hadamard' (rotation.py);
    transport 'unreliable' or 'reliable' (resent until it arrives: lossless numbers, resends counted).
    """
    lossy = True
    ROUND_BINS, MAX_ROUNDS = 16, 10_000  # resend-round histogram: 1, 2, ..., >= 16 rounds; rounds before an error

    def __init__(self, model, seed, tp_group=0, directions=(FWD, BWD), packet_bytes=1500, purpose=0,
                 lost_fill="zero", rotation="none", transport="unreliable"):
        self.model = model
        self.lost_fill, self.rotation, self.transport = lost_fill, rotation, transport
        self.fill_scale = 1.0 / (1.0 - model.stationary_loss) if lost_fill == "rescale" else None
        self.rotate = Rotation(seed, tp_group) if rotation == "hadamard" else None
        self.reliable = transport == "reliable"
        self.seed, self.tp_group, self.purpose = seed, tp_group, purpose  # purpose: 0 training, 1 eval
        self.directions = tuple(directions)
        self.packet_bytes = packet_bytes
        self.streams = {}  # (src, dst, direction) -> _Stream
        self.sent = {}     # (point, direction) -> packets sent (host int)
        self.lost = {}     # (point, direction) -> packets lost (device tensor)
        self.bursts = {}   # (point, direction) -> loss bursts started (device tensor)
        self.source = Drawn()  # where the masks come from: one choice, changed only by masks_from / use

    def use(self, source):
        """Take masks from `source` from now on (pipeline.py: a Planned source for the run)."""
        self.source = source

    @contextlib.contextmanager
    def masks_from(self, source):
        """Take masks from `source` inside the block (a recompute's Replayed tape, a dry run's AllArrive)."""
        previous, self.source = self.source, source
        try:
            yield
        finally:
            self.source = previous

    def begin_round(self, micro_batches):
        """A new step (or eval batch) of micro_batches passes: a Planned source draws afresh."""
        self.source.begin_round(micro_batches)

    def draw(self, stream, n_packets):
        """Lost flags of the next message on stream, and the loss bursts they start."""
        lost = self.model.sample(n_packets, stream)
        previous = torch.cat([stream.last_lost.view(1), lost[:-1]])
        stream.last_lost = lost[-1]
        return lost, (lost & ~previous).sum()

    def loses(self, direction):  # whether a receiver can miss a packet (over a reliable link, never)
        return direction in self.directions and self.model.can_lose and not self.reliable

    def resends(self, direction):  # whether packets are lost on the wire and resent (a reliable link)
        return self.reliable and direction in self.directions and self.model.can_lose

    def describe(self):
        dirs = "+".join(DIRECTIONS[d] for d in self.directions) or "no direction"
        handling = "".join(f", {value}" for value, default in ((self.lost_fill, "zero"), (self.rotation, "none"),
                                                              (self.transport, "unreliable")) if value != default)
        return (f"{self.model.describe()} on {dirs}, stationary loss {self.model.stationary_loss:.4%}, "
                f"mean burst {self.model.mean_burst:.2f} packets, {self.packet_bytes}-byte packets{handling}")

    def packets(self, n_elements, element_size):
        per_packet = max(1, self.packet_bytes // element_size)
        return math.ceil(n_elements / per_packet), per_packet

    def stream(self, src, dst, direction, device):
        key = (src, dst, direction)
        if key not in self.streams:
            parts = [self.seed, self.tp_group, src, dst, direction, self.purpose]
            seed = int(np.random.SeedSequence(parts).generate_state(1)[0])
            self.streams[key] = _Stream(seed, device)
        return self.streams[key]

    def count_sent(self, point, direction, n_packets):
        self.sent[point, direction] = self.sent.get((point, direction), 0) + n_packets

    def deliver(self, point, direction, n_packets, receivers, tp_size, device):
        """Messages of n_packets into each of `receivers` from the tp_size - 1 others, all arriving whole
        (comms.TPComm.count): counted, and over a reliable link each one's resend rounds drawn."""
        if not self.resends(direction):
            self.count_sent(point, direction, n_packets * len(receivers) * (tp_size - 1))
            return
        for j, r in ((j, r) for r in receivers for j in range(tp_size) if j != r):
            self.source.resent(self, (j, r, direction), point, n_packets, device)

    def deliver_counted(self, counter, micro_batches, element_size, receivers, tp_size, device):
        """A step's syncs that ran inside a compiled graph (comms.TPComm.deliver_traced), delivered after it
        as the eager syncs deliver them, from what the counter counted: per stream, micro-batch by
        micro-batch, the points in forward order (the backward's in reverse). Each point must have run
        once per micro-batch; messages of nbytes / element_size elements each."""
        forward, backward, _, _, nbytes, _ = counter.totals()
        points = counter.points  # forward syncs per point, in the model's forward order
        if forward and (set(points.values()) != {micro_batches} or backward not in (0, forward)):
            raise RuntimeError(f"reliable link under torch.compile: sync points ran {points} times, backward "
                               f"{backward}; the draws after a compiled step assume each point once per micro-batch")
        n_packets = self.packets(nbytes // max(1, forward + backward) // element_size, element_size)[0]
        for direction, order in ((FWD, list(points)), (BWD, list(points)[::-1]))[:1 + bool(backward)]:
            for _ in range(micro_batches):
                for point in order:
                    self.deliver(point, direction, n_packets, receivers, tp_size, device)

    def resend_rounds(self, stream, n_packets):
        """One message sent until all n_packets arrived, each round resending the lost ones, drawn from the
        link's stream (sim, dist and a resumed run draw the same; a pipeline stage, in the unpipelined
        order: the mask source's `resent`): each round's (lost flags, bursts started)."""
        rounds, pending = [], n_packets
        while pending:
            if len(rounds) == self.MAX_ROUNDS:
                raise RuntimeError(f"reliable link: a message still lost packets after {self.MAX_ROUNDS} rounds")
            rounds.append(self.draw(stream, pending))
            pending = int(rounds[-1][0].sum())  # a host sync per round: the next round's size
        return rounds

    def count_rounds(self, point, direction, rounds):
        """Count one reliable message's rounds: every transmission as sent, every loss as lost (= a
        retransmission); the round count goes to a histogram kept in `lost` under (point, direction,
        'rounds'), so that checkpoints merge and split it like the other counters."""
        for lost, starts in rounds:
            self.counted(point, direction, lost, starts)
        key = (point, direction, "rounds")
        if key not in self.lost:
            self.lost[key] = torch.zeros(self.ROUND_BINS, dtype=torch.long)
        self.lost[key][min(len(rounds), self.ROUND_BINS) - 1] += 1

    def arrived(self, src, dst, direction, point, n_packets, device):
        """Arrival flags (True = arrived) of one message's packets on link src -> dst, from the source."""
        return self.source.arrived(self, (src, dst, direction), point, n_packets, device)

    def counted(self, point, direction, lost, starts):
        """Add one drawn message to the statistics; its arrival flags."""
        key = (point, direction)
        self.count_sent(point, direction, len(lost))
        self.lost[key] = self.lost.get(key, 0) + lost.sum()
        self.bursts[key] = self.bursts.get(key, 0) + starts
        return ~lost

    def receive(self, acc, messages, r, direction, point, element_size=None):
        """acc (rank r's own flat message) += every other rank's message (flat (n,) tensors, one per rank), masked by
        the packets of link j -> r that arrived; element_size: bytes per element on the wire (default acc's)."""
        n = acc.numel()
        n_packets, per_packet = self.packets(n, element_size or acc.element_size())
        full = n // per_packet  # whole packets; a shorter last packet may follow
        scale = 1 if self.fill_scale is None else self.fill_scale  # lost_fill='rescale': 1/(1-q) on what arrived
        for j, message in enumerate(messages):
            if j != r:
                arrived = self.arrived(j, r, direction, point, n_packets, acc.device)
                if self.rotate is not None:  # rotated at the sender, cut into packets, rotated back here
                    acc.add_((self.rotate.received(message, arrived, j, direction, per_packet) * scale).to(acc.dtype))
                    continue
                body = message[:full * per_packet].view(full, per_packet)  # (packets, elements)
                acc[:full * per_packet].view(full, per_packet).add_(torch.where(arrived[:full, None], body, 0), alpha=scale)
                if full < n_packets:
                    acc[full * per_packet:].add_(torch.where(arrived[full], message[full * per_packet:], 0), alpha=scale)
        return acc

    def encodes(self, dtype):
        """Whether a message in `dtype` crosses a lossy direction in its wire format (encode, receive_encoded):
        int8 and float8 (scales in the packets), and any dtype rotated; else its values cut into packets."""
        return dtype is not None and (dtype in per_token or self.rotate is not None)

    def layout(self, shape, dtype, direction):
        """(n_packets, unit) of a message of `shape` (..., C) in `dtype` (quantize.packets), rotated or not."""
        return packets(math.prod(shape[:-1]), shape[-1], dtype, self.packet_bytes, self.rotates(direction))

    def rotates(self, direction):  # whether a message crossing this direction is rotated first
        return self.rotate is not None and self.loses(direction)

    def encode(self, x, src, direction, dtype):
        """What sender src puts on the wire for x (..., C) over a lossy direction: (payload (units, n) in
        dtype, float32 scale per unit (units, 1) or None). Rotated: the message rotated (in float32 at
        least), then cut into packets, a packet's values quantized with one scale; otherwise per row."""
        if self.rotate is None:
            return wire_encode(x.reshape(-1, x.shape[-1]), dtype)
        n_packets, unit = self.layout(x.shape, dtype, direction)
        work = torch.promote_types(x.dtype, torch.float32)
        return wire_encode(self.rotate.rotate(x.reshape(-1).to(work), src, direction, n_packets, unit), dtype)

    def receive_encoded(self, acc, wires, r, direction, point, dtype, shape):
        """receive for messages in their wire format: acc (rank r's own flat message of `shape`) += every
        other rank's message as decoded from the packets of link j -> r that arrived (a lost packet's
        values and scale are gone: zeros), rotated back where rotated. wires: encode's, one per rank."""
        n_packets, unit = self.layout(shape, dtype, direction)
        rows, C = math.prod(shape[:-1]), shape[-1]
        work = torch.promote_types(acc.dtype, torch.float32)
        fill = 1 if self.fill_scale is None else self.fill_scale  # lost_fill='rescale': 1/(1-q) on what arrived
        if self.fill_scale is not None and self.rotate is None and unit < 0:  # a row over packets: per channel
            fill = rescaled(self.model, C, dtype, unit, self.packet_bytes).to(acc.device, work)
        for j, (payload, scale) in enumerate(wires):
            if j != r:
                arrived = self.arrived(j, r, direction, point, n_packets, acc.device)
                if self.rotate is not None:
                    units = torch.where(arrived[:, None], decode(payload, scale, work), 0)  # (n_packets, unit)
                    values = self.rotate.unrotate(units, j, direction, acc.numel())
                else:
                    readable = arrived_values(arrived, rows, C, dtype, unit, self.packet_bytes)
                    values = torch.where(readable, decode(payload, scale, work), 0)
                acc.add_((values * fill).reshape(-1).to(acc.dtype))
        return acc

    def for_eval(self):
        """The same network with its own evaluation streams, fresh: every eval sees the same masks, training's stay."""
        link = LossyLink(self.model, self.seed, self.tp_group, self.directions, self.packet_bytes, purpose=1,
                         lost_fill=self.lost_fill, rotation=self.rotation, transport=self.transport)
        link.source = self.source.fresh()
        return link

    def state_dict(self):
        """Everything a resumed run needs to draw what an unbroken run draws, and the statistics."""
        streams = {key: {"generator": st.generator.get_state(), "bad": st.bad.cpu(),
                         "ahead": None if st.ahead is None else st.ahead.cpu(),
                         "last_lost": st.last_lost.cpu(), "overflow": st.overflow.cpu()}
                   for key, st in self.streams.items()}
        return {"streams": streams, "sent": dict(self.sent),
                "lost": {k: torch.as_tensor(v).cpu() for k, v in self.lost.items()},
                "bursts": {k: torch.as_tensor(v).cpu() for k, v in self.bursts.items()}}

    def load_state_dict(self, state, device):
        for (src, dst, direction), saved in state["streams"].items():
            stream = self.stream(src, dst, direction, device)
            stream.generator.set_state(saved["generator"])
            stream.bad, stream.last_lost = saved["bad"].to(device), saved["last_lost"].to(device)
            stream.ahead = None if saved["ahead"] is None else saved["ahead"].to(device)
            stream.overflow = saved["overflow"].to(device)
        self.sent = dict(state["sent"])
        self.lost = {k: v.to(device if len(k) == 2 else "cpu") for k, v in state["lost"].items()}  # histograms: host
        self.bursts = {k: v.to(device) for k, v in state["bursts"].items()}

    @staticmethod
    def merge_states(states):
        """The link states of several processes of one TP group -> one: their streams, summed statistics."""
        merged = {"streams": {}, "sent": {}, "lost": {}, "bursts": {}}
        for state in states:
            merged["streams"].update(state["streams"])
            for key in ("sent", "lost", "bursts"):
                for k, v in state[key].items():
                    merged[key][k] = merged[key].get(k, 0) + v
        return merged

    def stats(self, all_processes=False):
        """Totals per direction and per sync point (reads the device counters: a host sync).

        all_processes: sum over every process of the default group (a collective): every
        TP group's links in `sim` data parallelism, every rank's incoming links in `dist`.
        """
        keys = list(self.sent)
        # the same rows on every process: a pipeline stage sends only its own points, so take the plan's
        points = sorted({p for p, _ in keys} | set(self.source.points), key=_model_order)
        rows = {("total",): keys, **{(name,): [k for k in keys if k[1] == d] for d, name in enumerate(DIRECTIONS)},
                **{(p, name): [(p, d)] for p in points for d, name in enumerate(DIRECTIONS)}}
        bins = self.ROUND_BINS if self.reliable else 0  # a reliable link adds its resend-round histogram
        sums = torch.tensor([[sum(self.sent.get(k, 0) for k in ks), sum(int(self.lost[k]) for k in ks if k in self.lost),
                              sum(int(self.bursts[k]) for k in ks if k in self.bursts),
                              *[sum(int(self.lost[(*k, "rounds")][i]) for k in ks if (*k, "rounds") in self.lost)
                                for i in range(bins)]] for ks in rows.values()], dtype=torch.float64)
        if all_processes:
            sums = sums.to(_collective_device())
            dist.all_reduce(sums)
        out = {"points": {p: {} for p in points}}
        for where, (sent, lost, bursts, *rounds) in zip(rows, sums.tolist()):
            summary = {"packets_sent": int(sent), "packets_lost": int(lost), "loss_bursts": int(bursts),
                       "observed_loss_rate": lost / sent if sent else 0.0,
                       "mean_burst_length": lost / bursts if bursts else 0.0}
            if self.reliable:  # every loss was resent; rounds[i]: messages that needed i + 1 rounds
                rounds = [int(n) for n in rounds]
                used = max((i + 1 for i, n in enumerate(rounds) if n), default=0)
                summary.update(retransmissions=int(lost), messages=sum(rounds), messages_resent=sum(rounds[1:]),
                               resend_rounds=sum(i * n for i, n in enumerate(rounds)), max_rounds=used,
                               rounds_histogram=rounds[:used])
            if len(where) == 1:
                out[where[0]] = summary
            else:
                out["points"][where[0]][where[1]] = summary
        for p in points:  # a planned point no process sent yet (the points of a pass that never ran)
            if not any(row["packets_sent"] for row in out["points"][p].values()):
                del out["points"][p]
        return out

    @staticmethod
    def record(stats):
        """The statistics as flat metrics.jsonl keys (stable: sweeps and plots read them)."""
        total = stats["total"]
        record = {k: total[k] for k in ("packets_sent", "packets_lost", "observed_loss_rate",
                                        "loss_bursts", "mean_burst_length")}
        for direction in DIRECTIONS:
            for key in ("packets_sent", "packets_lost", "observed_loss_rate"):
                record[f"{key}_{direction}"] = stats[direction][key]
        if "retransmissions" in total:  # a reliable link: resent packets, and rounds beyond the first
            for key in ("retransmissions", "resend_rounds", "messages_resent"):
                record.update({key: total[key], **{f"{key}_{d}": stats[d][key] for d in DIRECTIONS}})
        gather = [row for p, rows in stats["points"].items() if p.endswith("/gather") for row in rows.values()]
        record.update({f"{key}_gather": sum(row[key] for row in gather) for key in ("packets_sent", "packets_lost")}
                      if gather else {})  # sequence parallelism: the all-gather half's packets (the rest the other's)
        return record


def _model_order(point):
    """Sort key of a sync point in forward order, alike in every process: h0.attn, h0.attn/gather (SP), h0.mlp, ..., exit."""
    layer, _, sublayer = point.partition(".")
    return (int(layer[1:]), ["in", "attn", "mlp"].index(sublayer.split("/")[0]), point) if layer[1:].isdigit() else (math.inf, 0, point)


def _collective_device():
    """Where a collective's tensor must live: the current GPU under NCCL, else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


class LosslessLink:
    """The identity link: every packet of every message arrives."""
    lossy = False
    source = None  # every packet arrives: nothing to draw, plan or replay

    def use(self, source):
        pass

    def masks_from(self, source):
        return contextlib.nullcontext()

    def begin_round(self, micro_batches):
        pass

    def loses(self, direction):
        return False

    rotates = loses

    def describe(self):
        return "none (lossless)"

    def for_eval(self):
        return self


# The link keys of train.py's config and their defaults there (a test checks they agree):
# a caller outside a training run (a test, bench/) may give only the keys it changes.
LINK_DEFAULTS = {"loss_model": "none", "loss_rate": 0.0, "ge_preset": "moderate", "ge_p": -1.0, "ge_r": -1.0,
                 "ge_k": -1.0, "ge_h": -1.0, "loss_fwd": True, "loss_bwd": True, "packet_bytes": 1500, "seed": 1337,
                 "lost_fill": "zero", "sync_rotation": "none", "transport": "unreliable"}
HANDLING = {"lost_fill": ("zero", "rescale"), "sync_rotation": ("none", "hadamard"), "transport": ("unreliable", "reliable")}


def link_from(config, tp_group=0, purpose=0):
    """The link a run's config asks for (a dict of train.py's keys); ValueError names a bad key.

    ge_p, ge_r, ge_k, ge_h: a negative value takes ge_preset's value, so a preset can be
    overridden key by key. tp_group and purpose separate the streams of TP groups, and of
    training (0) and evaluation (1).
    """
    c = {**LINK_DEFAULTS, **{k: v for k, v in config.items() if k in LINK_DEFAULTS}}
    for key in (key for key, allowed in HANDLING.items() if c[key] not in allowed):
        raise ValueError(f"{key}={c[key]!r}: allowed values are {', '.join(repr(a) for a in HANDLING[key])}")
    if c["transport"] == "reliable" and (c["lost_fill"], c["sync_rotation"]) != ("zero", "none"):
        raise ValueError("transport='reliable' resends every lost packet: lost_fill and sync_rotation have nothing to act on")
    loss_model = c["loss_model"]
    if loss_model == "none":
        return LosslessLink()
    if c["packet_bytes"] < 4:
        raise ValueError(f"packet_bytes={c['packet_bytes']} must be at least 4 (one float32 element)")
    directions = tuple(d for d, on in ((FWD, c["loss_fwd"]), (BWD, c["loss_bwd"])) if on)
    if not directions:
        raise ValueError(f"loss_model={loss_model!r} with loss_fwd=False and loss_bwd=False drops nothing; "
                         f"enable a direction or use loss_model='none'")
    if loss_model == "bernoulli":
        if not 0.0 <= c["loss_rate"] <= 1.0:
            raise ValueError(f"loss_rate={c['loss_rate']} must be in [0, 1]")
        model = BernoulliLoss(c["loss_rate"])
    elif loss_model == "gilbert_elliott":
        if c["ge_preset"] not in GE_PRESETS:
            raise ValueError(f"ge_preset={c['ge_preset']!r} is not a preset; presets: {', '.join(GE_PRESETS)}")
        keys = ("ge_p", "ge_r", "ge_k", "ge_h")
        values = [c[key] if c[key] >= 0 else preset for key, preset in zip(keys, GE_PRESETS[c["ge_preset"]])]
        for key, value in zip(keys, values):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{key}={value} must be in [0, 1] (or negative to take ge_preset's value)")
        if values[0] + values[1] == 0:
            raise ValueError("ge_p + ge_r = 0: the chain never changes state; give one of them > 0")
        model = GilbertElliottLoss(*values)
    else:
        raise ValueError(f"loss_model={loss_model!r}; allowed: 'none', 'bernoulli', 'gilbert_elliott'")
    if model.stationary_loss >= 1 and (c["lost_fill"] == "rescale" or c["transport"] == "reliable"):
        raise ValueError(f"lost_fill={c['lost_fill']!r}, transport={c['transport']!r} need a loss rate below 1")
    return LossyLink(model, c["seed"], tp_group, directions, c["packet_bytes"], purpose,
                     c["lost_fill"], c["sync_rotation"], c["transport"])
