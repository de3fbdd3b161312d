"""
Sample text from a trained checkpoint (nanoGPT's sample.py, for any block pattern).

$ python sample.py --out_dir=out-shakespeare-char --start="ROMEO:" --num_samples=3
$ python sample.py --out_dir=out-gpt2-12comm --start=FILE:prompt.txt --max_new_tokens=200

The checkpoint is in the `sim` layout whatever mode or backend trained it, so one process
holds every TP rank and samples from TP rank 0's logits over a lossless network (as
evaluation does). The text is decoded with the run's meta.pkl (char-level data) or GPT-2 BPE.
"""

import os
import pickle
import sys
from contextlib import nullcontext

import torch

import checkpoint as ckpt
import configurator
from model import describe_pattern

# -----------------------------------------------------------------------------
out_dir = "out-shakespeare-char"  # the run to sample from: out_dir/ckpt.pt
start = "\n"  # the prompt, or FILE:path to read it from a file
num_samples = 3
max_new_tokens = 300
temperature = 0.8  # < 1 sharpens the distribution, > 1 flattens it
top_k = 200  # keep only the top_k most likely tokens; 0 keeps all
seed = 1337
device = "auto"  # 'auto' (cuda if available), 'cpu', 'cuda', 'cuda:1', ...
# -----------------------------------------------------------------------------
try:
    _defaults = {k: v for k, v in globals().items() if not k.startswith("_") and isinstance(v, (int, float, str))}
    _config, _ = configurator.configure(_defaults, sys.argv[1:], script="sample.py")
    for _key in ("num_samples", "max_new_tokens"):
        if _config[_key] < 1:
            raise configurator.ConfigError(f"{_key}={_config[_key]} must be at least 1")
    if _config["temperature"] <= 0:
        raise configurator.ConfigError(f"temperature={_config['temperature']} must be > 0")
    if _config["top_k"] < 0:
        raise configurator.ConfigError(f"top_k={_config['top_k']} must be >= 0 (0 keeps every token)")
    globals().update(_config)
    device = configurator.resolve_device(device)  # 'auto': cuda where there is one
except configurator.ConfigError as e:
    sys.exit(f"error: {e}")

ckpt_path = os.path.join(out_dir, "ckpt.pt")
if not os.path.exists(ckpt_path):
    sys.exit(f"error: {ckpt_path} does not exist: train a model into --out_dir first (python train.py ...)")
try:
    checkpoint = ckpt.load(ckpt_path, device)
except ckpt.CheckpointError as e:
    sys.exit(f"error: {e}")
run_config = checkpoint["config"]

# the model as the run computed it (its sync width and dtype, a schedule's pattern in force), all TP ranks
# in this process, lossless; without sequence parallelism: a growing sample does not split into tp_size shards
model = ckpt.model_as_run(checkpoint, device, sequence_parallel=False).eval()
if run_config.get("sequence_parallel") and run_config.get("sync_dtype"):
    print(f"note: the run quantized its syncs under sequence parallelism (two-shot {run_config['sync_dtype']}); "
          f"sampling syncs without it (one-shot {run_config['sync_dtype']}), a slightly different function")
gptconf = model.config

# the tokenizer the run's data was prepared with
here = os.path.dirname(os.path.abspath(__file__))
data_dir = run_config.get("data_dir") or os.path.join(here, "data", run_config["dataset"])
meta_path = os.path.join(data_dir, "meta.pkl")
if os.path.exists(meta_path):
    try:
        with open(meta_path, "rb") as f:
            meta = pickle.load(f)
        stoi, itos = meta["stoi"], meta["itos"]
    except Exception as e:  # an empty or cut-short file (a prepare run killed mid-write): say which
        sys.exit(f"error: {meta_path} is not readable ({type(e).__name__}); run the dataset's prepare.py again")
    encode = lambda s: [stoi[c] for c in s]  # noqa: E731
    decode = lambda ids: "".join(itos[i] for i in ids)  # noqa: E731
    vocab = len(itos)
elif gptconf.vocab_size < 50257:  # not GPT-2's: decoding with GPT-2's BPE would be another text
    sys.exit(f"error: {meta_path} is missing and the model's vocabulary ({gptconf.vocab_size}) is not GPT-2's: "
             f"prepare the run's data again (its meta.pkl holds the tokenizer)")
else:
    sys.path.insert(0, os.path.join(here, "data"))
    from common import PrepareError, gpt2_encoding
    try:
        enc = gpt2_encoding()
    except PrepareError as e:
        sys.exit(f"error: GPT-2 tokenizer: {e}")
    encode = lambda s: enc.encode(s, allowed_special={"<|endoftext|>"})  # noqa: E731
    decode, vocab = enc.decode, enc.n_vocab  # 50257: the model's padding ids are never sampled
    stoi = None

if start.startswith("FILE:"):
    prompt_path = start[len("FILE:"):]
    if not os.path.isfile(prompt_path):
        sys.exit(f"error: --start=FILE:{prompt_path}: " + ("a directory, not a file" if os.path.isdir(prompt_path) else "no such file"))
    try:
        with open(prompt_path, encoding="utf-8") as f:
            start = f.read()
    except UnicodeDecodeError as e:
        sys.exit(f"error: --start=FILE:{prompt_path} is not UTF-8 text (byte {e.start}): save the prompt as UTF-8")
if stoi is not None:
    unknown = sorted({c for c in start if c not in stoi})
    if unknown:
        sys.exit(f"error: --start has characters the vocabulary of {meta_path} lacks: {''.join(unknown)!r}")
start_ids = encode(start)
if not start_ids:
    sys.exit("error: --start is empty: give at least one token of prompt (the default is a newline)")

# what of the run's syncs sampling reproduces (their width and dtype) and what it does not (a lossy link)
syncs = [f"{key} {run_config[key]}" for key, plain in (("sync_fraction", 1.0), ("sync_dtype", "")) if run_config.get(key, plain) != plain]
lost = run_config.get("loss_model", "none")
syncs.append("lossless" + (f" (the run's link: {lost})" if lost != "none" else ""))
print(f"sampling from {ckpt_path}: iteration {checkpoint['iter_num']}, best val loss "
      f"{checkpoint['best_val_loss']:.4f} | blocks: {describe_pattern(gptconf.block_types)} | "
      f"tp={gptconf.tp_size} ({model.sync_points} sync points, {', '.join(syncs)}, TP rank 0's logits) | "
      f"temperature {temperature}, top_k {top_k or 'off'}, seed {seed}")
torch.manual_seed(seed)
dtype = torch.bfloat16 if device.startswith("cuda") and torch.cuda.is_bf16_supported() else None
ctx = torch.amp.autocast(device_type="cuda", dtype=dtype) if dtype else nullcontext()
x = torch.tensor(start_ids, dtype=torch.long, device=device)[None, :]  # (1, L)
with torch.no_grad(), ctx:
    for _ in range(num_samples):
        y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k or None, vocab=vocab)
        print(decode(y[0].tolist()))
        print("---------------")
