"""
Block patterns: which block type each layer is, parsed from a config's text, counted and described.

    parse_block_types('parallel*5,spd', 12)   # ('parallel',)*5 + ('spd',), tiled to 12 layers
    sync_point_names(pattern, tp_size)         # ['h5.mlp', 'h11.mlp']: the syncs of one forward pass
    count_sync_points(pattern, tp_size)        # 2
    exposed_sync_points(pattern, tp_size)      # the syncs whose result the very next sublayer reads
    describe_pattern(pattern)                  # '[parallel*5,spd] x2'
    parse_block_schedule('0:tp;300:spd', 12)   # the pattern in force from each iteration

model.py builds the blocks; this file only names them.
"""

BLOCK_TYPES = ("tp", "spd", "parallel", "ladder")


def parse_block_types(spec, n_layer, key="block_types"):
    """'parallel,spd' or 'parallel*5,spd' (a unit tiled to n_layer) -> n_layer names; key: the config key errors name."""
    tokens = spec.split(",") if isinstance(spec, str) else list(spec)
    unit = []
    for token in tokens:
        name, _, times = str(token).strip().partition("*")
        name = name.strip().lower()
        if name not in BLOCK_TYPES:
            raise ValueError(f"{key}: unknown block type {name!r} in {spec!r}; "
                             f"allowed: {', '.join(BLOCK_TYPES)} (a unit like 'parallel*5,spd' repeats)")
        if times and not (times.strip().isdigit() and int(times) > 0):
            raise ValueError(f"{key}: bad repeat {token.strip()!r} in {spec!r}; write e.g. 'parallel*5'")
        unit += [name] * (int(times) if times else 1)
    if not unit or n_layer % len(unit):
        raise ValueError(f"{key}: a pattern of {len(unit)} blocks ({spec!r}) does not tile n_layer={n_layer}")
    return tuple(unit * (n_layer // len(unit)))


def parse_block_schedule(spec, n_layer, key="block_schedule"):
    """'0:tp;300:spd' -> [(0, tp x n_layer), (300, spd x n_layer)]: the pattern in force from each iteration;
    key: the config key errors name (train.py's '0:<block_types>' when no schedule is set names block_types)."""
    schedule = []
    for part in spec.split(";"):
        start, colon, pattern = part.partition(":")
        if not colon or not start.strip().isdigit():
            raise ValueError(f"block_schedule: {part.strip()!r} in {spec!r} is not iteration:pattern; "
                             f"write e.g. '0:tp;300:spd;450:parallel,spd'")
        if int(start) != 0 if not schedule else int(start) <= schedule[-1][0]:
            raise ValueError(f"block_schedule: {spec!r} must start at iteration 0, and its iterations increase")
        schedule.append((int(start), parse_block_types(pattern, n_layer, key)))
    return schedule


def pattern_at(schedule, iteration):
    """The pattern a schedule (parse_block_schedule) has in force at this iteration."""
    return [pattern for start, pattern in schedule if start <= iteration][-1]


def sync_point_names(block_types, tp_size):
    """The sync points of one forward pass, in order: 'h3.attn' and 'h3.mlp' for a tp or ladder block,
    'h3.mlp' for an spd block, none for a parallel one; 'h3.in' where a ladder block first syncs the
    partials parallel blocks left pending, and 'exit' if partials are pending after the last block."""
    if tp_size == 1:
        return []  # one rank: nothing to synchronise
    points, pending = [], False
    for i, kind in enumerate(block_types):
        if kind == "parallel":
            pending = True
            continue
        points += [f"h{i}.in"] * (kind == "ladder" and pending)
        points += [f"h{i}.attn", f"h{i}.mlp"] if kind in ("tp", "ladder") else [f"h{i}.mlp"]
        pending = False
    return points + ["exit"] * pending


def exposed_sync_points(block_types, tp_size):
    """The sync points whose latency no compute hides (DESIGN section 8): every sync but a ladder
    sublayer's that another sublayer runs behind before it lands: a ladder block's attention sync
    always (its MLP follows), its MLP sync when the next block is a ladder block too."""
    hidden = {f"h{i}.attn" for i, kind in enumerate(block_types) if kind == "ladder"}
    hidden |= {f"h{i}.mlp" for i, kind in enumerate(block_types[:-1]) if kind == block_types[i + 1] == "ladder"}
    return [p for p in sync_point_names(block_types, tp_size) if p not in hidden]


def count_sync_points(block_types, tp_size):
    """Forward syncs per pass: 2 per tp or ladder, 1 per spd, plus one wherever partials are pending."""
    return len(sync_point_names(block_types, tp_size))


def describe_pattern(block_types):
    """('parallel','spd')*6 -> '[parallel,spd] x6': the shortest repeating unit."""
    n = len(block_types)
    for size in range(1, n + 1):
        if n % size == 0 and block_types == block_types[:size] * (n // size):
            break
    unit, runs = block_types[:size], []
    for kind in unit:  # run-length encode the unit: parallel,parallel,spd -> parallel*2,spd
        if runs and runs[-1][0] == kind:
            runs[-1][1] += 1
        else:
            runs.append([kind, 1])
    text = ",".join(k if c == 1 else f"{k}*{c}" for k, c in runs)
    return f"{text} x{n // size}" if len(runs) == 1 and runs[0][1] == 1 else f"[{text}] x{n // size}"


def describe_schedule(schedule, tp_size):
    """The startup line's blocks: the pattern, or every pattern of a schedule with its sync count."""
    text = describe_pattern(schedule[0][1]) if len(schedule) == 1 else "schedule " + "; ".join(
        f"{start}: {describe_pattern(p)} ({count_sync_points(p, tp_size)} syncs)" for start, p in schedule)
    if tp_size > 1:
        return text
    ladder = any("ladder" in p for _, p in schedule)  # an architecture of its own at one rank (DESIGN section 8)
    return text + (" (tp_size=1: ladder blocks are the Ladder Transformer's, the rest the dense block)" if ladder
                   else " (tp_size=1: every block is the dense block)")
