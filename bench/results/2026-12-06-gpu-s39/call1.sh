#!/usr/bin/env bash
# Session 39, call 1 (one device call, ~6 min): (a) session 37's att-minb2.patch — 16-query prefill attention
# blocks compiled for two an SM — bit checks at head widths 128 / 256, then the 27B-16l q4 16k prefill with
# ATT_QB 32 / 16 alternated; (b) the 27B-16l q4 verify ratios on today's tree, and a per-op profile of the
# 1-, 2- and 4-row forwards of the same run (what grows with the rows); (c) the embedded model's MTP with the
# adaptive depth (D@X) beside the fixed depths on the GPU.
set -uo pipefail
P=bench/results/2026-12-06-gpu-s37/att-minb2.patch
grep -q ATT_G_MINB src/backend/cuda/cuda_seq.cu || { git apply $P 2>/dev/null || patch -p1 --forward < $P; } || { echo "FAIL: $P does not apply"; exit 1; }
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s16q4 --quiet &
T=$(seq -s, 5 3 2100)
MTPLX_CUDA_ATT_GROUP=0 build/mtplx logits --tokens $T --out /tmp/a0.st > /dev/null || echo "FAIL logits"
MTPLX_CUDA_ATT_QB=16 build/mtplx logits --tokens $T --out /tmp/a1.st > /dev/null
cmp -s /tmp/a0.st /tmp/a1.st && echo "embedded 700-token prefill: ATT_GROUP=0 == ATT_QB=16" || echo "FAIL embedded ATT_QB=16 differs"
wait
echo "[$(el) s] synth done"
T=$(seq -s, 5 3 1202)
MTPLX_CUDA_ATT_GROUP=0 build/mtplx logits --model /tmp/s16q4 --tokens $T --out /tmp/b0.st > /dev/null || echo "FAIL 27B logits"
for g in 16 32; do
    MTPLX_CUDA_ATT_QB=$g build/mtplx logits --model /tmp/s16q4 --tokens $T --out /tmp/b1.st > /dev/null
    cmp -s /tmp/b0.st /tmp/b1.st && echo "27B-16l q4 400-token prefill: ATT_GROUP=0 == ATT_QB=$g" || echo "FAIL 27B-16l ATT_QB=$g differs"
done
echo "[$(el) s] identity done"
echo "--- verify ratios, 27B-16l q4"
build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 7 --context 512 --model /tmp/s16q4 2>&1 | tail -12
for r in 1 2 4; do
    CUDA_MODULE_LOADING=EAGER MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=$r build/mtplx bench --device cuda --verify-cost \
        --rows 4 --reps 21 --context 512 --model /tmp/s16q4 > $OUT/prof-27b16l-q4-rows$r.txt 2>&1
done
echo "[$(el) s] profiles done"
echo "--- embedded bf16, MTP depths incl. adaptive (T 0.6)"
for i in 1 2; do
    build/mtplx bench --device cuda --depths 0,3,4,6@0.4,6@0.3,8@0.4 --prompts 8 --temperature 0.6 2>/dev/null | sed -n "/^depth/,/^(drafts/p"
done
echo "[$(el) s] mtp done"
for qb in 32 16 32 16; do
    [ $(el) -lt ${BUDGET:-480} ] || { echo "out of time"; break; }
    echo "[$(el) s] 27B-16l q4 prefill 16384 ATT_QB=$qb: $(MTPLX_CUDA_ATT_QB=$qb build/mtplx bench --device cuda --prefill 16384 --reps 2 --model /tmp/s16q4 2>&1 | tail -1)"
done
echo "[$(el) s] ALL DONE"
