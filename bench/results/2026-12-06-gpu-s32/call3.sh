#!/usr/bin/env bash
# session 32 call 3: where a 35B-A3B step goes now (MoE last measured in session 6): 10-of-40-layer q4 g64,
# AR and verify-cost figures, the per-op table of 1-row forwards with kernels loaded eagerly, and ncu kernel
# durations of 1-row and 8-row forwards.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
M=/tmp/moe/q4; mkdir -p /tmp/moe
build/mtplx synth --preset qwen35-35b-a3b-10l --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
echo "synth $(el) s" | tee -a $L
for i in 1; do
  timeout 90 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $M 2>&1 | grep -vE '^\s*$' | tail -14 | tee -a $L
done
echo "bench $(el) s" | tee -a $L
CUDA_MODULE_LOADING=EAGER MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=1 timeout 90 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 41 --context 16 --model $M > $OUT/prof1.txt 2>&1
CUDA_MODULE_LOADING=EAGER MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=8 timeout 90 build/mtplx bench --device cuda --verify-cost --rows 8 --reps 11 --context 16 --model $M > $OUT/prof8.txt 2>&1
echo "prof $(el) s" | tee -a $L
NCU="ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel"
which ncu >> $L 2>&1
[ $(el) -lt 330 ] && timeout 120 $NCU build/mtplx bench --device cuda --model $M --verify-cost --rows 1 --reps 3 --context 16 > $OUT/ncu-r1.txt 2>&1
echo "ncu1 $(el) s" | tee -a $L
[ $(el) -lt 380 ] && timeout 100 $NCU -k regex:moe build/mtplx bench --device cuda --model $M --verify-cost --rows 8 --reps 2 --context 16 > $OUT/ncu-r8.txt 2>&1
echo "done $(el) s" | tee -a $L
