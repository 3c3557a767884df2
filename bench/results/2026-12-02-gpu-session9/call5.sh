#!/usr/bin/env bash
# session 9 call 5 (lead): attention in chunks of 256 keys + the bf16 32-row / q 16-row stream-K passes:
# gpu-test, then long-context decode, prefill and the 27B shape
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
mkdir -p /tmp/s
bash scripts/gpu-test.sh 2>&1 | tee $OUT/gpu-test.txt
echo "gpu-test done at $(( $(date +%s) - t0 )) s" | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/s/bf16 --quiet > /dev/null &
for c in 256 3000 16000; do echo "== embedded verify ctx $c" | tee -a $L
  build/mtplx bench --device cuda --verify-cost --rows 16 --reps 5 --context $c 2>&1 | grep -E " (1|2|4|8|16)-row" | tee -a $L; done
for p in 512 4096 16384; do build/mtplx bench --device cuda --prefill $p 2>&1 | tail -1 | tee -a $L; done
build/mtplx bench --device cuda --depths 0,3 2>&1 | tail -4 | tee -a $L
wait; echo "synth at $(( $(date +%s) - t0 )) s" | tee -a $L
for c in 512 8192; do echo "== 27B-16l bf16 ctx $c" | tee -a $L
  build/mtplx bench --device cuda --verify-cost --rows 32 --reps 3 --context $c --model /tmp/s/bf16 2>&1 | grep -E " (1|2|4|8|16|17|24|32)-row|AR decode" | tee -a $L; done
build/mtplx bench --device cuda --prefill 4096 --reps 2 --model /tmp/s/bf16 2>&1 | tail -1 | tee -a $L
echo "total $(( $(date +%s) - t0 )) s" | tee -a $L
