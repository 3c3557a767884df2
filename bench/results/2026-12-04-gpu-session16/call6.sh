#!/usr/bin/env bash
# session 16 call 6: per-op profile of the 27B-16l q4 1-row step with the integer-pipe kernel (HEAD bcb05f0);
# the embedded model converted to q4: AR / D3 with the integer-pipe kernel off / on
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
build/mtplx convert --q-bits 4 --out /tmp/eq4 --quiet > /tmp/conv.txt 2>&1
for dp in 0 1 0 1; do
  echo "== embedded q4 DP=$dp: $(MTPLX_CUDA_SK_DP=$dp timeout 90 build/mtplx bench --device cuda --model /tmp/eq4 --depths 0,3 --temperature 0.6 --prompts 8 --repeats 1 2>&1 | grep -iE 'bench pass' | tr -s ' ' | tr '\n' '|' | cut -c1-200)" | tee -a $L
done
wait; tail -n1 /tmp/synth.txt | tee -a $L
MTPLX_CUDA_PROFILE=2 timeout 90 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 1 --reps 21 --context 512 --logits-top 20 > $OUT/profile-q27.txt 2>&1
tail -45 $OUT/profile-q27.txt | cut -c1-160
echo "done $(el) s" | tee -a $L
