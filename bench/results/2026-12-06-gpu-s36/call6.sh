#!/usr/bin/env bash
# Prepared in session 36, not run (its device time ran out): what call 5 left of the prefill attention blocks of
# 32 queries (MTPLX_CUDA_ATT_QB) — gpu-test on the tree (check 5b runs ATT_QB=16 / 8 in every mode), then the
# full 27B q4's 16k and 32k prefill and the 27B-16l q4 16-row verify at 16k keys (a verify of 11+ rows has 64+
# queries, so it may take the big blocks too), ATT_QB 32 / 8 alternated; first bench/cuda_attn_micro.cu. About
# two device calls: run it again on the warm machine; each step done is skipped.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }; BUDGET=${BUDGET:-540}
nvidia-smi --query-gpu=name --format=csv,noheader
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
# the tensor-core attention probe first (about a minute): accuracy of the hi / lo split and its speed
[ -f /tmp/am.done ] || { nvcc -O3 -arch=sm_90 -o /tmp/am bench/cuda_attn_micro.cu && /tmp/am 5 | tee $OUT/attn-micro.txt; touch /tmp/am.done; }
if [ ! -f /tmp/gpu-test.done ]; then
    bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "[$(el) s] gpu-test rc=$?"; tail -3 $OUT/gpu-test.txt
    touch /tmp/gpu-test.done
fi
[ -d /tmp/s27q4 ] || build/mtplx synth --preset qwen35-27b --dtype q4 --out /tmp/s27q4 --quiet
[ -d /tmp/s16q4 ] || build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s16q4 --quiet
for qb in 32 8 32 8; do
    [ $(el) -lt $BUDGET ] || { echo "out of time; run again"; exit 0; }
    echo "[$(el) s] 27B-16l q4 verify, 16k keys, ATT_QB=$qb: $(MTPLX_CUDA_ATT_QB=$qb build/mtplx bench --device cuda --verify-cost --rows 16 --reps 5 --context 16384 --model /tmp/s16q4 2>&1 | grep -E '^ +(1|8|16)-row forward' | tr -s ' ' | tr '\n' ';')"
done
for p in 16384 32768; do for qb in 32 8; do
    [ -f /tmp/p-$p-$qb.done ] && continue
    [ $(el) -lt $BUDGET ] || { echo "out of time; run again"; exit 0; }
    echo "[$(el) s] full 27B q4 prefill $p ATT_QB=$qb: $(MTPLX_CUDA_ATT_QB=$qb timeout 200 build/mtplx bench --device cuda --prefill $p --model /tmp/s27q4 2>&1 | tail -1)"
    touch /tmp/p-$p-$qb.done
done; done
echo "[$(el) s] ALL DONE"
