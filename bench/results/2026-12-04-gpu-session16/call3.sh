#!/usr/bin/env bash
# session 16 call 3: the integer-pipe kernel double-buffered (MTPLX_CUDA_SK_DPDB=1: half batches, 2: full);
# bf16 matmul and 27B bf16 AR on HEAD's bf16 kernel (is call 2's 5.27 ms the machine or the prefetch build?)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1; build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/b27 --quiet > /tmp/synth2.txt 2>&1) &
for f in q4:64:16 q4:32:16 q8:64:8 q4:64:16; do IFS=: read fmt gs cnt <<< "$f"
  for db in 0 1 2; do
  echo "== $fmt g$gs DB=$db: $(MTPLX_CUDA_SK_DPDB=$db timeout 40 build/mtplx bench --device cuda --matmul $fmt --group-size $gs --shape 17408x5120 --count $cnt --rows 1 --reps 5 2>&1 | grep -E 'T=(1) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
  done
done
echo "== q4 head DB=0/1/2: $(for db in 0 1 2; do MTPLX_CUDA_SK_DPDB=$db timeout 40 build/mtplx bench --device cuda --matmul q4 --group-size 64 --shape 248320x5120 --count 1 --rows 1 --reps 5 2>&1 | grep -E 'T=1 ' | awk '{printf "%s | ", $4}'; done)" | tee -a $L
echo "== bf16: $(timeout 40 build/mtplx bench --device cuda --matmul bf16 --shape 17408x5120 --count 4 --rows 2 --reps 5 2>&1 | grep -E 'T=(1|2) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
wait; tail -n1 /tmp/synth.txt /tmp/synth2.txt | tee -a $L
for db in 0 1 2 0 1 2; do
  echo "== q27 DB=$db: $(MTPLX_CUDA_SK_DPDB=$db timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 1 --reps 7 --context 512 --logits-top 20 2>&1 | grep -E '(1)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-200)" | tee -a $L
done
echo "== b27: $(timeout 60 build/mtplx bench --device cuda --model /tmp/b27 --membw --verify-cost --rows 1 --reps 7 --context 512 --logits-top 20 2>&1 | grep -E 'GB/s|(1)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-300)" | tee -a $L
echo "bench $(el) s" | tee -a $L
