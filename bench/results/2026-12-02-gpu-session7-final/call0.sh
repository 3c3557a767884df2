#!/usr/bin/env bash
# lead, session 7, call A: gpu-test on main bb0a531; the top-k threshold; SK_MINU=128's failure; per-op profiles of the embedded model
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
timeout 250 scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc $? $(( $(date +%s) - t0 )) s"
grep -E "FAIL|passed|failed" $OUT/gpu-test.txt | tail -8
echo "+ SK_MINU=128 test_backend_cuda"; MTPLX_CUDA_SK_MINU=128 timeout 60 build/tests/test_backend_cuda > $OUT/skminu128.txt 2>&1; echo "rc $?"; grep -vE "^\[ +(OK|RUN)" $OUT/skminu128.txt | head -30
for v in "" 1 "" 1; do echo "+ [TOP_MIN_VOCAB=$v]"; MTPLX_CUDA_TOP_MIN_VOCAB=$v timeout 25 build/mtplx bench --device cuda --depths 0,3 2>&1 | grep -E "^(AR|D3|D0)"; done | tee $OUT/top.txt
echo "+ profile AR 1 row"; MTPLX_CUDA_PROFILE=2 timeout 40 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 > $OUT/prof-emb-r1.txt 2>&1; tail -45 $OUT/prof-emb-r1.txt
echo "+ profile 8 parallel samples D3"; MTPLX_CUDA_PROFILE=1 timeout 40 build/mtplx run --device cuda --prompt "def fib(n):" --samples 8 --parallel --depth 3 --max-tokens 128 --temperature 0.6 > $OUT/prof-emb-par8.txt 2>&1; tail -45 $OUT/prof-emb-par8.txt
echo "+ 8 parallel AR / D3 / single D3 (timing)"; for d in 0 3; do timeout 30 build/mtplx run --device cuda --prompt "def fib(n):" --samples 8 --parallel --depth $d --max-tokens 256 --temperature 0.6 2>&1 >/dev/null | tail -4; done
timeout 30 build/mtplx run --device cuda --prompt "def fib(n):" --samples 1 --depth 3 --max-tokens 256 --temperature 0.6 2>&1 >/dev/null | tail -3
echo "total $(( $(date +%s) - t0 )) s"
