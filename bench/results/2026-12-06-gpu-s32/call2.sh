#!/usr/bin/env bash
# NOT RUN (session 31's device time ran out). The mma q kernel (2..16-row launches, k_sk_q) with a batch's
# spans unbranched like the 1-row kernel's IL (MTPLX_CUDA_SK_QIL=1; same bits by the same argument: a span past
# the range's end has zero weights, activations, scales and d). Apply first:
#   git apply bench/results/2026-12-06-gpu-s31/mma-il.patch
# Then: bit-identity (logits of 100-token prefills, launches of 16 and 4 rows, and of --step --mtp, QIL 0 / 1,
# against the GEMM-off default), 2..16-row matmul GB/s and the 27B-16l q4 verify ratios, QIL 0 / 1 alternated.
# If it wins, add QIL to gpu-test's check 7 (sk_layouts) and run the whole gpu-test. The patch also has
# MTPLX_CUDA_SK_DPU=2|8 (spans a batch of the interleaved 1-row q4 kernel, default 4), swept below; check its
# bits with gpu-test check 8 if it wins.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
T=$(seq -s, 11 37 3674)
for spec in "4 64" "4 32" "8 64"; do
  set -- $spec; m=/tmp/e-q$1g$2
  build/mtplx convert --q-bits $1 --group-size $2 --out $m --quiet > /dev/null
  for mode in "" "--mtp"; do
    MTPLX_CUDA_GEMM=0 MTPLX_CUDA_SK_QIL=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l0.st > /dev/null
    MTPLX_CUDA_GEMM=0 MTPLX_CUDA_SK_QIL=1 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l1.st > /dev/null
    cmp -s /tmp/l0.st /tmp/l1.st && echo "q$1 g$2 [$mode]: QIL0 == QIL1" | tee -a $L || echo "q$1 g$2 [$mode]: DIFFER" | tee -a $L
  done
done
for r in 2 4 8 16; do
  for q in 0 1 0 1; do
    echo "QIL=$q rows $r: $(MTPLX_CUDA_SK_QIL=$q timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows $r --reps 7 2>&1 | grep -E "T=$r " | awk '{print $4}') GB/s" | tee -a $L
  done
done
for dpu in 0 2 8 0 2 8; do # the interleaved 1-row q4 kernel's spans a batch (0: 4; 8 spills 224 bytes)
  echo "SK_DPU=$dpu rows 1: $(MTPLX_CUDA_SK_DPU=$dpu timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 1 --reps 7 2>&1 | grep -E "T=1 " | awk '{print $4}') GB/s" | tee -a $L
done
mkdir -p /tmp/s; build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s/q4 --quiet 2>&1 | tail -1
for q in 0 1 0 1; do
  [ $(el) -gt 500 ] && break
  echo "QIL=$q: $(MTPLX_CUDA_SK_QIL=$q timeout 60 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model /tmp/s/q4 2>&1 | grep -E 'row forward' | tr -s ' ' | tr '\n' ' ')" | tee -a $L
done
echo "done $(el) s" | tee -a $L
