#!/usr/bin/env bash
# Whole seeds of a study on a lent GPU machine, in one device call: the sweep's runs of SEEDS, 8 at a
# time with one CPU thread each (a char run takes 28 s alone on an H200; 8 at once, 39 s in all; 12 at
# once were slower per run), cut off after LIMIT seconds. Then the logs of every seed whose runs all
# finished (no checkpoints) are packed into $OUT/runs.tgz, with host.txt (the commit, which the caller
# passes because the device copy's git metadata may be stale; GPU, CPU, torch; start, end, the seeds
# kept and dropped) and the sweep's log. A seed cut off part-way is dropped whole: rerun it.
#   bash bench/device_sweep.sh bench/studies/schemes/sweep.py 28-32 $(git rev-parse HEAD) 480
# (through the device tool, with data/shakespeare_char/{train.bin,val.bin,meta.pkl} carried). Two sweeps in one
# call: give each its own OUT (OUT=$OUT/placement bash ...; OUT=$OUT/schemes bash ...).
set -u
sweep=$1; seeds=$2; commit=$3; limit=${4:-480}
out=${OUT:-/tmp/device_sweep}; runs=$(mktemp -d /tmp/device_sweep_runs.XXXX)  # its own, so two sweeps can share a call
mkdir -p "$out"
{
    echo "repo commit $commit (passed by the caller)"; echo "sweep $sweep, seeds $seeds, slots 8, limit ${limit}s"
    nvidia-smi -L 2>/dev/null; lscpu | grep "Model name"; echo "cores $(nproc --all)"
    python -c "import torch; print('torch', torch.__version__)"; echo "start $(date -u)"
} > "$out/host.txt"
# every run's run_info.json names the caller's commit too (checkpoint.describe_run reads TP_SYNC_COMMIT)
TP_SYNC_COMMIT="$commit" timeout "$limit" python -m bench.sweep "$sweep" --seeds "$seeds" --slots 8 --threads 1 --no_summary --out "$runs" \
    > "$out/sweep.log" 2>&1
echo "sweep rc=$? end $(date -u)" >> "$out/host.txt"
name=$(ls "$runs")
cd "$runs/$name" || exit 1
kept=""; dropped=""
for seed in $(ls | sed 's/.*-s//' | sort -un); do
    if [ "$(ls -d *-s"$seed" | wc -l)" = "$(ls -d *-s"$seed"/result.json 2>/dev/null | wc -l)" ]; then
        kept="$kept $seed"
    else
        dropped="$dropped $seed"
    fi
done
echo "seeds kept (every run finished):${kept:- none}; dropped (cut off):${dropped:- none}" >> "$out/host.txt"
files=$(for seed in $kept; do find . -path "./*-s$seed/*" -type f ! -name ckpt.pt; done)
[ -n "$files" ] && tar czf "$out/runs.tgz" $files
cd / && rm -rf "$runs"  # the checkpoints stay behind
cat "$out/host.txt"; tail -3 "$out/sweep.log"
