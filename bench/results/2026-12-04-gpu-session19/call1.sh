#!/usr/bin/env bash
# session 19 call 1: gpu-test on HEAD (d1dc810: items never run on a GPU), embedded D3 per-op profile, bench
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
build/mtplx bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8 2>&1 | tail -4 | tee -a $L
MTPLX_CUDA_PROFILE=1 build/mtplx bench --device cuda --depths 3 --temperature 0.6 --prompts 4 > $OUT/profile-d3.txt 2>&1; tail -3 $OUT/profile-d3.txt | tee -a $L
echo "bench $(el) s" | tee -a $L
timeout $(( 540 - $(el) )) bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | cut -c1-2000 | tee -a $L
