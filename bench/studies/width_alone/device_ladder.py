"""The width-alone study's GPU ladder (plan.md "The GPU part"): n_embd 64, 128, 256 and 512 (768 once those are
complete) in one numerics class (one GPU model, bfloat16 autocast, TF32 off), each setting at each width at its
own rate chosen by the study's rule (rates.py) on tuning seeds 500-501, then study seeds 600-613 whole: a seed
is kept only when all of its runs at every width finished. Modelled on bench/studies/scale/device_width.py, with
the provenance that call lacked: the runs go from a tree that is exactly the commit they record.

Two steps. Here, from a checkout (any state: the tree sent is built from the commit, not the checkout):

    python -m bench.studies.width_alone.device_ladder --prepare <commit>

writes runs/width_alone_device/ (git-ignored, carried): tree.tar.gz (`git archive` of the commit, without the other
studies' folders), manifest.txt (`git ls-tree -r` of the same paths), data.tar.gz (the prepared char data) and
rates.json (the GPU rates chosen so far: gpu/chosen_rates.json as committed at the checkout's HEAD), and prints the
device call:

    command: set -e; S=$PWD/runs/width_alone_device; T=/tmp/width_alone; rm -rf $T; mkdir -p $T;
             tar xzf $S/tree.tar.gz -C $T; tar xzf $S/data.tar.gz -C $T/data/shakespeare_char; cd $T;
             PYTHONUNBUFFERED=1 python3 -m bench.studies.width_alone.device_ladder --commit <commit> --state $S
             --limit 480 --out $OUT
    carry:   ["runs/width_alone_device"]
    timeout_s: 540

On the device the script runs from the unpacked tree and refuses to start unless that tree is the commit: the tar's
own commit id (git archive writes it) is --commit, every file of the manifest is there with the manifest's blob
hash, and no Python file is there that the manifest lacks (a dirty tree, in a word, is refused; in a git checkout
`git status` must be clean and HEAD the commit as well). Every run then records the commit (TP_SYNC_COMMIT) and
gets provenance.json beside its logs (the commit, the verification, the manifest's, data's and rates' sha256),
which bench.studies.width_alone.family requires of a run whose commit a caller gave. Nothing is resumed across
calls (a fresh machine each): a width's tuning is whole in one call, a seed whole or dropped.

Into --out: host.txt (what ran, the timings, the rates chosen, the seeds kept and dropped), sweeps.log,
chosen_rates.json (the rates after this call: commit it as gpu/chosen_rates.json), tuning.tgz and study.tgz (the
runs' small files, no checkpoints). Later calls: --from_seed <the next seed>, after committing what came back.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

from bench import sweep as sweeps
from bench.studies.scale.device_width import run_sweep  # bench.sweep under a time limit, its process group stopped there
from bench.studies.width_alone import design, rates as rule

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))  # the tree this script is in
STATE = os.path.join("runs", "width_alone_device")  # relative to a checkout's root; /runs/ is git-ignored
DATA = ("train.bin", "val.bin", "meta.pkl")
LADDER_768 = design.GPU_WIDTHS + (768,)


class Refused(Exception):
    """The tree, the data or the state is not what the call may run from: one line, nothing runs."""


def git(*args, cwd=ROOT):
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True)
    if out.returncode != 0:
        raise Refused(f"git {' '.join(args)}: {out.stderr.decode().strip() or 'failed'}")
    return out.stdout


def pathspec(commit, cwd=ROOT):
    """Everything of the commit but the other studies' folders (their run logs would not fit the 64 MiB a call carries)."""
    studies = git("ls-tree", "-d", "--name-only", commit, "bench/studies/", cwd=cwd).decode().split()
    return ["--", "."] + [f":(exclude){d}" for d in studies if d != "bench/studies/width_alone"]


