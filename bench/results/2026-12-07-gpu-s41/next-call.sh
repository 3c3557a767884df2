#!/usr/bin/env bash
# Session 41, prepared for the next session with GPU time (never run: no machine came after call 1): applies
# swiglu-down.patch if the tree lacks it, builds, runs the SwiGLU-in-down bit check (gpu-test check 8e,
# inline), FUSE_SWI 0 / 1 alternated twice (embedded bf16, T 0.6), the adaptive thresholds, then the whole
# gpu-test.sh (its first full run with session 40's draft-links commit 9ffb427 too).
set -uo pipefail
PATCH=bench/results/2026-12-07-gpu-s41/swiglu-down.patch
grep -q fuse_swi src/backend/cuda/cuda_backend.h || git apply $PATCH || patch -p1 --forward < $PATCH || exit 1
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
eval "$(sed -n '/^swi_equal() {/,/^}/p' scripts/gpu-test.sh)"
if swi_equal > $OUT/swi-check.txt 2>&1; then echo "PASS swiglu_in_down_projection_bit_identical"; else echo "FAIL swi"; tail -5 $OUT/swi-check.txt; fi
echo "[$(el) s] checked"
B="build/mtplx bench --device cuda --prompts 8 --max-tokens 256 --temperature 0.6"
for k in 0 1 0 1; do
    echo "[$(el) s] == [MTPLX_CUDA_FUSE_SWI=$k]"
    MTPLX_CUDA_FUSE_SWI=$k $B --depths 0,3,8@0.4 2>&1 | grep -E "^(depth|AR|D[0-9])"
done
echo "[$(el) s] == thresholds"
$B --depths 8@0.3,8@0.4,8@0.5,10@0.4,12@0.5 2>&1 | grep -E "^(depth|AR|D[0-9])"
echo "[$(el) s] == gpu-test"
timeout 300 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc $?"
grep -E "^(PASS|FAIL|SKIP)|failed" $OUT/gpu-test.txt | tail -40
echo "[$(el) s] ALL DONE"
