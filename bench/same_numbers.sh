#!/usr/bin/env bash
# Do two commits train identically? Runs the char config for 24comm, 7comm and 2comm, lossless and
# Gilbert-Elliott `heavy`; a resume across a checkpoint; activation checkpointing; and under torchrun
# a 2-process `dist` run, pp=2 (sim), ZeRO-1 at dp=2 and pp=2 x tp=2 (dist), from the checkout REPO
# into OUT; then compare two OUTs with bench/compare_runs.py:
#   bench/same_numbers.sh /path/to/old-checkout /tmp/before
#   bench/same_numbers.sh /path/to/new-checkout /tmp/after
#   python bench/compare_runs.py /tmp/before /tmp/after
set -euo pipefail
REPO=$1; OUT=$2; mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$REPO"
export OMP_NUM_THREADS=1
GE="--loss_model=gilbert_elliott --ge_preset=heavy --packet_bytes=256"
COMMON="--max_iters=30 --eval_interval=10 --log_interval=1 --always_save_checkpoint=True"
run() { local name=$1; shift; python train.py "$@" --out_dir="$OUT/$name" > "$OUT/$name.log" 2>&1; }
dist() { local n=$1 name=$2; shift 2
  torchrun --standalone --nproc_per_node="$n" train.py "$@" --out_dir="$OUT/$name" > "$OUT/$name.log" 2>&1; }
for cfg in 24comm 7comm 2comm; do
  run "$cfg-none" config/train_shakespeare_char_${cfg}.py $COMMON
  run "$cfg-ge" config/train_shakespeare_char_${cfg}.py $COMMON $GE
done
run 7comm-ge-ckpt config/train_shakespeare_char_7comm.py $COMMON $GE --activation_checkpointing=block
dist 2 2comm-ge-dist config/train_shakespeare_char_2comm.py --tp_mode=dist --max_iters=20 --eval_interval=10 \
  --log_interval=1 $GE
dist 2 7comm-ge-pp2 config/train_shakespeare_char_7comm.py --pp_size=2 --gradient_accumulation_steps=2 \
  --max_iters=20 --eval_interval=10 --log_interval=1 $GE
dist 2 24comm-zero1 config/train_shakespeare_char_24comm.py --zero_stage=1 --gradient_accumulation_steps=2 \
  --max_iters=20 --eval_interval=10 --log_interval=1
dist 4 24comm-ge-pp2-dist config/train_shakespeare_char_24comm.py --tp_mode=dist --pp_size=2 \
  --gradient_accumulation_steps=2 --max_iters=10 --eval_interval=5 --log_interval=1 $GE
run 2comm-ge config/train_shakespeare_char_2comm.py $COMMON --max_iters=40 --init_from=resume $GE
