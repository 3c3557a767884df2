#!/usr/bin/env bash
# session 30 call 1: (a) k_sk_qdr (1-row q launches, two warps a range) ≡ the mma kernel, bit for bit, on the
# embedded model in q4 g64 / g32 and q8; (b) the matmul alone, 1 row, k_sk_qdp vs k_sk_qdr (U 2 / 4),
# alternated; (c) the 27B-16l q4 step both ways; (d) session 29's call 3 (the bf16 per-op table without
# warm-up) if time is left.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
T=100,2000,31,4096,777,12,900,345,6789,21,1500,88,4321,600,7,2500
for spec in "4 64" "4 32" "8 64"; do
  set -- $spec; m=/tmp/e-q$1g$2
  build/mtplx convert --q-bits $1 --group-size $2 --out $m --quiet
  for mode in "--step" "--step --mtp"; do
    MTPLX_CUDA_SK_DP=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l0.st > /dev/null
    MTPLX_CUDA_SK_SUB=2 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l1.st > /dev/null
    MTPLX_CUDA_SK_SUB=2 MTPLX_CUDA_SK_SUBU=2 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l2.st > /dev/null
    cmp /tmp/l0.st /tmp/l1.st && cmp /tmp/l0.st /tmp/l2.st && echo "q$1 g$2 [$mode]: mma == row split" | tee -a $L || echo "q$1 g$2 [$mode]: DIFFER" | tee -a $L
  done
done
echo "checked $(el) s" | tee -a $L
mm() { # label env... : 1-row GB/s of three shapes
  local lab=$1; shift
  local a b c
  a=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  b=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 6144x5120 --count 16 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  c=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q8 --shape 17408x5120 --count 8 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  echo "$lab: q4 17408x5120 $a | q4 6144x5120 $b | q8 17408x5120 $c GB/s" | tee -a $L
}
for round in 1 2; do
  mm "qdp      " MTPLX_CUDA_SK_SUB=1
  mm "qdr U4   " MTPLX_CUDA_SK_SUB=2
  mm "qdr U2   " MTPLX_CUDA_SK_SUB=2 MTPLX_CUDA_SK_SUBU=2
  mm "qdr U8   " MTPLX_CUDA_SK_SUB=2 MTPLX_CUDA_SK_SUBU=8
done
echo "matmuls $(el) s" | tee -a $L
mkdir -p /tmp/s
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s/q4 --quiet 2>&1 | tail -1
echo "synth $(el) s" | tee -a $L
for round in 1 2; do
  for sub in 1 2; do
    echo "SUB=$sub: $(MTPLX_CUDA_SK_SUB=$sub build/mtplx bench --device cuda --membw --verify-cost --rows 2 --reps 7 --context 512 --model /tmp/s/q4 2>&1 | grep -E '1-row|AR decode' | tr '\n' ' ')" | tee -a $L
  done
done
rm -rf /tmp/s/q4
echo "q4 step $(el) s" | tee -a $L
if [ $(el) -lt 420 ]; then
  build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/s/bf16 --quiet 2>&1 | tail -1
  CUDA_MODULE_LOADING=EAGER MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=1 timeout 120 build/mtplx bench --device cuda --verify-cost \
    --rows 1 --reps 41 --context 16 --model /tmp/s/bf16 > $OUT/prof-bf16.txt 2>&1
  tail -25 $OUT/prof-bf16.txt
fi
echo "done $(el) s" | tee -a $L
