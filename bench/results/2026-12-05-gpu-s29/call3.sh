#!/usr/bin/env bash
# session 29 call 3: call 2's per-op table again without the warm-up in it — kernels loaded eagerly
# (CUDA_MODULE_LOADING=EAGER), only the 1-row forwards counted (MTPLX_CUDA_PROFILE_ROWS=1), 41 of them.
set -uo pipefail
t0=$(date +%s)
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
mkdir -p /tmp/s; [ -d /tmp/s/bf16 ] || build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/s/bf16 --quiet 2>&1 | tail -1
echo "ready $(( $(date +%s)-t0 )) s"
CUDA_MODULE_LOADING=EAGER MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=1 build/mtplx bench --device cuda --verify-cost \
  --rows 1 --reps 41 --context 16 --model /tmp/s/bf16 > $OUT/prof.txt 2>&1
cat $OUT/prof.txt; echo "done $(( $(date +%s)-t0 )) s"
