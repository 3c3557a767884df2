#!/usr/bin/env bash
# session 31 call 2: the whole gpu-test with attention preparing the output projection's input
# (attn-prep applied; the PF kernel variants reverted after call 1), then the embedded model's D3 with
# MTPLX_CUDA_FUSE_SEQ 0 / 1 alternated (bf16 and q4), as long as time is left.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc $? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
grep -A12 "^FAIL" $OUT/gpu-test.txt | head -60
[ -x build/mtplx ] || exit 1
build/mtplx convert --q-bits 4 --out /tmp/e-q4 --quiet
for round in 1 2 3; do
  for f in 0 1; do
    for m in "" /tmp/e-q4; do
      [ $(el) -gt 540 ] && break 3
      echo "FUSE_SEQ=$f ${m:-bf16} D3: $(MTPLX_CUDA_FUSE_SEQ=$f timeout 50 build/mtplx bench --device cuda ${m:+--model $m} --prompts 4 --max-tokens 128 --depths 0,3 --temperature 0.6 2>&1 | grep -E 'bench pass' | tr -s ' ' | tr '\n' ' ' | cut -c1-300)" | tee -a $L
    done
  done
done
echo "done $(el) s" | tee -a $L
