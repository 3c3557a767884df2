#!/usr/bin/env bash
# session 21 call 2: where the 27B-16l q4 verify's time goes at 16384 keys (per-op profile, 1-row and 8-row
# forwards, ATT_GROUP 1 / 0)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1 | tee -a $L
for rows in 8 1; do for g in 1 0; do
  echo "== profile rows $rows ATT_GROUP=$g ctx 16384" | tee -a $L
  MTPLX_CUDA_ATT_GROUP=$g MTPLX_CUDA_PROFILE=1 MTPLX_CUDA_PROFILE_ROWS=$rows timeout 120 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context 16384 --logits-top 20 > $OUT/p$rows-$g.out 2> $OUT/p$rows-$g.err
  grep -A30 "CUDA profile" $OUT/p$rows-$g.err | head -32 | tee -a $L
done; done
echo "total $(el) s" | tee -a $L
