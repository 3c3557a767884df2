#!/usr/bin/env bash
# session 17 call 3: per-kernel GPU durations (ncu, one metric, caches and clocks as they are) of
# steady-state steps: embedded model 1-row trunk forwards, a D3 run, the 27B-16l q4 1-row step
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
N="ncu --csv --print-units base --metrics gpu__time_duration.sum --cache-control none --clock-control none"
timeout 120 $N --launch-skip 3000 --launch-count 140 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 201 --context 64 > $OUT/ncu-emb-r1.csv 2>&1
echo "emb r1 $(el) s" | tee -a $L
timeout 120 $N --launch-skip 6000 --launch-count 300 build/mtplx bench --device cuda --depths 3 --temperature 0.6 --prompts 4 --repeats 1 > $OUT/ncu-emb-d3.csv 2>&1
echo "emb d3 $(el) s" | tee -a $L
wait; tail -n1 /tmp/synth.txt | tee -a $L
timeout 200 $N --launch-skip 4000 --launch-count 400 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 1 --reps 21 --context 512 --logits-top 20 > $OUT/ncu-q27-r1.csv 2>&1
echo "done $(el) s" | tee -a $L
wc -l $OUT/*.csv | tee -a $L
