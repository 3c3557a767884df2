#!/usr/bin/env bash
# Session 39, call 3: the tree with prefill attention blocks of 16 queries by default (two an SM) and the
# batched commit four elements a thread (float4; MTPLX_CUDA_COMMIT=2 keeps one).
# (a) test_backend_cuda with the default commit and with COMMIT=2 (the batched commit ≡ copies + replays);
# (b) 27B-16l q4: the commit's time in a profile of the 2-row forwards, COMMIT=1 (float4) / 2 (one element);
# (c) 27B-16l q4 verify ratios (top-20 lists), the GDN heads split over blocks for 2+ rows (default) against
#     one fused block a head (MTPLX_CUDA_GDN_SPLIT=1, same bits), alternated.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s16q4 --quiet &
for cm in 1 2; do
    MTPLX_CUDA_COMMIT=$cm timeout 200 build/tests/test_backend_cuda > $OUT/test_backend_cuda-commit$cm.txt 2>&1 && echo "test_backend_cuda COMMIT=$cm: PASS" || { echo "test_backend_cuda COMMIT=$cm: FAIL"; tail -20 $OUT/test_backend_cuda-commit$cm.txt; }
done
wait
echo "[$(el) s] tests + synth done"
for cm in 1 2; do
    CUDA_MODULE_LOADING=EAGER MTPLX_CUDA_COMMIT=$cm MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=2 build/mtplx bench --device cuda \
        --verify-cost --rows 2 --reps 21 --context 512 --logits-top 20 --model /tmp/s16q4 > $OUT/prof-rows2-commit$cm.txt 2>&1
    echo "COMMIT=$cm: $(grep -E 'gdn_commit' $OUT/prof-rows2-commit$cm.txt | tr -s ' ')"
done
for sp in 0 1 0 1; do
    echo "--- GDN_SPLIT=$sp ($(el) s)"
    MTPLX_CUDA_GDN_SPLIT=$sp build/mtplx bench --device cuda --verify-cost --rows 8 --reps 9 --context 512 --logits-top 20 \
        --model /tmp/s16q4 2>&1 | grep -E "row forward"
done
echo "[$(el) s] ALL DONE"
