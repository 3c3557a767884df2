#!/usr/bin/env bash
# session 16 call 1: the integer-pipe (dp4a) decode kernel k_sk_qdp against the mma one (MTPLX_CUDA_SK_DP=0):
# bench --matmul q4 g64 / g32 / q8 g64 at 1..8 rows, 27B-16l q4 AR / verify; gpu-test; 27B draft over 32768 ids
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
for f in q4:64:16 q4:32:16 q8:64:8; do IFS=: read fmt gs cnt <<< "$f"
  for dp in 0 1 4; do
  echo "== $fmt g$gs DP=$dp: $(MTPLX_CUDA_SK_DP=$dp timeout 40 build/mtplx bench --device cuda --matmul $fmt --group-size $gs --shape 17408x5120 --count $cnt --rows 8 --reps 5 2>&1 | grep -E 'T=(1|2|3|4|8) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
  done
done
wait; tail -1 /tmp/synth.txt | tee -a $L
for dp in 0 1 4 0 1; do
  echo "== q27 DP=$dp: $(MTPLX_CUDA_SK_DP=$dp timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --membw --verify-cost --rows 4 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E 'membw|GB/s|(1|2|4)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-400)" | tee -a $L
done
echo "bench $(el) s" | tee -a $L
timeout 330 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L
