#!/usr/bin/env bash
# session 30 call 2: call 1 found two warps a range no faster (the same 4 KB a warp in flight); here
# k_sk_qdr with one warp a range (MTPLX_CUDA_SK_SUB=1: k_sk_qdp's layout with the scale word and d loads
# out of the batch, so 8 spans — 8 KB a warp, what the bf16 kernel keeps — fit 128 registers):
# bits against the mma kernel, the matmul alone, the 27B-16l q4 step.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
T=100,2000,31,4096,777,12,900,345,6789,21,1500,88,4321,600,7,2500
for spec in "4 64" "4 32" "8 64"; do
  set -- $spec; m=/tmp/e-q$1g$2
  build/mtplx convert --q-bits $1 --group-size $2 --out $m --quiet > /dev/null
  for mode in "--step" "--step --mtp"; do
    MTPLX_CUDA_SK_DP=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l0.st > /dev/null
    ok=1
    for u in 2 4 8; do
      MTPLX_CUDA_SK_SUB=1 MTPLX_CUDA_SK_SUBU=$u build/mtplx logits --model $m --tokens $T $mode --out /tmp/l1.st > /dev/null
      cmp -s /tmp/l0.st /tmp/l1.st || { ok=0; echo "q$1 g$2 [$mode] U$u: DIFFER" | tee -a $L; }
    done
    [ $ok = 1 ] && echo "q$1 g$2 [$mode]: mma == qdr SUB=1 U2/4/8" | tee -a $L
  done
done
echo "checked $(el) s" | tee -a $L
mm() { # label env... : 1-row GB/s
  local lab=$1; shift
  local a b c d
  a=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  b=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 6144x5120 --count 16 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  d=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 248320x5120 --count 1 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  c=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q8 --shape 17408x5120 --count 8 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  echo "$lab: q4 17408x5120 $a | q4 6144x5120 $b | q4 head $d | q8 17408x5120 $c GB/s" | tee -a $L
}
for round in 1 2; do
  mm "qdp        " MTPLX_CUDA_SK_SUB=0
  mm "qdr1 U4/q8 2" MTPLX_CUDA_SK_SUB=1
  mm "qdr1 U8/q8 4" MTPLX_CUDA_SK_SUB=1 MTPLX_CUDA_SK_SUBU=8
done
echo "matmuls $(el) s" | tee -a $L
mkdir -p /tmp/s
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s/q4 --quiet 2>&1 | tail -1
echo "synth $(el) s" | tee -a $L
for round in 1 2; do
  for v in "0 0" "1 8" "1 4"; do
    set -- $v
    echo "SUB=$1 U=$2: $(MTPLX_CUDA_SK_SUB=$1 MTPLX_CUDA_SK_SUBU=$2 build/mtplx bench --device cuda --membw --verify-cost --rows 2 --reps 7 --context 512 --model /tmp/s/q4 2>&1 | grep -E '1-row|AR decode' | tr '\n' ' ')" | tee -a $L
  done
done
echo "done $(el) s" | tee -a $L
