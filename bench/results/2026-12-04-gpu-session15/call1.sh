#!/usr/bin/env bash
# session 15 call 1: build; test_backend_cuda (its GDN replay / CPU check now also at Dk = Dv = 128,
# R = 9, added in session 14 and never run); the 27B-16l q4 logits of 16 tokens by one prefill against
# 16 steps (tensor data compared, headers differ by mode) and against the CPU backend; then
# scripts/gpu-test.sh
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt; R=bench/results/2026-12-04-gpu-session15
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
MTPLX_DEVICE=cuda timeout 60 build/tests/test_backend_cuda > $OUT/test_backend_cuda.txt 2>&1; echo "test_backend_cuda rc=$? $(tail -1 $OUT/test_backend_cuda.txt)" | tee -a $L
grep -E "FAIL|gdn" $OUT/test_backend_cuda.txt | head -5 | tee -a $L
wait; tail -1 /tmp/synth.txt | tee -a $L
T=$(seq -s, 101 116)
build/mtplx logits --device cuda --model /tmp/q27 --tokens $T --out /tmp/l1.safetensors > $OUT/l1.txt 2>&1
build/mtplx logits --device cuda --model /tmp/q27 --tokens $T --step --out /tmp/l3.safetensors > $OUT/l3.txt 2>&1
timeout 200 build/mtplx logits --device cpu --model /tmp/q27 --tokens $T --out /tmp/l5.safetensors > $OUT/l5.txt 2>&1
echo "q27 cuda prefill vs cuda steps:" | tee -a $L; python3 $R/cmp_logits.py /tmp/l1.safetensors /tmp/l3.safetensors 2>&1 | tee -a $L
echo "q27 cuda prefill vs cpu prefill:" | tee -a $L; python3 $R/cmp_logits.py /tmp/l1.safetensors /tmp/l5.safetensors 2>&1 | tee -a $L
echo "checks $(el) s" | tee -a $L
left=$(( 560 - $(el) )); timeout $left bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed|differ" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L
