#!/usr/bin/env bash
# session 9 call 2 (lead): small model part 1 of 2 kept in /tmp/smx; 27B-16l bf16 / q4: verify cost 1..32 rows
# (the 32-row stream-K pass) and one MTP draft step (the D3 cycle = 3 drafts + a 4-row verify); llama.cpp on
# the embedded model if call 1 did not reach it
set -uo pipefail
# (the llama.cpp peer's lines, which built and ran the fetched snapshot in /tmp on the device, are left out of
#  this copy: bench/cuda.md "Session 9" says what they did)
t0=$(date +%s); R=$PWD; L=$OUT/log.txt
mkdir -p /tmp/smx; cp .gpu-lead/sma/* /tmp/smx/; ls -la /tmp/smx >> $L
[ -x build/mtplx ] || { echo "no build/mtplx (machine not warm?)"; exit 1; }
mkdir -p /tmp/s
build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/s/bf16 --quiet & build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s/q4 --quiet & wait
echo "synth done at $(( $(date +%s) - t0 )) s" | tee -a $L
for F in bf16 q4; do
  echo "== 27B-16l $F" | tee -a $L
  build/mtplx bench --device cuda --membw --verify-cost --rows 32 --reps 5 --context 512 --model /tmp/s/$F 2>&1 | tee -a $L
  build/mtplx bench --device cuda --draft-cost --draft-quants none --context 512 --steps 200 --model /tmp/s/$F 2>&1 | tail -6 | tee -a $L
done
echo "27B done at $(( $(date +%s) - t0 )) s" | tee -a $L
echo "total $(( $(date +%s) - t0 )) s" | tee -a $L
