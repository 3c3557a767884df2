#!/usr/bin/env bash
# lead, session 6, call D: single-stream MTP on the small model, knobs alternated (is the D3 drop real?)
M=/tmp/qwen35-small-code
for k in "" "MTPLX_CUDA_RMS_BATCH=1" "MTPLX_CUDA_TOP=0" "" "MTPLX_CUDA_RMS_BATCH=1" "MTPLX_CUDA_TOP=0"; do
  echo "+ [$k]"; env $k timeout 25 build/mtplx bench --device cuda --model $M --prompts 8 --max-tokens 128 --depths 0,3 --temperature 0.6 2>&1 | grep -E "^(AR|D3)"
done | tee $OUT/knobs.txt