def prepare(commit, cwd=ROOT, out=None, rates_from="HEAD", data=None):
    """Write the state folder for a call at `commit` (default: <checkout>/runs/width_alone_device): the tree, its
    manifest, the prepared data (`data`, default the checkout's data/shakespeare_char), compressed, since a call
    carries 64 MiB with the checkout and the checkout alone is over 55, and the GPU rates chosen so far as committed
    at `rates_from` (the checkout's HEAD: what earlier calls brought back, committed). Returns (commit, folder)."""
    full = git("rev-parse", "--verify", f"{commit}^{{commit}}", cwd=cwd).decode().strip()
    if git("ls-tree", full, "bench/studies/width_alone/device_ladder.py", cwd=cwd).strip() == b"":
        raise Refused(f"commit {full[:12]} has no bench/studies/width_alone/device_ladder.py: the call runs the commit's own script")
    chosen = git("show", f"{rates_from}:bench/studies/width_alone/gpu/chosen_rates.json", cwd=cwd)
    data = data or os.path.join(cwd, "data", "shakespeare_char")
    missing = [n for n in DATA if not os.path.isfile(os.path.join(data, n))]
    if missing:
        raise Refused(f"{data} lacks {', '.join(missing)}: python data/shakespeare_char/prepare.py first (DESIGN.md 6)")
    out = out or os.path.join(cwd, STATE)
    os.makedirs(out, exist_ok=True)
    spec = pathspec(full, cwd)
    with open(os.path.join(out, "tree.tar.gz"), "wb") as f:
        f.write(git("archive", "--format=tar.gz", full, *spec, cwd=cwd))
    with tarfile.open(os.path.join(out, "data.tar.gz"), "w:gz") as tar:
        for name in DATA:
            tar.add(os.path.join(data, name), arcname=name)
    with open(os.path.join(out, "data_sha256.json"), "w") as f:
        json.dump({name: sha256(os.path.join(data, name)) for name in DATA}, f, indent=1)
    excluded = tuple(item.split(")", 1)[1] + "/" for item in spec if item.startswith(":(exclude)"))
    listing = [e for e in git("ls-tree", "-r", "-z", "--full-tree", full, cwd=cwd).decode().split("\0") if e]
    with open(os.path.join(out, "manifest.txt"), "w") as f:  # ls-tree takes no exclusions: the same paths by hand
        f.writelines(entry + "\n" for entry in listing if not entry.split("\t", 1)[1].startswith(excluded))
    with open(os.path.join(out, "rates.json"), "wb") as f:
        f.write(chosen)
    return full, out


def blob_sha1(path):
    with open(path, "rb") as f:
        data = f.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def verify_tree(commit, state, tree=ROOT):
    """Refused unless `tree` is the commit: the manifest's files with their blob hashes, no Python file beside them,
    the tar's commit id, and (in a git checkout) a clean status at HEAD = commit. Returns what was checked."""
    with tarfile.open(os.path.join(state, "tree.tar.gz")) as tar:
        if tar.pax_headers.get("comment") != commit:
            raise Refused(f"tree.tar.gz is of commit {tar.pax_headers.get('comment')!r}, not {commit!r}")
    listed = {}
    with open(os.path.join(state, "manifest.txt")) as f:
        for line in f:
            meta, path = line.rstrip("\n").split("\t", 1)
            mode, kind, sha = meta.split()
            if kind == "blob" and mode != "120000":  # links: git archive writes them as links; not checked
                listed[path] = sha
    differ = [p for p, sha in listed.items() if not os.path.isfile(os.path.join(tree, p)) or blob_sha1(os.path.join(tree, p)) != sha]
    extra = [os.path.relpath(os.path.join(d, n), tree) for d, dirs, names in os.walk(tree)
             for n in names if n.endswith(".py") and os.path.relpath(os.path.join(d, n), tree) not in listed
             and not os.path.relpath(d, tree).startswith((".git", "runs"))]
    if differ or extra:
        raise Refused(f"the tree at {tree} is not commit {commit[:12]}: {len(differ)} file(s) differ or are missing "
                      f"({', '.join(differ[:3])}), {len(extra)} Python file(s) not in it ({', '.join(extra[:3])}): "
                      "a dirty tree is refused")
    if os.path.isdir(os.path.join(tree, ".git")):
        head = git("rev-parse", "HEAD", cwd=tree).decode().strip()
        dirty = git("status", "--porcelain", cwd=tree).decode().strip()
        if head != commit or dirty:
            raise Refused(f"the checkout at {tree} is at {head[:12]}{' with local changes' if dirty else ''}, not a clean {commit[:12]}")
    data = os.path.join(tree, "data", "shakespeare_char")
    missing = [n for n in DATA if not os.path.isfile(os.path.join(data, n))]
    if missing:
        raise Refused(f"{data} lacks {', '.join(missing)}: unpack the carried data.tar.gz there (the device has no network)")
    hashes = {n: sha256(os.path.join(data, n)) for n in DATA}
    with open(os.path.join(state, "data_sha256.json")) as f:
        if json.load(f) != hashes:
            raise Refused(f"the data in {data} are not the data --prepare packed (data_sha256.json)")
    return {"commit": commit, "tree_verified": True, "files_verified": len(listed),
            "manifest_sha256": sha256(os.path.join(state, "manifest.txt")),
            "rates_sha256": sha256(os.path.join(state, "rates.json")),
            "data_sha256": hashes}


