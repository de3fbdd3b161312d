"""
Do the multi-process tests ever stall under load? The sequence-parallel and `dist` test files, repeated under
pytest-xdist (-n 2) while the rest of the fast tier runs beside them in a loop, as CI's two workers and a busy
host would; each repeat's time, outcome and slowest test, and a count of tests that ran past their limit
(pytest.ini's `timeout`: such a test fails, and the harness prints every rank's stack in its report).

    python -m bench.stall_check --repeats 50             # about 30 s a repeat on a 2-core host, beside the load
    python -m bench.stall_check --repeats 5 --no_load    # the files alone
"""

import argparse
import os
import re
import subprocess
import sys
import time

if not __package__:  # run as `python bench/stall_check.py`: as the module it is (bench/_as_module.py)
    import _as_module  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ["tests/test_sequence_parallel.py", "tests/test_dist.py"]


def pytest(*args):
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]


def main():
    parser = argparse.ArgumentParser(description="Do the multi-process tests ever stall under load?")
    parser.add_argument("--repeats", type=int, default=50, help="times the two files run (default 50)")
    parser.add_argument("--no_load", action="store_true", help="without the rest of the fast tier beside them")
    args = parser.parse_args()
    if args.repeats < 1:
        sys.exit(f"error: --repeats={args.repeats}: give 1 or more")
    load, load_rounds = None, 0
    rows, over_limit, failed = [], 0, 0
    print(f"{'repeat':>6} {'rc':>3} {'seconds':>8} {'passed':>6}  slowest test")
    try:
        for repeat in range(1, args.repeats + 1):
            if not args.no_load and (load is None or load.poll() is not None):
                load_rounds += load is not None
                load = subprocess.Popen(pytest("-n", "2", *(f"--ignore={f}" for f in FILES)), cwd=ROOT,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            start = time.monotonic()
            result = subprocess.run(pytest("-n", "2", "--durations=1", *FILES), cwd=ROOT, capture_output=True,
                                    text=True)
            seconds = time.monotonic() - start
            out = result.stdout + result.stderr
            over_limit += len(re.findall(r"Timeout \(>\d", out))
            failed += result.returncode != 0
            passed = re.search(r"(\d+) passed", out)
            slowest = re.search(r"^([\d.]+)s call\s+(\S+)", out, re.M)
            rows.append(seconds)
            print(f"{repeat:>6} {result.returncode:>3} {seconds:>8.1f} {passed.group(1) if passed else 0:>6}  "
                  f"{slowest.group(1) + ' s ' + slowest.group(2) if slowest else ''}", flush=True)
            if result.returncode:
                print(out[-6000:], flush=True)
    finally:
        if load is not None and load.poll() is None:
            load.terminate()
            load.wait()
    print(f"\n{args.repeats} repeats of {' and '.join(FILES)} under -n 2"
          f"{'' if args.no_load else f', beside {load_rounds} whole rounds of the rest of the fast tier'}: "
          f"{failed} failed, {over_limit} tests past their time limit; a repeat took "
          f"{min(rows):.1f} to {max(rows):.1f} s (median {sorted(rows)[len(rows) // 2]:.1f})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
