#!/usr/bin/env bash
# session 16 call 8: the integer-pipe kernel's 2-row instance with 4-span batches (as the 1-row one):
# q4 g64 matmul T1 / T2 and the 27B-16l q4 1 / 2-row forward with it taking 1 (default) or 1..2 rows;
# then gpu-test's non-unit checks with MTPLX_CUDA_SK_DP=2
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
for dp in 1 2 0 1 2; do
  echo "== q4 g64 DP=$dp: $(MTPLX_CUDA_SK_DP=$dp timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 2 --reps 5 2>&1 | grep -E 'T=(1|2) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
done
wait
for dp in 1 2 1 2; do
  echo "== q27 DP=$dp: $(MTPLX_CUDA_SK_DP=$dp timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 2 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-200)" | tee -a $L
done
echo "bench $(el) s" | tee -a $L
MTPLX_CUDA_SK_DP=2 SKIP_UNIT=1 timeout 150 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L
