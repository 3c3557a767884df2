#!/usr/bin/env bash
# session 31 call 3: the integer-pipe 1-row kernel without a branch between a batch's spans and with two
# dp4a chains a chunk (MTPLX_CUDA_SK_IL=1, same bits): gpu-test check 8 (integer pipe == mma, now with IL
# on by default, and IL=0) and the ops' row-invariance; then 1-row q matmul GB/s and the 27B-16l q4 step,
# IL 0 / 1 alternated.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
SKIP_UNIT=1 GPU_TEST_SKIP='^(default|cli|refuses|launch|attention|batch|gemm|sk_layouts|gdn|graph|compute)' \
  scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test 8 rc $? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
[ -x build/mtplx ] || exit 1
T=100,2000,31,4096,777,12,900,345,6789,21,1500,88,4321,600,7,2500
for m in /tmp/gpu-q4 /tmp/gpu-q4g32 /tmp/gpu-q8; do
  for mode in "--step" "--step --mtp"; do
    MTPLX_CUDA_SK_IL=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l0.st > /dev/null
    MTPLX_CUDA_SK_IL=1 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l1.st > /dev/null
    MTPLX_CUDA_SK_DP=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l2.st > /dev/null
    cmp -s /tmp/l0.st /tmp/l1.st && cmp -s /tmp/l0.st /tmp/l2.st && echo "$m [$mode]: IL0 == IL1 == mma" | tee -a $L || echo "$m [$mode]: DIFFER" | tee -a $L
  done
done
mm() { # label env... : 1-row GB/s
  local lab=$1; shift
  local a b c
  a=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  b=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 248320x5120 --count 1 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  c=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q8 --shape 17408x5120 --count 8 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  d=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q4 --group-size 32 --shape 17408x5120 --count 16 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  echo "$lab: q4 17408x5120 $a | q4 head $b | q8 17408x5120 $c | q4 g32 17408x5120 $d GB/s" | tee -a $L
}
for round in 1 2 3; do
  for il in 0 1; do mm "SK_IL=$il" MTPLX_CUDA_SK_IL=$il; done
done
echo "matmuls $(el) s" | tee -a $L
mkdir -p /tmp/s
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s/q4 --quiet 2>&1 | tail -1
for round in 1 2 3; do
  for il in 0 1; do
    [ $(el) -gt 420 ] && break 2
    echo "SK_IL=$il: $(MTPLX_CUDA_SK_IL=$il timeout 60 build/mtplx bench --device cuda --membw --verify-cost --rows 2 --reps 7 --context 512 --model /tmp/s/q4 2>&1 | grep -E '1-row|AR decode' | tr '\n' ' ')" | tee -a $L
  done
done
echo "done $(el) s" | tee -a $L
