#!/usr/bin/env bash
# session 17 call 4: stream-K warps ask L2 for their first weight bytes before the PDL wait
# (MTPLX_CUDA_SK_WAITPF = bytes a row; 0: off), embedded model (bf16 trunk, q4 MTP head) and 27B-16l q4
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
for pf in 0 256 1024 0 256 1024; do
  echo "== embedded PF=$pf: $(MTPLX_CUDA_SK_WAITPF=$pf timeout 60 build/mtplx bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8 --repeats 1 2>&1 | grep -E 'bench pass' | tr -s ' ' | cut -c1-200) | $(MTPLX_CUDA_SK_WAITPF=$pf MTPLX_CUDA_STEPS=1 timeout 60 build/mtplx bench --device cuda --verify-cost --rows 4 --reps 51 --context 64 2>&1 | grep -E '^ +(1|4) ' | awk '{printf "R%s gpu %s | ", $1, $4}')" | tee -a $L
done
echo "embedded $(el) s" | tee -a $L
wait; tail -n1 /tmp/synth.txt | tee -a $L
for pf in 0 256 1024 0 256 1024; do
  echo "== q27 PF=$pf: $(MTPLX_CUDA_SK_WAITPF=$pf timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-220)" | tee -a $L
done
for pf in 0 256; do
  echo "== q4 g64 PF=$pf: $(MTPLX_CUDA_SK_WAITPF=$pf timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 8 --reps 5 2>&1 | grep -E 'T=(1|2|4|8) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
  echo "== q4 g64 5120x6144 PF=$pf: $(MTPLX_CUDA_SK_WAITPF=$pf timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 5120x6144 --count 16 --rows 2 --reps 5 2>&1 | grep -E 'T=(1|2) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
done
echo "done $(el) s" | tee -a $L