def pack(runs, path, record):
    """The runs' small files, each with provenance.json, into a tgz (appended to if it exists)."""
    mode = "a" if os.path.exists(path) else "w"
    if mode == "a":  # gzip cannot be appended to: rewrite with the earlier members
        with tarfile.open(path) as old:
            members = [(m, old.extractfile(m).read()) for m in old.getmembers() if m.isfile()]
    else:
        members = []
    with tarfile.open(path, "w:gz") as tar:
        for m, data in members:
            tar.addfile(m, io.BytesIO(data))
        for run in runs:
            if not os.path.isdir(run["dir"]):
                continue
            with open(os.path.join(run["dir"], "provenance.json"), "w") as f:
                json.dump(record, f, indent=1)
            for name in sorted(os.listdir(run["dir"])):
                if name != "ckpt.pt":
                    tar.add(os.path.join(run["dir"], name), arcname=os.path.join(run["id"], name))


def tune(width, runs_dir, deadline, args, say, log, record):
    """The study's rule at `width` on the GPU's tuning seeds, extending grids until every setting is decided;
    {setting: rate}, or None if the time ran out (nothing chosen: the next call tunes the width whole)."""
    extensions = {}
    while True:
        sweep = design.tuning_sweep(width, design.GPU, design.GPU_TUNING_SEEDS, extensions, gpu=True)
        started = time.time()
        ended = run_sweep(sweep, runs_dir, deadline - time.time(), args, log)
        planned = sweeps.plan(sweep, runs_dir)
        pack(planned, os.path.join(args.out, "tuning.tgz"), record)
        if not ended:
            say(f"n_embd {width}: the tuning was cut off by the limit after {time.time() - started:.0f} s; nothing chosen")
            return None
        finals, missing = {}, []
        for run in planned:
            final = rule.run_result(run["dir"])
            if final is None:
                missing.append(run["id"])
            finals.setdefault(run["setting"].split("_")[1], {}).setdefault(
                sweep["settings"][run["setting"]]["learning_rate"], []).append(final)
        if missing:
            say(f"n_embd {width}: {len(missing)} tuning run(s) failed without a verdict (e.g. {missing[0]}; sweeps.log); nothing chosen")
            return None
        verdicts, needed = rule.decide(width, finals, design.GPU)
        say(f"n_embd {width}: tuning pass of {len(planned)} runs in {time.time() - started:.0f} s; " + "; ".join(
            f"{s}: {v}{f' {lr:g}' if lr else ''}" for s, (v, lr) in verdicts.items()))
        if not needed:
            return {s: lr for s, (_, lr) in verdicts.items()}
        for s, lrs in needed.items():
            extensions.setdefault(str(width), {}).setdefault(s, []).extend(lrs)


