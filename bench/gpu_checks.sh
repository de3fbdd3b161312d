#!/usr/bin/env bash
# What the CPU host cannot check: seed 002's MoE + Muon model trained with a GPU user's defaults
# (device=cuda, bf16 autocast, compile=True), eagerly, and compiled over a 1% Bernoulli link (a lossy
# sync is a graph break). Needs data/shakespeare prepared (GPT-2 BPE). Each run's log and its last
# lines go to $OUT (default /tmp/gpu_checks); a run that fails prints its error.
#   bash bench/gpu_checks.sh
set -u
out=${OUT:-/tmp/gpu_checks}
mkdir -p "$out"
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
check() {
    name=$1; shift
    start=$(date +%s)
    timeout 170 python train.py config/train_moe_seed002_12comm.py --max_iters=30 --eval_interval=15 --eval_iters=5 \
        --log_interval=10 --out_dir="$out/$name" "$@" > "$out/$name.log" 2>&1
    echo "== $name: rc=$? in $(( $(date +%s) - start )) s"
    grep -E "^(layout|iter|step|eval)|val loss|Error|error" "$out/$name.log" | tail -6
}
check compiled
check eager --compile=False
check compiled_bern1 --loss_model=bernoulli --loss_rate=0.01
