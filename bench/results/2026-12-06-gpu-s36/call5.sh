#!/usr/bin/env bash
# Session 36, call 5: attention blocks of up to 32 prefill queries (MTPLX_CUDA_ATT_QB). Build; bit identity
# (gpu-test check 5b's comparisons with the new settings; the full 27B q4's 400-token prefill logits with
# ATT_QB=32 and ATT_GROUP=0, head width 256); then its 8k / 4k / 16k prefill with ATT_QB 32 and 8 alternated.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }; BUDGET=${BUDGET:-560}
nvidia-smi --query-gpu=name --format=csv,noheader
[ -x build/mtplx ] && [ build/mtplx -nt src/backend/cuda/cuda_seq.cu ] ||
    scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "[$(el) s] built"
[ -d /tmp/s27q4 ] || build/mtplx synth --preset qwen35-27b --dtype q4 --out /tmp/s27q4 --quiet &
T=$(seq -s, 5 3 2100)
for mode in "" "--step"; do
    MTPLX_CUDA_ATT_GROUP=0 build/mtplx logits --tokens $T $mode --out /tmp/a0.st > /dev/null || echo "FAIL logits"
    for g in ATT_GROUP=2 ATT_GROUP=1 ATT_QB=16 ATT_QB=8; do
        env MTPLX_CUDA_$g build/mtplx logits --tokens $T $mode --out /tmp/a1.st > /dev/null
        cmp -s /tmp/a0.st /tmp/a1.st && echo "embedded [$mode]: ATT_GROUP=0 == $g" || echo "FAIL embedded [$mode] $g differs"
    done
done
echo "[$(el) s] embedded identity done"
wait
T=$(seq -s, 5 3 1202)
MTPLX_CUDA_ATT_GROUP=0 build/mtplx logits --model /tmp/s27q4 --tokens $T --out /tmp/b0.st > /dev/null || echo "FAIL 27b logits"
for g in ATT_QB=32; do
    env MTPLX_CUDA_$g build/mtplx logits --model /tmp/s27q4 --tokens $T --out /tmp/b1.st > /dev/null
    cmp -s /tmp/b0.st /tmp/b1.st && echo "27B q4 400-token prefill: ATT_GROUP=0 == $g" || echo "FAIL 27B $g differs"
done
rm -f /tmp/b0.st /tmp/b1.st
echo "[$(el) s] 27B identity done"
for p in 8192 4096 16384; do for qb in 32 8 32 8; do
    [ $(el) -lt $BUDGET ] || { echo "out of time"; break 2; }
    echo "[$(el) s] prefill $p ATT_QB=$qb: $(MTPLX_CUDA_ATT_QB=$qb timeout $(( BUDGET + 30 - $(el) )) build/mtplx bench --device cuda --prefill $p --model /tmp/s27q4 2>&1 | tail -1)"
done; done
echo "[$(el) s] done"
