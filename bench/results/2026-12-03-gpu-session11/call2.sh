#!/usr/bin/env bash
# session 11 call 2 (lead): the stream-K floor of units per warp (MTPLX_CUDA_SK_MINU; default 2U = 16 for
# bf16, 8 for q4) swept on the small model's shape (bf16, q4), the 27B-16l (bf16, q4) and the embedded model
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
scripts/device-build.sh build model build/mtplx CUDA=1 > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "build $(( $(date +%s)-t0 )) s" | tee -a $L
build/mtplx synth --config .gpu-lead/small-config.json --out /tmp/sb --quiet
build/mtplx synth --config .gpu-lead/small-config.json --dtype q4 --out /tmp/sq --quiet
timeout 100 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/b27 --quiet
timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet
echo "synth $(( $(date +%s)-t0 )) s" | tee -a $L
vc() { MTPLX_CUDA_SK_MINU=$2 timeout 60 build/mtplx bench --device cuda --model $1 --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '^ +(1|2|4|8)-row' | awk '{printf "%s %s  ", $1, $3}'; }
for m in /tmp/sb /tmp/sq models/qwen35-tiny-code; do for mu in 0 8 4 2 1 0 4; do echo "== $(basename $m) MINU=$mu: $(vc $m $mu)"; done; done | tee -a $L
for m in /tmp/b27 /tmp/q27; do for mu in 0 4 2 0 4; do echo "== $(basename $m) MINU=$mu: $(vc $m $mu)"; done; done | tee -a $L
for mu in 0 4 2 0 4 2; do echo "== emb MINU=$mu $(MTPLX_CUDA_SK_MINU=$mu timeout 60 build/mtplx bench --device cuda --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"; done | tee -a $L
for m in /tmp/b27 /tmp/q27; do for mu in 0 4; do echo "== $(basename $m) MINU=$mu membw: $(MTPLX_CUDA_SK_MINU=$mu timeout 60 build/mtplx bench --device cuda --model $m --membw --verify-cost --rows 1 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '^AR decode')"; done; done | tee -a $L
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
