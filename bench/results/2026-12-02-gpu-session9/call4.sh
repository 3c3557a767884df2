#!/usr/bin/env bash
# session 9 call 4 (lead): the 32-row stream-K pass A/B (MTPLX_CUDA_SK_ROWS=16 vs default 32) on the embedded model
# and 27B-16l, same bits checked; where a decode step's time goes at 3,000 positions (prompt rows' cost)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
scripts/device-build.sh build model build/mtplx build/tests/test_backend_cuda CUDA=1 > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
mkdir -p /tmp/s; build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/s/bf16 --quiet > /dev/null & build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s/q4 --quiet > /dev/null &
echo "build at $(( $(date +%s) - t0 )) s" | tee -a $L
build/tests/test_backend_cuda 2>&1 | tail -3 | tee -a $L
T=$(seq -s, 11 37 3674); build/mtplx convert --q-bits 4 --out /tmp/q4e --quiet
for m in models/qwen35-tiny-code /tmp/q4e; do for mode in "" "--mtp"; do
  MTPLX_CUDA_GEMM=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/g0.st > /dev/null
  MTPLX_CUDA_GEMM=0 MTPLX_CUDA_SK_ROWS=16 build/mtplx logits --model $m --tokens $T $mode --out /tmp/g1.st > /dev/null
  cmp /tmp/g0.st /tmp/g1.st && echo "$m [$mode] SK_ROWS 16 == 32" | tee -a $L; done; done
for i in 1 2; do for k in 16 32; do echo "== embedded ctx 256 SK_ROWS=$k" | tee -a $L
  MTPLX_CUDA_SK_ROWS=$k build/mtplx bench --device cuda --verify-cost --rows 32 --reps 7 --context 256 2>&1 | grep -E " (1|2|4|8|12|16|17|20|24|28|32)-row" | tee -a $L; done; done
echo "== embedded ctx 3000 rows 16, profile" | tee -a $L
MTPLX_CUDA_PROFILE=2 build/mtplx bench --device cuda --verify-cost --rows 16 --reps 3 --context 3000 > $OUT/prof-emb-3000.txt 2>&1
MTPLX_CUDA_PROFILE=2 build/mtplx bench --device cuda --verify-cost --rows 16 --reps 3 --context 256 > $OUT/prof-emb-256.txt 2>&1
build/mtplx bench --device cuda --verify-cost --rows 16 --reps 5 --context 3000 2>&1 | grep -E " (1|2|4|8|16)-row" | tee -a $L
wait; echo "synth at $(( $(date +%s) - t0 )) s" | tee -a $L
for F in bf16 q4; do for k in 16 32; do echo "== 27B-16l $F SK_ROWS=$k" | tee -a $L
  MTPLX_CUDA_SK_ROWS=$k build/mtplx bench --device cuda --verify-cost --rows 32 --reps 3 --context 512 --model /tmp/s/$F 2>&1 | grep -E " (1|2|4|8|16|17|24|32)-row|AR decode" | tee -a $L; done; done
echo "total $(( $(date +%s) - t0 )) s" | tee -a $L
