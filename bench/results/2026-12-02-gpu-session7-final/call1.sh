#!/usr/bin/env bash
# lead, session 7, final call 1 (merged main): gpu-test; embedded MTP; the D3 cycle on the 27B-16l shape
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
scripts/device-build.sh build build/mtplx CUDA=1 > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
timeout 260 scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc $? $(( $(date +%s) - t0 )) s"
grep -E "FAIL|passed|failed" $OUT/gpu-test.txt | tail -8
for r in 1 2; do echo "+ embedded bench D0,3 round $r"; timeout 30 build/mtplx bench --device cuda --depths 0,3 2>&1 | grep -E "^(AR|D3)"; done | tee $OUT/bench-emb.txt
echo "+ 8 parallel D0 / D3, 1 D3 (run --parallel, embedded)"; for d in 0 3; do timeout 30 build/mtplx run --device cuda --prompt "def fib(n):" --samples 8 --parallel --depth $d --max-tokens 256 --temperature 0.6 2>&1 >/dev/null | tail -1; done | tee $OUT/par-emb.txt
echo "total $(( $(date +%s) - t0 )) s"
