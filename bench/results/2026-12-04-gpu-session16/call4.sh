#!/usr/bin/env bash
# session 16 call 4: where the q4 launch's fixed cost is (stream-K fixup: MTPLX_CUDA_SK_MINU sweeps the
# split; a 4x taller weight); the 27B-16l q4 D3 cycle with the draft head over 32768 ids
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
for mu in 0 40 30 12 4 0; do
  echo "== q4 g64 17408x5120 MINU=$mu: $(MTPLX_CUDA_SK_MINU=$mu timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 2 --reps 5 2>&1 | grep -E 'T=(1|2) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
done
for sh in 69632x5120:4 5120x17408:16 6144x5120:32 1024x5120:64; do IFS=: read shape cnt <<< "$sh"
  echo "== q4 g64 $shape: $(timeout 40 build/mtplx bench --device cuda --matmul q4 --shape $shape --count $cnt --rows 2 --reps 5 2>&1 | grep -E 'T=(1|2) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
done
wait; tail -n1 /tmp/synth.txt | tee -a $L
S="--temperature 0.6 --top-k 20 --top-p 0.95"
for dv in 0 32768 0 32768; do for d in 0 3; do
  echo "== q27 D$d dv=$dv: $(timeout 60 build/mtplx run --device cuda --model /tmp/q27 --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 300 --depth $d --draft-vocab $dv $S 2>&1 | tail -1 | cut -c1-150)" | tee -a $L
done; done
timeout 90 build/mtplx bench --device cuda --draft-cost --model /tmp/q27 --draft-quants q4,q4@32768 --steps 60 --chain 3 --context 4 > $OUT/draft-cost.txt 2>&1; tail -25 $OUT/draft-cost.txt | tee -a $L
echo "done $(el) s" | tee -a $L
