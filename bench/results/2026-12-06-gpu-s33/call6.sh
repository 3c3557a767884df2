#!/usr/bin/env bash
# Prepared in session 33, run in session 34 (call 1). Next step for the MoE prefill after a87fc27's staged tiles: tiles of
# 8 rows (MTPLX_CUDA_MOE_TROWS=8: half the weight reads and dequantization per product; staging up to 100 KB a
# block, opted in above 48 KB; the down kernel 2 outputs a warp at 8 rows so the sums stay in registers — ptxas:
# no spills). Same bits by the tiles' argument (a row's sums never depend on its tile). Apply first:
#   git apply bench/results/2026-12-06-gpu-s33/moe-trows8.patch
# Then: bits (test_backend_cuda and the MoE goldens' logits with TROWS=8 against the default), the 35B-A3B-10l q4
# 4k prefill with TROWS 4 / 8 and TLOOP 8 / 16 alternated, ncu of the tiled kernels inside a prefill (what bounds
# them at ~5 TFLOP/s), then the whole gpu-test (a87fc27's tiles have not run inside it yet).
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
{ git apply bench/results/2026-12-06-gpu-s33/moe-trows8.patch || patch -p1 < bench/results/2026-12-06-gpu-s33/moe-trows8.patch; } || { echo "patch failed" | tee -a $L; exit 1; }
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
for e in "MTPLX_CUDA_MOE_TROWS=8" "MTPLX_CUDA_MOE_TROWS=8 MTPLX_CUDA_MOE_SLOTS=0" "MTPLX_CUDA_MOE_TROWS=8 MTPLX_CUDA_MOE_SLOTS=4 MTPLX_CUDA_MOE_TSTAGE=0"; do
  env $e timeout 60 build/tests/test_backend_cuda > $OUT/tbc.txt 2>&1; echo "test_backend_cuda [$e] rc=$? $(tail -1 $OUT/tbc.txt)" | tee -a $L
done
T=11,48,85,122,159,196,233,250,7,99,201,3
for m in tests/data/goldens/qwen3_5_moe tests/data/goldens-extra/qwen3_5_moe_b tests/data/goldens/deepseek_v3; do
  for mode in "" "--step"; do
    MTPLX_CUDA_MOE_SLOTS=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l0.st > /dev/null 2>&1
    MTPLX_CUDA_MOE_SLOTS=0 MTPLX_CUDA_MOE_TROWS=8 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l1.st > /dev/null 2>&1
    MTPLX_CUDA_MOE_TROWS=8 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l2.st > /dev/null 2>&1
    r="$m [$mode]:"; for k in 1 2; do cmp -s /tmp/l0.st /tmp/l$k.st && r="$r l$k=same" || r="$r l$k=DIFFER"; done
    echo "$r" | tee -a $L
  done
done
M=/tmp/moe/q4; mkdir -p /tmp/moe
build/mtplx synth --preset qwen35-35b-a3b-10l --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
pf() { timeout 60 env "$@" build/mtplx bench --device cuda --prefill 4096 --model $M 2>&1 | tail -1; }
for r in 1 2; do
  for e in "MTPLX_CUDA_MOE_TROWS=4" "MTPLX_CUDA_MOE_TROWS=8" "MTPLX_CUDA_MOE_TROWS=8 MTPLX_CUDA_MOE_TLOOP=16" "MTPLX_CUDA_MOE_TROWS=4 MTPLX_CUDA_MOE_TLOOP=16"; do
    echo "10l prefill [$e]: $(pf $e)" | tee -a $L
  done
done
timeout 150 ncu --clock-control none -k regex:"k_moe_gu|k_moe_down" --launch-skip 40 --launch-count 2 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis build/mtplx bench --device cuda --prefill 1024 --model $M > $OUT/ncu-tiles.txt 2>&1
echo "ncu done $(el) s" | tee -a $L
# (session 34: the whole gpu-test moved to its own call on the final tree, to spend device time once)
echo "done $(el) s" | tee -a $L
# If TROWS=8 is identical and faster: make it the default (cuda_backend.cu), add it to gpu-test check 8c, and
# rerun the whole gpu-test.
