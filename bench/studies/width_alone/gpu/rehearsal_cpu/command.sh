#!/usr/bin/env bash
# The width-alone GPU ladder's prepared call, run on this CPU at a tiny size (issue 67 item 3: "tested at a tiny
# size on the CPU first"): the exact command the findings give, with --set making every run tiny, two study seeds.
set -euo pipefail
cd /work/main
. /work/venv/bin/activate
export OUT=/tmp/devsim/out; rm -rf /tmp/devsim; mkdir -p $OUT
S=$PWD/runs/width_alone_device; T=/tmp/width_alone; rm -rf $T; mkdir -p $T
tar xzf $S/tree.tar.gz -C $T; tar xzf $S/data.tar.gz -C $T/data/shakespeare_char; cd $T
PYTHONUNBUFFERED=1 python3 -m bench.studies.width_alone.device_ladder --commit 525b1942598ee6960ba79a7a7a60ba7fd5555687 \
  --state $S --limit 1500 --out $OUT --slots 2 --max_seeds 2 \
  --set n_layer=2 max_iters=6 lr_decay_iters=6 warmup_iters=1 eval_interval=3 eval_iters=1 batch_size=2 block_size=16 \
        device=cpu dtype=float32
