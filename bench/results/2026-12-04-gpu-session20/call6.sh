#!/usr/bin/env bash
# session 20 call 6: grouped attention blocks on the 27B-16l q4 shape at long contexts (24 query heads over
# 4 KV heads of 256): verify cost 1 / 4 / 8 rows at context 8192 and 16384, ATT_GROUP 1 vs 0 alternated
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1 | tee -a $L
echo "synth $(el) s" | tee -a $L
for ctx in 8192 16384; do for r in 1 2; do for g in 1 0; do
  echo "27B-16l q4 ctx $ctx ATT_GROUP=$g: $(MTPLX_CUDA_ATT_GROUP=$g timeout 100 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context $ctx --logits-top 20 2>&1 | grep -E ' (1|4|8)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|')" | tee -a $L
done; done; done
echo "total $(el) s" | tee -a $L
