#!/usr/bin/env bash
# session 21 call 5: the landed tree: gpu-test (5b: ATT_GROUP 0 vs 2 vs default, test_batch with =2), then the
# 27B-16l q4 verify at 256 / 16384 keys with the default (grouped from a block an SM) against =0, and 4k prefill
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
timeout 420 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | cut -c1-2500 | tee -a $L
grep -B2 -A12 "^FAIL" $OUT/gpu-test.txt | head -60 | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1 | tee -a $L
for ctx in 256 16384; do for g in 1 0; do
  echo "27B-16l q4 ctx $ctx ATT_GROUP=$g: $(MTPLX_CUDA_ATT_GROUP=$g timeout 100 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context $ctx --logits-top 20 2>&1 | grep -E ' (1|2|4|8)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|')" | tee -a $L
done; done
for g in 1 0; do
  echo "27B-16l q4 prefill 4096 ATT_GROUP=$g: $(MTPLX_CUDA_ATT_GROUP=$g timeout 100 build/mtplx bench --device cuda --model /tmp/q27 --prefill 4096 2>&1 | grep -iE 'tok/s' | tail -1)" | tee -a $L
done
echo "total $(el) s" | tee -a $L
