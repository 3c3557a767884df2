#!/usr/bin/env bash
# session 14 call 5: where the 27B-16l q4 verify rows go — the per-op GPU table (MTPLX_CUDA_PROFILE=2, per
# matmul shape) of the 1-row and of the 8-row forwards of one interleaved --verify-cost run, and the GPU /
# host time per forward by rows (MTPLX_CUDA_STEPS=1)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1 | tee -a $L
for r in 1 8; do
  MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=$r timeout 120 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 9 --context 512 --logits-top 20 > $OUT/prof-r$r.txt 2>&1
  echo "profile rows $r rc=$? $(el) s" | tee -a $L
done
MTPLX_CUDA_STEPS=1 timeout 120 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 9 --context 512 --logits-top 20 > $OUT/steps.txt 2>&1
echo "steps rc=$? $(el) s" | tee -a $L
