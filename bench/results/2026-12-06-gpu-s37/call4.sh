#!/usr/bin/env bash
# Session 37, call 4: 16-query attention blocks, two an SM (ATT_G_MINB: 128 registers, the largest shared-memory
# carveout) against one 32-query block an SM. Bit identity at widths 256 (27B-16l q4, 400-token prefill logits,
# ATT_GROUP=0 vs ATT_QB=16 vs 32) and 128 (embedded), then the 27B-16l q4's 16k prefill with ATT_QB 32 / 16
# alternated while BUDGET seconds last. Not run in session 37 (its device time ran out), so the kernel change is
# kept as a patch: `git apply bench/results/2026-12-06-gpu-s37/att-minb2.patch` first (ptxas, sm_90: <16, 256>
# 128 registers and <16, 128> 122, no spills; <32, 256> stays at 209).
set -uo pipefail
P=bench/results/2026-12-06-gpu-s37/att-minb2.patch
grep -q ATT_G_MINB src/backend/cuda/cuda_seq.cu || { git apply $P 2>/dev/null || patch -p1 --forward < $P; } || { echo "FAIL: $P does not apply"; exit 1; }

export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }; BUDGET=${BUDGET:-150}
nvidia-smi --query-gpu=name --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s16q4 --quiet &
T=$(seq -s, 5 3 2100)
MTPLX_CUDA_ATT_GROUP=0 build/mtplx logits --tokens $T --out /tmp/a0.st > /dev/null || echo "FAIL logits"
MTPLX_CUDA_ATT_QB=16 build/mtplx logits --tokens $T --out /tmp/a1.st > /dev/null
cmp -s /tmp/a0.st /tmp/a1.st && echo "embedded: ATT_GROUP=0 == ATT_QB=16" || echo "FAIL embedded ATT_QB=16 differs"
wait
T=$(seq -s, 5 3 1202)
MTPLX_CUDA_ATT_GROUP=0 build/mtplx logits --model /tmp/s16q4 --tokens $T --out /tmp/b0.st > /dev/null || echo "FAIL 27B logits"
for g in 16 32; do
    MTPLX_CUDA_ATT_QB=$g build/mtplx logits --model /tmp/s16q4 --tokens $T --out /tmp/b1.st > /dev/null
    cmp -s /tmp/b0.st /tmp/b1.st && echo "27B-16l q4 400-token prefill: ATT_GROUP=0 == ATT_QB=$g" || echo "FAIL 27B-16l ATT_QB=$g differs"
done
echo "[$(el) s] identity done"
for qb in 32 16 32 16 32 16; do
    [ $(el) -lt $BUDGET ] || { echo "out of time"; break; }
    echo "[$(el) s] 27B-16l q4 prefill 16384 ATT_QB=$qb: $(MTPLX_CUDA_ATT_QB=$qb build/mtplx bench --device cuda --prefill 16384 --reps 2 --model /tmp/s16q4 2>&1 | tail -1)"
done
echo "[$(el) s] ALL DONE"
