#!/usr/bin/env bash
# session 29 call 2: the bf16 bar on this H100 — 27B-16l bf16 AR decode against the same run's --membw
# (twice), then where a 1-row step goes (MTPLX_CUDA_PROFILE=2: one line per op and matmul shape); then
# the q4 shape's AR and verify rows if time is left.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
mkdir -p /tmp/s
[ -d /tmp/s/bf16 ] || build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/s/bf16 --quiet 2>&1 | tail -2
echo "synth $(el) s" | tee -a $L
for i in 1 2; do
  [ $i = 1 ] || [ $(el) -lt 150 ] || break
  build/mtplx bench --device cuda --membw --verify-cost --rows 2 --reps 5 --context 512 --model /tmp/s/bf16 2>&1 | tail -6 | tee -a $L
done
MTPLX_CUDA_PROFILE=2 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 --model /tmp/s/bf16 > $OUT/prof.txt 2>&1
tail -60 $OUT/prof.txt
rm -rf /tmp/s/bf16
if [ $(el) -lt 240 ]; then  # the q4 bar on the same GPU
  build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s/q4 --quiet 2>&1 | tail -2
  build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model /tmp/s/q4 2>&1 | tail -12 | tee -a $L
fi
echo "done $(el) s" | tee -a $L
