#!/usr/bin/env bash
# session 16 call 5: the q4 launch's fixed cost: the integer-pipe kernel's first weights before its PDL wait
# (MTPLX_CUDA_SK_PREWAIT), and every kernel allowing its dependent's launch before it waits (build-time
# MTPLX_CUDA_PDL_EARLY=1, a second build); matmul alone, 27B-16l q4 / bf16 steps, the embedded model's AR / D3
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
cp build/mtplx /tmp/mtplx-base
sed -i 's/^#define MTPLX_CUDA_PDL_EARLY 0/#define MTPLX_CUDA_PDL_EARLY 1/' src/backend/cuda/cuda_internal.cuh
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build2.txt 2>&1 || { tail -30 $OUT/build2.txt; exit 1; }
cp build/mtplx /tmp/mtplx-early
echo "builds $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1; build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/b27 --quiet > /tmp/synth2.txt 2>&1) &
for rep in 1 2; do for b in base early; do for pw in 0 1; do
  echo "== mm $b PW=$pw: $(for sh in 17408x5120:16 6144x5120:32; do IFS=: read shape cnt <<< "$sh"; MTPLX_CUDA_SK_PREWAIT=$pw timeout 40 /tmp/mtplx-$b bench --device cuda --matmul q4 --shape $shape --count $cnt --rows 1 --reps 5 2>&1 | grep -E 'T=1 ' | awk -v s=$shape '{printf "%s %s | ", s, $4}'; done)" | tee -a $L
done; done; done
wait; tail -n1 /tmp/synth.txt /tmp/synth2.txt | tee -a $L
for rep in 1 2; do for b in base early; do for pw in 0 1; do
  echo "== q27 $b PW=$pw: $(MTPLX_CUDA_SK_PREWAIT=$pw timeout 60 /tmp/mtplx-$b bench --device cuda --model /tmp/q27 --verify-cost --rows 4 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-200)" | tee -a $L
done; done; done
for b in base early base early; do
  echo "== b27 $b: $(timeout 60 /tmp/mtplx-$b bench --device cuda --model /tmp/b27 --verify-cost --rows 1 --reps 7 --context 512 --logits-top 20 2>&1 | grep -E '(1)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-200)" | tee -a $L
done
for b in base early base early; do
  echo "== embedded $b: $(timeout 90 /tmp/mtplx-$b bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8 --repeats 1 2>&1 | grep -iE 'bench pass' | tr -s ' ' | tr '\n' '|' | cut -c1-200)" | tee -a $L
done
echo "done $(el) s" | tee -a $L
