#!/usr/bin/env bash
# Session 39, call 2: the tree with att-minb2.patch applied and k_gdn_commit's 32-bit index math.
# (a) test_backend_cuda (the batched commit against copies + replays, bit for bit; every CUDA op);
# (b) 27B-16l q4: verify ratios with the rows as top-20 lists (as a verify takes them), and the commit's
#     time in a profile of the 2-row forwards (call 1 on the old kernel: 116.8 us a call);
# (c) prefill, ATT_QB 32 / 16 alternated: 27B-16l q4 at 4k and 32k, the embedded model at 4k;
# (d) `mtplx tune` on the GPU with the adaptive candidates, and `run` taking its choice.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
grep -q ATT_G_MINB src/backend/cuda/cuda_seq.cu || { echo "FAIL: tree without the patch"; exit 1; }
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s16q4 --quiet &
timeout 200 build/tests/test_backend_cuda > $OUT/test_backend_cuda.txt 2>&1 && echo "test_backend_cuda: PASS" || { echo "test_backend_cuda: FAIL"; tail -20 $OUT/test_backend_cuda.txt; }
wait
echo "[$(el) s] tests + synth done"
build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 7 --context 512 --logits-top 20 --model /tmp/s16q4 2>&1 | tail -12
for cm in 1 0; do
    CUDA_MODULE_LOADING=EAGER MTPLX_CUDA_COMMIT=$cm MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=2 build/mtplx bench --device cuda \
        --verify-cost --rows 2 --reps 21 --context 512 --logits-top 20 --model /tmp/s16q4 > $OUT/prof-rows2-commit$cm.txt 2>&1
    echo "COMMIT=$cm: $(grep -E 'gdn_commit|gdn_replay' $OUT/prof-rows2-commit$cm.txt | tr -s ' ')"
done
echo "[$(el) s] verify done"
for n in 4096 32768; do
    for qb in 32 16 32 16; do
        [ $(el) -lt ${BUDGET:-500} ] || { echo "out of time"; break 2; }
        echo "[$(el) s] 27B-16l q4 prefill $n ATT_QB=$qb: $(MTPLX_CUDA_ATT_QB=$qb build/mtplx bench --device cuda --prefill $n --reps 2 --model /tmp/s16q4 2>&1 | tail -1)"
    done
done
for qb in 32 16 32 16; do
    echo "[$(el) s] embedded prefill 4096 ATT_QB=$qb: $(MTPLX_CUDA_ATT_QB=$qb build/mtplx bench --device cuda --prefill 4096 --reps 3 2>&1 | tail -1)"
done
export MTPLX_HOME=/tmp/th
build/mtplx tune --device cuda --max-depth 4 --prompts 8 --repeats 2 2>&1 | tail -9
build/mtplx run --device cuda --prompt-tokens 1,2,3,4 --max-tokens 64 --json | grep -o '"depth":[0-9]*,"draft_min_conf":[0-9.]*'
echo "[$(el) s] ALL DONE"
