#!/usr/bin/env bash
# Session 39, call 4: knob sweep for the 27B-16l q4 verify rows (top-20 lists), all same-bits knobs: the
# GDN heads split over 2 / 4 (default here) / 8 blocks, and the group-piece q span layout for 2..8 rows
# (MTPLX_CUDA_SK_GA=1; the 1-row launch is the integer-pipe kernel either way), alternated.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
[ -d /tmp/s16q4 ] || build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s16q4 --quiet
for round in 1 2; do
    for kn in NONE=0 GDN_SPLIT=2 GDN_SPLIT=8 SK_GA=1; do
        echo "$kn: $(env MTPLX_CUDA_$kn build/mtplx bench --device cuda --verify-cost --rows 8 --reps 9 --context 512 --logits-top 20 \
            --model /tmp/s16q4 2>&1 | grep -E "row forward" | awk '{printf "%s ", $3}')"
    done
done
echo "[$(el) s] ALL DONE"
