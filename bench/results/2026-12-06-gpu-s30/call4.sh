#!/usr/bin/env bash
# session 30 call 4 (NOT RUN: the session's device time ran out): attention prepares the output
# projection's input too (the same knob, MTPLX_CUDA_FUSE_SEQ). Apply attn-prep.patch first
# (`git apply bench/results/2026-12-06-gpu-s30/attn-prep.patch`: attention's core / merge blocks call
# cu_prep_from, and the GDN step uses that helper instead of cu_prep_span). Then gpu-test (check 8b, whose
# 300-token decode steps reach the attention's merge kernel past 256 keys), then FUSE_SEQ=0 / 1 alternated on
# the embedded model (D3 bench, bf16 and q4). gpu-test without its three
# slowest checks that this change does not touch (device time was short).
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
GPU_TEST_SKIP="^(test_generate_dist|test_family_mtp|sk_integer_pipe_bit_identical)$" scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc $? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
grep -A8 "^FAIL" $OUT/gpu-test.txt | head -40
grep "fused preparation\|differ" $OUT/gpu-test.txt | head -20
build/mtplx convert --q-bits 4 --out /tmp/e-q4 --quiet > /dev/null
for round in 1 2; do
  for f in 0 1; do
    for m in "" /tmp/e-q4; do
      echo "FUSE_SEQ=$f ${m:-bf16} D3: $(MTPLX_CUDA_FUSE_SEQ=$f build/mtplx bench --device cuda ${m:+--model $m} --prompts 4 --max-tokens 128 --depths 0,3 --temperature 0.6 2>&1 | grep -E 'bench pass' | tr -s ' ' | tr '\n' ' ' | cut -c1-300)" | tee -a $L
    done
  done
done
echo "embedded D3 $(el) s" | tee -a $L
echo "done $(el) s" | tee -a $L
