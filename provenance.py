"""
Provenance: what produced a run, so every number it prints can be traced to its code and its arithmetic.

train.py writes it as out_dir/run_info.json (a copy goes into every checkpoint): the commit, whether the tree
differed from it, the package versions, the CPU or GPU, the numerics class a contrast must not mix, the command
line, and for a resumed run each earlier part. Where the tree differed from its commit (a changed tracked file,
or an untracked file git does not ignore), the difference itself is saved beside the run as
tree-<first 12 of its sha256>.diff and its sha256 recorded (`tree_diff_sha256`): a dirty run's code can be
rebuilt from its commit and that file (`git apply`; a large untracked file is named there, not kept).
"""

import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
UNTRACKED_KEPT_BYTES = 1 << 20  # an untracked file larger than this enters the difference by name and size only
UNTRACKED_KEPT_FILES = 64  # and so does every untracked file past this many (Python files come first)
# what run_info keeps of each earlier part of a resumed run: its code (and whether the tree was clean), packages, class
PART_KEYS = ("git_commit", "checkout_commit", "git_dirty", "tree_diff_sha256", "versions", "numerics", "host",
             "started", "argv")


def cpu_model():
    """The CPU's model name (Linux: /proc/cpuinfo), else platform.processor(), else 'cpu'."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "cpu")
    except OSError:
        return platform.processor() or "cpu"


def numerics_class(device, dtype):
    """What decides a run's float results beside its settings: two runs of one class and settings compute
    the same numbers; a contrast pairs runs of one class only (bench/studies: a class per seed set).
    dtype: the run's resolved dtype ('auto' already made float32 / bfloat16 / float16)."""
    cuda = str(device).startswith("cuda")
    return {"device": "cuda" if cuda else "cpu",
            "host": torch.cuda.get_device_name() if cuda else cpu_model(),  # GPU model, or CPU model
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "dtype": dtype,
            "tf32": bool(cuda and torch.backends.cuda.matmul.allow_tf32),  # float32 matmuls in TF32 (CUDA only)
            "deterministic": torch.are_deterministic_algorithms_enabled()}


def _git(root, *args, ok=(0,)):
    """git's stdout (bytes), or None where git or the repository is missing (a copy sent without .git)."""
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=30)
        return out.stdout if out.returncode in ok else None
    except (OSError, subprocess.SubprocessError):
        return None


# a diff git apply takes whatever the user's git settings (an external diff tool, colour, no a/ b/ prefixes)
PLAIN_DIFF = ("diff", "--binary", "--no-ext-diff", "--no-textconv", "--no-color", "--src-prefix=a/", "--dst-prefix=b/")


def tree_state(root=HERE):
    """(HEAD's commit or None, dirty or None, the difference as bytes): tracked changes against HEAD
    (`git diff --binary`), then each untracked file git does not ignore as a new-file diff, Python files first.
    A file over UNTRACKED_KEPT_BYTES, or past the first UNTRACKED_KEPT_FILES (a virtualenv left in the checkout),
    enters by name and size only: a run's start stays a second, however much lies untracked. One git cannot diff
    (a nested repository, a broken link, a file gone since git listed it) enters by name: it still makes the tree
    dirty, and nothing about it stops the run."""
    commit = (_git(root, "rev-parse", "HEAD") or b"").decode().strip()
    if not commit:
        return None, None, b""
    diff = _git(root, *PLAIN_DIFF, "HEAD") or b""
    listed = (_git(root, "ls-files", "--others", "--exclude-standard", "-z") or b"").split(b"\0")
    names = [n.decode(errors="surrogateescape") for n in listed if n]
    for i, name in enumerate(sorted(names, key=lambda n: (not n.endswith(".py"), n))):
        try:
            size = os.lstat(os.path.join(root, name)).st_size
        except OSError:
            size = None
        kept = b""
        if size is not None and size <= UNTRACKED_KEPT_BYTES and i < UNTRACKED_KEPT_FILES:
            # exit 1: the files differ, as a new file always does from /dev/null
            kept = _git(root, *PLAIN_DIFF, "--no-index", "--", "/dev/null", name, ok=(0, 1)) or b""
        line = f"untracked {name}: {'unreadable' if size is None else f'{size} bytes'} (not kept)\n"
        diff += kept or line.encode(errors="surrogateescape")
    return commit, bool(diff), diff


def describe_run(device, processes, dtype=None, earlier=None, root=HERE):
    """(run_info, the tree's difference from its commit as bytes). run_info: the commit and whether the tree
    differed from it (the difference's sha256), package versions, device and CPU kernel ISA, the numerics class,
    command line. TP_SYNC_COMMIT (set by a caller that knows it, e.g. a script that sent a copy of the tree to
    another machine, whose git metadata may be stale) names the true commit; git_commit_from says where it came from.
    earlier: a resumed run's checkpointed run_info; its parts before this one are kept (`earlier_parts`),
    so a run continued on another host or commit says so (bench.summary refuses to pair it across classes)."""
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for package in ("numpy", "tiktoken", "datasets", "wandb", "megatron-core"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    commit, dirty, diff = tree_state(root)
    given = os.environ.get("TP_SYNC_COMMIT", "")
    info = {"git_commit": given or commit, "git_commit_from": "caller" if given else "checkout",
            "checkout_commit": commit, "git_dirty": dirty,
            "tree_diff_sha256": hashlib.sha256(diff).hexdigest() if dirty else None,
            "versions": versions, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name() if str(device).startswith("cuda") else platform.processor() or "cpu",
            # the vector ISA torch's CPU kernels dispatch to (AVX2, AVX512, ...): another one rounds
            # differently, so the same run on another machine drifts (bench/RESULTS.md)
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "deterministic_kernels": torch.are_deterministic_algorithms_enabled(),  # train.py's `deterministic`, as in force
            **({"numerics": numerics_class(device, dtype)} if dtype else {}),
            "processes": processes, "argv": sys.argv, "host": platform.node(),
            "started": datetime.datetime.now().isoformat(timespec="seconds"),
            **({"earlier_parts": [*earlier.get("earlier_parts", []), {key: earlier.get(key) for key in PART_KEYS}]}
               if earlier else {})}
    return info, diff


def write_run_files(out_dir, config, info, diff):
    """config.json and run_info.json (indented for reading), and a dirty tree's difference from its commit,
    named by its hash so a resumed part's own difference is kept beside the earlier one's. Returns that path or None."""
    for name, content in (("config.json", config), ("run_info.json", info)):
        with open(os.path.join(out_dir, name), "w") as f:
            json.dump(content, f, indent=2)
    if not info["tree_diff_sha256"]:
        return None
    path = os.path.join(out_dir, f"tree-{info['tree_diff_sha256'][:12]}.diff")
    with open(path, "wb") as f:
        f.write(diff)
    return path
