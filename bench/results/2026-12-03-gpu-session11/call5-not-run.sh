#!/usr/bin/env bash
# session 11 call 5 (lead): NOT RUN — refused (too little device time left to start a machine); kept to run next.
# The embedded model in bf16 / q8 / q4, `bench --depths 0,3`, the new stream-K floor against the old 2U one
# (bf16 16, q8 4, q4 8), alternated
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
scripts/device-build.sh build model build/mtplx CUDA=1 > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "build $(( $(date +%s)-t0 )) s" | tee -a $L
cp -r models/qwen35-tiny-code /tmp/emb && rm -f /tmp/emb/*.xz /tmp/emb/golden.safetensors
build/mtplx convert --q-bits 4 --out /tmp/emb-q4 --model /tmp/emb --quiet; build/mtplx convert --q-bits 8 --out /tmp/emb-q8 --model /tmp/emb --quiet; cp /tmp/emb/val_code.txt /tmp/emb-q4/; cp /tmp/emb/val_code.txt /tmp/emb-q8/
for r in 1 2; do for m in "/tmp/emb 16" "/tmp/emb-q8 4" "/tmp/emb-q4 8"; do set -- $m
  for mu in 0 $2; do echo "== $(basename $1) MINU=$mu $(MTPLX_CUDA_SK_MINU=$mu timeout 60 build/mtplx bench --device cuda --model $1 --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"; done
done; done | tee -a $L
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
