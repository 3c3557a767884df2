#!/usr/bin/env bash
# session 9 call 8 (lead): 27B-16l after the attention chunks — 32k prefill (bf16), 4k prefill, q4 AR and
# verify, bf16 decode at 16k positions
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
scripts/device-build.sh build build/mtplx CUDA=1 > /tmp/b.log 2>&1 || { tail -20 /tmp/b.log; exit 1; }
mkdir -p /tmp/s; build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/s/bf16 --quiet > /dev/null & build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s/q4 --quiet > /dev/null & wait
echo "synth at $(( $(date +%s) - t0 )) s" | tee -a $L
echo "== q4 ctx 512" | tee -a $L
build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model /tmp/s/q4 2>&1 | grep -E "bandwidth| (1|2|4|8)-row|AR decode" | tee -a $L
echo "== bf16 ctx 512 / 16384" | tee -a $L
build/mtplx bench --device cuda --membw --verify-cost --rows 4 --reps 5 --context 512 --model /tmp/s/bf16 2>&1 | grep -E "bandwidth| (1|2|4)-row|AR decode" | tee -a $L
build/mtplx bench --device cuda --verify-cost --rows 4 --reps 3 --context 16384 --model /tmp/s/bf16 2>&1 | grep -E " (1|2|4)-row|AR decode" | tee -a $L
echo "== prefill bf16" | tee -a $L
build/mtplx bench --device cuda --prefill 4096 --reps 2 --model /tmp/s/bf16 2>&1 | tail -1 | tee -a $L
timeout 200 build/mtplx bench --device cuda --prefill 32768 --reps 1 --model /tmp/s/bf16 2>&1 | tail -2 | tee -a $L
echo "total $(( $(date +%s) - t0 )) s" | tee -a $L
