#!/usr/bin/env bash
# session 15 call 5: the final tree (k_sk_q's up-front xdb loads only for q4 at 1..8 rows and q4 g32 —
# XV): bench --matmul q4 g64 / g32, q8 g64 at 1..16 rows; the 27B-16l q4 g64 and g32 verify cost; the
# embedded model's AR and D3 (bf16); then scripts/gpu-test.sh
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1; build/mtplx synth --preset qwen35-27b-16l --dtype q4 --group-size 32 --out /tmp/q27g32 --quiet > /tmp/synth2.txt 2>&1) &
for f in q4:64:16 q4:32:16 q8:64:8; do IFS=: read fmt gs cnt <<< "$f"
  echo "== $fmt g$gs: $(timeout 40 build/mtplx bench --device cuda --matmul $fmt --group-size $gs --shape 17408x5120 --count $cnt --rows 16 --reps 5 2>&1 | grep -E 'T=(1|2|4|8|9|16) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
done
wait; tail -1 /tmp/synth2.txt | tee -a $L
for m in q27 q27g32; do
  echo "== $m: $(timeout 60 build/mtplx bench --device cuda --model /tmp/$m --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-300)" | tee -a $L
done
echo "== embedded bf16: $(timeout 90 build/mtplx bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8 --repeats 2 2>&1 | grep -iE 'depth|tok/s' | tr -s ' ' | tr '\n' '|' | cut -c1-400)" | tee -a $L
echo "bench $(el) s" | tee -a $L
timeout 300 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L
