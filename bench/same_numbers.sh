#!/usr/bin/env bash
# Do two commits train identically? Runs the char config for 24comm and 2comm, lossless and
# Gilbert-Elliott `heavy`, a resume across a checkpoint, and a 2-process `dist` run, from the
# checkout REPO into OUT; then compare two OUTs with bench/compare_runs.py:
#   bench/same_numbers.sh /path/to/old-checkout /tmp/before
#   bench/same_numbers.sh /path/to/new-checkout /tmp/after
#   python bench/compare_runs.py /tmp/before /tmp/after
set -euo pipefail
REPO=$1; OUT=$2; mkdir -p "$OUT"
cd "$REPO"
GE="--loss_model=gilbert_elliott --ge_preset=heavy --packet_bytes=256"
COMMON="--max_iters=30 --eval_interval=10 --log_interval=1 --always_save_checkpoint=True"
for cfg in 24comm 2comm; do
  python train.py config/train_shakespeare_char_${cfg}.py $COMMON --out_dir="$OUT/$cfg-none" > "$OUT/$cfg-none.log" 2>&1
  python train.py config/train_shakespeare_char_${cfg}.py $COMMON --out_dir="$OUT/$cfg-ge" $GE > "$OUT/$cfg-ge.log" 2>&1
done
torchrun --standalone --nproc_per_node=2 train.py config/train_shakespeare_char_2comm.py --tp_mode=dist --max_iters=20 \
  --eval_interval=10 --log_interval=1 --out_dir="$OUT/2comm-ge-dist" $GE > "$OUT/2comm-ge-dist.log" 2>&1
python train.py config/train_shakespeare_char_2comm.py $COMMON --max_iters=40 --out_dir="$OUT/2comm-ge" \
  --init_from=resume $GE > "$OUT/2comm-ge-resume.log" 2>&1
