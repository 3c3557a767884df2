#!/usr/bin/env bash
# Session 33, call 3: the tree as landed (router + shared gate in one launch, MTPLX_CUDA_MOE_GATE1; the per-slot
# kernels' chunk loops unrolled by 2; the eight-warp route dropped). The whole gpu-test (check 8c now with GATE1=0),
# then the 35B-A3B-10l q4 shape with GATE1 0 / 1 alternated twice.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(tail -1 $OUT/gpu-test.txt) $(el) s" | tee -a $L
M=/tmp/moe/q4; mkdir -p /tmp/moe
build/mtplx synth --preset qwen35-35b-a3b-10l --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
bn() { timeout 60 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $M 2>&1 | grep -E 'row forward|tok/s' | tr -s ' ' | tr '\n' ' '; }
for r in 1 2; do
  echo "GATE1=0: $(MTPLX_CUDA_MOE_GATE1=0 bn)" | tee -a $L
  echo "default: $(bn)" | tee -a $L
done
echo "done $(el) s" | tee -a $L