def study(widths, chosen, runs_dir, deadline, args, say, log, record):
    """Whole seeds of the ladder from --from_seed: all of a seed's runs at every width, or the seed is dropped."""
    seeds = [s for s in design.STUDY_SEEDS if s >= args.from_seed][:args.max_seeds or None]
    if not seeds:
        say("no study seed left to run")
        return
    sweep = {"name": "width_alone_gpu_study", "configs": [design.CONFIG], "seeds": seeds, "launcher": "",
             "settings": design.study_settings([(w, design.GPU) for w in widths], chosen), "common": design.common(gpu=True)}
    started = time.time()
    ended = run_sweep(sweep, runs_dir, deadline - time.time() - 15, args, log)
    planned = sweeps.plan(sweep, runs_dir)
    kept = [s for s in seeds if all(sweeps.state(r) == "done" for r in planned if r["seed"] == s)]
    dropped = [s for s in seeds if s not in kept and any(os.path.isdir(r["dir"]) for r in planned if r["seed"] == s)]
    pack([r for r in planned if r["seed"] in kept], os.path.join(args.out, "study.tgz"), record)
    say(f"study over n_embd {', '.join(map(str, widths))}: {'ended' if ended else 'cut off by the limit'} after "
        f"{time.time() - started:.0f} s; seeds kept (every run at every width finished): {' '.join(map(str, kept)) or 'none'}; "
        f"dropped (cut off or failed, rerun whole in a later call): {' '.join(map(str, dropped)) or 'none'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--prepare", metavar="COMMIT", help="here: write runs/width_alone_device/ for a call at COMMIT")
    parser.add_argument("--commit", help="on the device: the commit the tree must be, and every run records")
    parser.add_argument("--state", default=STATE, help="the folder --prepare wrote (carried)")
    parser.add_argument("--limit", type=float, default=480, help="seconds for the whole call")
    parser.add_argument("--out", default=os.environ.get("OUT", "device_ladder_out"), help="where what comes back goes")
    parser.add_argument("--runs", default="", help="where the runs go (default: a temporary folder)")
    parser.add_argument("--slots", type=int, default=16, help="runs at once on the one GPU (one CPU core each)")
    parser.add_argument("--from_seed", type=int, default=design.STUDY_SEEDS[0], help="the first study seed not yet in")
    parser.add_argument("--max_seeds", type=int, default=0, help="at most this many study seeds (default: all)")
    parser.add_argument("--with_768", action="store_true", help="n_embd 768: its tuning, then its study seeds alone "
                        "(only once 64-512 hold all 14 seeds)")
    parser.add_argument("--dry_run", action="store_true", help="verify the tree, plan the next sweep, run nothing")
    parser.add_argument("--set", nargs="*", default=[], help="key=value for every run (the CPU test's tiny size)")
    args = parser.parse_args()
    try:
        if args.prepare:
            commit, out = prepare(args.prepare)
            print(f"wrote {out} for commit {commit}; the call (device tool `run`), from this checkout:\n"
                  f"  command: set -e; S=$PWD/{STATE}; T=/tmp/width_alone; rm -rf $T; mkdir -p $T; "
                  f"tar xzf $S/tree.tar.gz -C $T; tar xzf $S/data.tar.gz -C $T/data/shakespeare_char; cd $T; "
                  f"PYTHONUNBUFFERED=1 python3 -m bench.studies.width_alone.device_ladder --commit {commit} "
                  f"--state $S --limit 480 --out $OUT\n  carry: {json.dumps([STATE])}\n  timeout_s: 540")
            return
        if not args.commit or len(args.commit) != 40:
            raise Refused("--commit takes the full 40-character commit the tree must be (or give --prepare)")
        if any("=" not in item for item in args.set):
            raise Refused(f"--set takes key=value items, got {args.set}")
        args.set = dict(item.split("=", 1) for item in args.set)
        record = verify_tree(args.commit, args.state)
        with open(os.path.join(args.state, "rates.json")) as f:
            chosen = json.load(f)
    except Refused as e:
        sys.exit(f"error: {e}")
    deadline = time.time() + args.limit
    os.makedirs(args.out, exist_ok=True)
    host, log = open(os.path.join(args.out, "host.txt"), "a"), open(os.path.join(args.out, "sweeps.log"), "a")

    def say(line):
        print(line, flush=True)
        host.write(line + "\n")
        host.flush()

    widths = LADDER_768 if args.with_768 else design.GPU_WIDTHS
    todo = [w for w in widths if not chosen.get(str(w))]
    if args.dry_run:
        ladder = (768,) if args.with_768 else widths
        sweep = (design.tuning_sweep(todo[0], design.GPU, design.GPU_TUNING_SEEDS, {}, gpu=True) if todo else
                 {"name": "width_alone_gpu_study", "configs": [design.CONFIG], "seeds": design.STUDY_SEEDS, "launcher": "",
                  "settings": design.study_settings([(w, design.GPU) for w in ladder], chosen), "common": design.common(gpu=True)})
        planned = sweeps.plan(sweep, args.runs or tempfile.mkdtemp())
        print(f"tree verified ({record['files_verified']} files of {args.commit[:12]}); next: {sweep['name']}, "
              f"{len(planned)} runs, e.g. {planned[0]['id']}")
        return
    import torch
    say(f"commit {args.commit}, tree verified ({record['files_verified']} files, manifest sha256 {record['manifest_sha256'][:16]}); "
        f"torch {torch.__version__}; {torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}; "
        f"{os.cpu_count()} cores; start {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; limit {args.limit:.0f} s; "
        f"rates in: {json.dumps(chosen)}; --set {args.set}")
    runs_dir = args.runs or tempfile.mkdtemp(prefix="width_alone_")
    for width in todo:
        picked = tune(width, runs_dir, deadline, args, say, log, record)
        if picked is None:
            break
        chosen[str(width)] = picked
        say(f"n_embd {width}: chosen {json.dumps(picked)}")
    with open(os.path.join(args.out, "chosen_rates.json"), "w") as f:
        json.dump(chosen, f, indent=1)
    if all(chosen.get(str(w)) for w in widths):  # 768 joins the seeds the four widths already hold: it runs alone
        study((768,) if args.with_768 else widths, chosen, runs_dir, deadline, args, say, log, record)
    else:
        say("the ladder's tuning is not complete: no study seed runs in this call")
    say(f"end {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC")


if __name__ == "__main__":
    main()
