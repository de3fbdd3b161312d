#!/usr/bin/env bash
# Whole seeds of the lost-packets study on a lent GPU machine (plan.md's amended host rule), in one device
# call: first bench/rerun_check.py on both configs, and only if every deterministic pair and the reliable
# control are bit-identical on this machine, the seeds, through bench/device_sweep.sh (8 at a time).
# BUDGET is the seconds for the whole script: the sweep gets what the check leaves, less 30 s to pack the
# logs, so a call's timeout_s a little above BUDGET never cuts off the packing (a cut-off seed is dropped whole).
#   bash bench/studies/lost_packets/device.sh 39-44 $(git rev-parse HEAD) 540
# (through the device tool, with data/shakespeare_char/{train.bin,val.bin,meta.pkl} carried)
set -u
seeds=$1; commit=$2; budget=${3:-540}
out=${OUT:-/tmp/device_sweep}; mkdir -p "$out"
if ! python -m bench.rerun_check --configs config/train_shakespeare_char_24comm.py config/train_shakespeare_char_2comm.py \
        --max_iters 150 --slots 8 > "$out/rerun_check.md" 2>&1; then
    cat "$out/rerun_check.md"; echo "no seeds run: reruns are not bit-identical on this machine"; exit 1
fi
cat "$out/rerun_check.md"
limit=$((budget - SECONDS - 30)); echo "check took ${SECONDS}s; the sweep gets ${limit}s"
if [ "$limit" -lt 60 ]; then echo "no seeds run: the check left ${limit}s of the ${budget}s budget; give a larger BUDGET"; exit 1; fi
bash bench/device_sweep.sh bench/studies/lost_packets/sweep_gpu.py "$seeds" "$commit" "$limit"
