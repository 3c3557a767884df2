#!/usr/bin/env bash
# session 17 call 6: step graphs with first-met forwards issued eagerly, and launched in segments of N ops
# (MTPLX_CUDA_GRAPH_SEG) against eager launches: embedded model AR / D3, 27B-16l q4 verify cost
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
for r in 1 2; do for cfg in "MTPLX_CUDA_GRAPH=0" "MTPLX_CUDA_GRAPH=1" "MTPLX_CUDA_GRAPH=1 MTPLX_CUDA_GRAPH_SEG=12" "MTPLX_CUDA_GRAPH=1 MTPLX_CUDA_GRAPH_SEG=24"; do
  echo "== embedded $cfg: $(env $cfg timeout 60 build/mtplx bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8 --repeats 1 2>&1 | grep -E 'bench pass' | tr -s ' ' | cut -c1-200)" | tee -a $L
done; done
for cfg in "MTPLX_CUDA_GRAPH=1" "MTPLX_CUDA_GRAPH=1 MTPLX_CUDA_GRAPH_SEG=12"; do
  env $cfg MTPLX_CUDA_STEPS=1 timeout 60 build/mtplx bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8 --repeats 1 2>&1 | grep -A12 "CUDA steps" | tee -a $L
done
echo "embedded $(el) s" | tee -a $L
wait; tail -n1 /tmp/synth.txt | tee -a $L
for r in 1 2; do for cfg in "MTPLX_CUDA_GRAPH=0" "MTPLX_CUDA_GRAPH=1" "MTPLX_CUDA_GRAPH=1 MTPLX_CUDA_GRAPH_SEG=24" "MTPLX_CUDA_GRAPH=1 MTPLX_CUDA_GRAPH_SEG=64"; do
  echo "== q27 $cfg: $(env $cfg timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-220)" | tee -a $L
done; done
echo "done $(el) s" | tee -a $L
