#!/usr/bin/env bash
# session 15 call 6: the D3 cycle on the 27B-16l q4 g64 through `run` (random weights: D3 accepts nothing,
# so its tok/s is one token a cycle) after the GDN / scale-pair changes, AR and D3 alternated twice, and
# the verify cost once more
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1
echo "build + synth $(el) s" | tee -a $L
S="--temperature 0.6 --top-k 20 --top-p 0.95"
for d in 0 3 0 3; do echo "== q27 D$d: $(timeout 60 build/mtplx run --device cuda --model /tmp/q27 --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 300 --depth $d $S 2>&1 | tail -1 | cut -c1-150)"; done | tee -a $L
echo "== q27: $(timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-300)" | tee -a $L
echo "done $(el) s" | tee -a $L
