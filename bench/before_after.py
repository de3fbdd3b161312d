"""
Is one checkout slower than another? bench/throughput.py run in two checkouts, interleaved round by
round (the order alternating), and each config's after/before tokens/s paired per round: the median
ratio and the mean with its 95% t interval. A config is slower only when the interval's high end is
below 1; a refactor that "changes nothing" should have every interval cover 1.

    python -m bench.before_after /path/to/old-checkout /path/to/new-checkout --rounds 6
    python -m bench.before_after OLD NEW --rounds 6 --args "--configs 24comm 2comm --steps 5"

Each round runs `python bench/throughput.py --rounds 1 <args>` once per checkout (its own
warm-up each time), one thread, nothing else should run meanwhile.
"""

if not __package__:  # run as `python bench/<tool>.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

import argparse
import os
import statistics
import subprocess
import sys

from bench.stats import paired_stats


def throughput(checkout, extra):
    """tokens/s per config of one bench/throughput.py round in `checkout` (its printed table)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "bench/throughput.py", "--rounds", "1", *extra], cwd=checkout, env=env,
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"error: bench/throughput.py failed in {checkout}: {out.stderr.strip().splitlines()[-1:]}")
    rates, columns = {}, None
    for line in out.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "tokens/s (median)" in cells:  # the header: where the columns are (they differ between commits)
            columns = cells.index("config"), cells.index("compiled"), cells.index("tokens/s (median)")
        elif columns and len(cells) > columns[2] and cells[columns[2]].replace(",", "").isdigit():
            name, compiled, tokens = (cells[i] for i in columns)
            rates[name, compiled] = float(tokens.replace(",", ""))  # (config, compiled) -> tokens/s
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--args", default="", help="extra arguments for bench/throughput.py, one string")
    args = parser.parse_args()
    for path in (args.before, args.after):
        if not os.path.isfile(os.path.join(path, "bench", "throughput.py")):
            sys.exit(f"error: {path} is not a checkout with bench/throughput.py")
    if args.rounds < 2:
        sys.exit(f"error: --rounds={args.rounds}: an interval needs at least 2")
    runs = {"before": [], "after": []}
    for k in range(args.rounds):
        order = ("before", "after") if k % 2 == 0 else ("after", "before")
        for which in order:
            runs[which].append(throughput(getattr(args, which), args.args.split()))
        print(f"round {k + 1}/{args.rounds} done", file=sys.stderr)
    names = [name for name in runs["before"][0] if all(name in r for r in runs["before"] + runs["after"])]
    print(f"# after / before tokens/s, {args.rounds} interleaved rounds of bench/throughput.py {args.args}\n"
          f"# before: {args.before}\n# after: {args.after}")
    print("| config | compiled | before tokens/s (median) | after tokens/s (median) | after / before (median) | "
          "mean [95% CI] | slower? |")
    print("| --- | --- | ---: | ---: | ---: | --- | --- |")
    for name in names:
        before = [r[name] for r in runs["before"]]
        after = [r[name] for r in runs["after"]]
        ratios = [a / b for a, b in zip(after, before)]
        s = paired_stats(ratios)
        print(f"| {name[0]} | {name[1]} | {statistics.median(before):,.0f} | {statistics.median(after):,.0f} | "
              f"{statistics.median(ratios):.3f} | {s['mean']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}] | "
              f"{'yes' if s['ci_high'] < 1 else 'no'} |")


if __name__ == "__main__":
    main()
