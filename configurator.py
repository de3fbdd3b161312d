"""
Config overrides in the nanoGPT way, but checked.

    python train.py config/train_gpt2_12comm.py --max_iters=20000 --block_types=parallel,spd

Arguments apply in order. A bare path is a Python config file: it runs in a fresh
namespace and every top-level name it assigns overrides the default of that name
(names starting with '_' are private helpers and are ignored); a file may start
from another with include("train_gpt2.py"). `--key=value`
overrides one key; the value is a Python literal, or plain text for a string key.

Every key must already exist among the defaults (the globals at the top of
train.py) and keep its type; an int is accepted where a float is expected. A
mistake is a ConfigError with one line naming the file or key and what is allowed.
"""

import ast
import difflib
import functools
import os
import sys
import types


class ConfigError(Exception):
    pass


def _unknown(key, defaults, where, script):
    close = difflib.get_close_matches(key, defaults, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; the keys are the globals at the top of {script}"
    return ConfigError(f"{where}: unknown config key {key!r}{hint}")


def _typename(value):
    return type(value).__name__


def check_type(key, value, default, where):
    """Return value as the type of default, or raise ConfigError."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif isinstance(default, str):
        if isinstance(value, str):
            return value
    elif type(value) is type(default):
        return value
    raise ConfigError(f"{where}: {key} must be {_typename(default)}, got {_typename(value)} {value!r}")


def _parse_cli_value(key, raw, default):
    if isinstance(default, str):
        try:  # accept a quoted string too: --out_dir='out'
            value = ast.literal_eval(raw)
            return value if isinstance(value, str) else raw
        except (ValueError, SyntaxError):
            return raw
    if isinstance(default, bool) and raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        raise ConfigError(f"--{key}={raw}: not a valid {_typename(default)} (e.g. --{key}={default!r})") from None


def _run_config_file(path, origin):
    """The file's config values; origin[key] becomes the file that set each (an include()d one, if its value
    stands), so that a mistake names the file it is in."""
    if not os.path.isfile(path):
        raise ConfigError(f"config file {path!r} does not exist (config files live in config/, e.g. "
                          f"config/train_shakespeare_char_12comm.py)")
    with open(path) as f:
        source = f.read()
    # include("other.py") applies another config file (relative to this one) in place
    here, included = os.path.dirname(os.path.abspath(path)), {}  # key -> (its file, its value) from an include()

    def include(name):
        values = _run_config_file(os.path.join(here, name), origin)
        included.update({k: (origin[k], v) for k, v in values.items()})
        namespace.update(values)
    namespace = {"include": include}
    try:
        exec(compile(source, path, "exec"), namespace)
    except ConfigError:
        raise
    except SyntaxError as e:
        raise ConfigError(f"config file {path}, line {e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # a config file is user input: report it in one line
        raise ConfigError(f"config file {path}: {type(e).__name__}: {e}") from None
    values = {k: v for k, v in namespace.items()
              if not k.startswith("_") and not isinstance(v, (types.ModuleType, types.FunctionType, type))}
    for k, v in values.items():  # still the included file's value, or set here
        origin[k] = included[k][0] if k in included and included[k][1] is v else path
    return values


def usage(defaults, script):
    """--help: how to call the script, and every key with its default (the type a value must have)."""
    lines = [f"usage: python {script} [config/FILE.py ...] [--key=value ...]",
             "Config files run in order, then --key=value overrides; an unknown key or a wrong type is an error.",
             "keys (default):"]
    lines += [f"  {key} = {value!r}" for key, value in defaults.items()]
    return "\n".join(lines)


def configure(defaults, argv, script="train.py"):
    """Apply config files, in their order, then --key=value overrides, in theirs, to a copy of defaults: an
    override wins over every file, wherever it stands on the command line.

    Returns (config, explicit): the resulting dict and the set of keys that a
    file or the command line set (train.py uses it for defaults that depend on
    other keys, e.g. lr_decay_iters follows max_iters unless set).
    """
    config, explicit = dict(defaults), set()
    if "--help" in argv or "-h" in argv:
        print(usage(defaults, script))
        sys.exit(0)
    files_first = sorted(argv, key=lambda arg: arg.startswith("--"))  # a stable sort: files, then overrides, each in order
    for arg in files_first:
        if arg.startswith("--"):
            key, eq, raw = arg[2:].partition("=")
            if not eq or not key:
                raise ConfigError(f"malformed argument {arg!r}: write --key=value")
            if key not in defaults:
                raise _unknown(key, defaults, f"--{key}", script)
            value = _parse_cli_value(key, raw, defaults[key])
            config[key] = check_type(key, value, defaults[key], f"--{key}")
            explicit.add(key)
        elif arg.startswith("-") or "=" in arg:
            raise ConfigError(f"malformed argument {arg!r}: write --key=value, or give a config file path")
        else:
            origin = {}
            for key, value in _run_config_file(arg, origin).items():
                if key not in defaults:
                    raise _unknown(key, defaults, f"config file {origin[key]}", script)
                config[key] = check_type(key, value, defaults[key], f"config file {origin[key]}")
                explicit.add(key)
    return config, explicit


def check_choices(config, allowed):
    """One-line error unless config[key] is one of allowed[key], for every key of allowed."""
    for key, values in allowed.items():
        if config[key] not in values:
            raise ConfigError(f"{key}={config[key]!r}: allowed values are {', '.join(repr(a) for a in values)}")


def check_ranges(config, limits):
    """One-line error unless lowest <= config[key] <= highest for every key: (lowest, highest) in
    limits (None: no bound). Catches here what torch or numpy would reject later with a traceback."""
    for key, (lowest, highest) in limits.items():
        value = config[key]
        if (lowest is not None and value < lowest) or (highest is not None and value > highest):
            if highest is None:
                raise ConfigError(f"{key}={value!r} must be at least {lowest}")
            raise ConfigError(f"{key}={value!r} must be in [{lowest}, {highest}]")


# Which link keys each loss_model reads (besides the ones every lossy link reads): a key set away from its
# default that the chosen model ignores would leave the run lossless, or lossy otherwise, without a word.
LOSS_MODEL_KEYS = {"none": (), "bernoulli": ("loss_rate",), "gilbert_elliott": ("ge_preset", "ge_p", "ge_r", "ge_k", "ge_h")}
LOSSY_LINK_KEYS = ("loss_fwd", "loss_bwd", "packet_bytes", "loss_eval", "lost_fill", "sync_rotation", "transport")


# train.py's keys whose values are restricted beyond their type, checked before anything runs:
# the choices of each string key, and (lowest, highest) of each number (None: no bound).
# Model shapes (GPTConfig) and link keys (links.link_from) are checked where they are used.
TRAIN_CHOICES = {
    "tp_mode": ("sim", "dist"), "tp_backend": ("native", "megatron", "auto"),
    "dtype": ("auto", "float32", "bfloat16", "float16"), "backend": ("auto", "nccl", "gloo"),
    "nonfinite": ("stop", "skip"), "zero_stage": (0, 1), "activation_checkpointing": ("none", "block"),
    "pp_schedule": ("gpipe", "1f1b"), "lost_fill": ("zero", "rescale"), "sync_rotation": ("none", "hadamard"),
    "transport": ("unreliable", "reliable"), "loss_model": tuple(LOSS_MODEL_KEYS), "optimizer": ("adamw", "muon"), "sync_dtype": ("", "bfloat16", "float8_e4m3fn", "int8")}
TRAIN_RANGES = {
    "eval_interval": (1, None), "log_interval": (1, None), "eval_iters": (1, None), "batch_size": (1, None),
    "gradient_accumulation_steps": (1, None), "tp_size": (1, None), "pp_size": (1, None), "dist_timeout_s": (1, None), "max_iters": (0, None),
    "warmup_iters": (0, None), "lr_decay_iters": (0, None), "seed": (0, 2 ** 64 - 1),  # numpy and torch seeds
    "learning_rate": (0.0, None), "min_lr": (0.0, None), "weight_decay": (0.0, None), "grad_clip": (0.0, None),
    "peak_flops": (0.0, None), "n_experts": (0, None), "experts_top_k": (1, None), "moe_aux_loss_coef": (0.0, None)}


GPT2_NAMES = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")  # init_from pretrained, through transformers


def check_init_from(init_from):
    """init_from is open-ended (a path names a checkpoint to start a new run from), so not a choice."""
    if init_from not in ("scratch", "resume", *GPT2_NAMES) and not os.path.exists(init_from):
        raise ConfigError(f"init_from={init_from!r}: allowed values are 'scratch', 'resume', a GPT-2 name "
                          f"({', '.join(GPT2_NAMES)}), or an existing ckpt.pt, run directory or transformers directory")


def check_device_name(device):
    device = str(device)
    if device not in ("auto", "cpu", "cuda") and not (device.startswith("cuda:") and device[5:].isdigit()):
        raise ConfigError(f"device={device!r}: allowed values are 'auto', 'cpu', 'cuda' and 'cuda:<index>'")


def resolve_device(device):
    """train.py's and sample.py's device: 'auto' -> 'cuda' where there is one, else 'cpu'. ConfigError (one
    line) for a malformed name or a device this machine does not have."""
    import torch  # only the entry points that pick a device need it
    check_device_name(device)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and (not torch.cuda.is_available() or int(device.partition(":")[2] or 0) >= torch.cuda.device_count()):
        found = f"this machine has {torch.cuda.device_count()} CUDA devices" if torch.cuda.is_available() else "CUDA is not available here"
        raise ConfigError(f"device={device!r} but {found}; use --device=cpu or cuda:<index>")
    return device


def check_train_config(config, given=()):
    """ConfigError (one line) for a value of train.py's config that the run would reject later, or that it would
    ignore (given: the keys a config file or --key set)."""
    check_choices(config, TRAIN_CHOICES)
    check_init_from(config["init_from"])
    check_ranges(config, TRAIN_RANGES)
    for key in ("beta1", "beta2"):  # AdamW's own rule
        if not 0.0 <= config[key] < 1.0:
            raise ConfigError(f"{key}={config[key]!r} must be in [0, 1)")
    if not 0.0 < config.get("sync_fraction", 1.0) <= 1.0:  # at least one channel: model_args_from, once the width is final
        raise ConfigError(f"sync_fraction={config['sync_fraction']!r} must be in (0, 1]: the share of d's channels "
                          f"a sync sends")
    if config.get("optimizer") == "muon":
        import torch  # only where Muon is asked for: its optimizer must exist in this torch
        if not hasattr(torch.optim, "Muon"):
            raise ConfigError(f"optimizer='muon' needs torch.optim.Muon (torch >= 2.9); this torch is "
                              f"{torch.__version__}: upgrade torch or use optimizer='adamw'")
    if config.get("optimizer") == "muon" and config.get("pp_size", 1) > 1:
        raise ConfigError(f"optimizer='muon' with pp_size={config['pp_size']} is not built (a pipeline's checkpoint "
                          f"merges AdamW's parameter groups only, so Muon's could not be resumed): use pp_size=1 or "
                          f"optimizer='adamw'")
    if config.get("optimizer") == "muon" and config.get("zero_stage"):
        raise ConfigError("optimizer='muon' with zero_stage=1 is not built (Muon's state is not sharded over "
                          "data-parallel ranks): use zero_stage=0 or optimizer='adamw'")
    check_device_name(config.get("device", "auto"))
    if config.get("backend") == "nccl":
        import torch.distributed  # only where NCCL is asked for: a CPU build of torch has none
        if not torch.distributed.is_nccl_available():
            raise ConfigError("backend='nccl' but this torch has no NCCL (a CPU build): use backend='gloo' or 'auto'")
    if "out_dir" in config and not config["out_dir"]:
        raise ConfigError("out_dir='' names no directory: give the run's directory, e.g. --out_dir=out-mine")
    if config.get("out_dir") and os.path.exists(config["out_dir"]) and not os.path.isdir(config["out_dir"]):
        raise ConfigError(f"out_dir={config['out_dir']!r} is a file, not a directory: name the run's directory")
    for key, idle in (("sync_fraction", 1.0), ("sync_dtype", "")) if config.get("tp_size") == 1 else ():
        if config.get(key, idle) != idle:  # one rank has no sync to shrink: said, never ignored
            raise ConfigError(f"{key}={config[key]!r} does nothing with tp_size=1 (no sync): set tp_size > 1 or "
                              f"leave {key} at its default ({idle!r})")
    if config.get("init_optimizer") and config.get("init_from") == "scratch":
        raise ConfigError("init_optimizer=True takes the AdamW state of init_from's checkpoint: init_from='scratch' "
                          "has none (set init_from to a checkpoint, or init_optimizer=False)")
    if config.get("loss_model", "none") != "none" and config.get("sync_dtype") in ("int8", "float8_e4m3fn") \
            and config.get("packet_bytes", 1500) < 5:
        raise ConfigError(f"packet_bytes={config['packet_bytes']} with sync_dtype={config['sync_dtype']!r}: a packet "
                          f"carries a 4-byte scale and at least one value, so packet_bytes must be at least 5")
    for key, default in (("pp_split", ""), ("pp_schedule", "1f1b")) if config.get("pp_size", 1) == 1 else ():
        if config.get(key, default) != default:  # a pipeline's keys, given without one: said, never ignored
            raise ConfigError(f"{key}={config[key]!r} does nothing with pp_size=1: set pp_size > 1 or leave {key} "
                              f"at its default ({default!r})")
    defaults = train_defaults() if not config.get("n_experts", 0) else {}
    for key in ("experts_top_k", "moe_aux_loss_coef") if defaults else ():  # a mixture's keys, given without one
        if key in config and config[key] != defaults[key]:
            raise ConfigError(f"{key}={config[key]!r} does nothing with n_experts=0 (a dense MLP): set n_experts > 0 "
                              f"or leave {key} at its default ({defaults[key]!r})")
    if config.get("block_schedule") and "block_types" in given:  # the schedule's first pattern is the one in force
        from patterns import parse_block_schedule, parse_block_types
        try:
            first = parse_block_schedule(config["block_schedule"], config["n_layer"])[0][1]
            if first != parse_block_types(config["block_types"], config["n_layer"]):
                raise ConfigError(f"block_types={config['block_types']!r} is not block_schedule={config['block_schedule']!r}"
                                  f"'s first pattern, which is in force from iteration 0: set block_types to it, or "
                                  f"leave block_types out")
        except ValueError:
            pass  # a malformed pattern: train.py names it
    if config.get("sequence_parallel"):
        check_sequence_parallel(config)
    if config.get("loss_model", "none") != "none" and config.get("tp_size") == 1:
        raise ConfigError(f"loss_model={config['loss_model']!r} needs tp_size > 1: with one rank no message "
                          f"crosses a link")
    check_link_keys(config)


def check_link_keys(config):
    """ConfigError for a link key set away from train.py's default that config's loss_model does not read."""
    model = config.get("loss_model", "none")
    read = LOSS_MODEL_KEYS.get(model, ()) + (LOSSY_LINK_KEYS if model != "none" else ())
    ignored = [k for keys in (*LOSS_MODEL_KEYS.values(), LOSSY_LINK_KEYS) for k in keys if k in config and k not in read]
    defaults = train_defaults() if ignored else {}
    for key in (k for k in ignored if config[k] != defaults.get(k, config[k])):
        wanted = next((m for m, keys in LOSS_MODEL_KEYS.items() if key in keys), None)
        hint = (f"only loss_model={wanted!r} reads it" if wanted else "only a lossy link reads it (loss_model="
                "'bernoulli' or 'gilbert_elliott')")
        raise ConfigError(f"{key}={config[key]!r} does nothing with loss_model={model!r}: {hint}; set loss_model "
                          f"or leave {key} at its default ({defaults[key]!r})")


def check_sequence_parallel(config):
    """sequence_parallel=True: what it needs (DESIGN section 10), each mistake in one line."""
    if config.get("tp_size", 1) < 2:
        raise ConfigError(f"sequence_parallel=True needs tp_size > 1 (tp_size={config.get('tp_size')}): "
                          f"with one rank there is no sequence to split")
    if config["block_size"] % config["tp_size"]:
        raise ConfigError(f"sequence_parallel=True: block_size={config['block_size']} must be divisible by "
                          f"tp_size={config['tp_size']} (each rank holds block_size/tp_size tokens)")
    if "ladder" in f"{config.get('block_types', '')},{config.get('block_schedule', '')}":
        raise ConfigError("sequence_parallel=True with ladder blocks: a sublayer would need the all-gather of a "
                          "state whose reduce-scatter lands just before it, so that gather could not be hidden")


def train_defaults(train_py=None):
    """The config keys and defaults of train.py (its block of plain globals), without running it: a fresh dict
    each call, parsed once per file (a sweep checks hundreds of runs). For tools that read config files outside a
    training run (test_configs.py, bench/)."""
    return dict(_parsed_defaults(train_py or os.path.join(os.path.dirname(os.path.abspath(__file__)), "train.py")))


@functools.lru_cache(maxsize=None)
def _parsed_defaults(train_py):
    with open(train_py) as f:
        tree = ast.parse(f.read(), train_py)
    defaults = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == "config_keys":
                break  # the end of the config block
            if isinstance(node.value, ast.Name) and node.value.id in defaults:
                defaults[name] = defaults[node.value.id]  # e.g. lr_decay_iters = max_iters
            else:
                try:
                    defaults[name] = ast.literal_eval(node.value)
                except ValueError:
                    continue  # not a config value
    return defaults
