#!/usr/bin/env bash
# Session 40, call 1 (short: the device time went to failed starts): the two launches fewer a tiny model's
# draft step — the MTP layer's input in one launch (MTPLX_CUDA_FUSE_MTP_IN) and the 8,192-id top k in one
# block a row (MTPLX_CUDA_TOP_ROW) — first their bit checks (test_backend_cuda; gpu-test's check 8d run
# inline: MTP head logits and sampled D3 text, knob off vs on, embedded bf16 and q4 g64 / q4 g32 / q8), then
# alternated against the old launches (embedded bf16, T 0.6, with the step table MTPLX_CUDA_STEPS=1), then
# the adaptive thresholds on the GPU.
set -uo pipefail
# the change under test, kept as a patch until it is measured (bench/cuda.md, "Session 40")
PATCH=bench/results/2026-12-07-gpu-s40/draft-links.patch
grep -q fuse_mtp_in src/backend/cuda/cuda_backend.h || git apply $PATCH || patch -p1 --forward < $PATCH || exit 1
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
build/tests/test_backend_cuda > $OUT/test_backend_cuda.txt 2>&1; tail -1 $OUT/test_backend_cuda.txt; grep -i fail $OUT/test_backend_cuda.txt | head -5
eval "$(sed -n '/^qmodels() {/,/^}/p;/^mtp_in_equal() {/,/^}/p' scripts/gpu-test.sh)"
if mtp_in_equal > $OUT/mtp-in-check.txt 2>&1; then echo "PASS mtp_input_and_top_row_bit_identical"; else echo "FAIL mtp_input"; tail -5 $OUT/mtp-in-check.txt; fi
echo "[$(el) s] checked"
B="build/mtplx bench --device cuda --prompts 8 --max-tokens 256 --temperature 0.6"
for r in 1 2; do
    [ $r = 1 ] || [ $(el) -lt 200 ] || break
    for k in "MTPLX_CUDA_FUSE_MTP_IN=0 MTPLX_CUDA_TOP_ROW=0" "MTPLX_CUDA_TOP_ROW=1" ; do
        echo "[$(el) s] == round $r [$k]"
        env $k MTPLX_CUDA_STEPS=1 $B --depths 0,3,8@0.4 2>&1 | sed -n '/^AR/,/^D8/p;/^  *1 /p'
    done
done
[ $(el) -lt 250 ] || { echo "[$(el) s] no time for the thresholds"; exit 0; }
echo "[$(el) s] == thresholds"
$B --depths 8@0.3,8@0.4,8@0.5,10@0.4,12@0.5 2>&1 | sed -n '/^depth/,/^D12/p'
echo "[$(el) s] ALL DONE"
