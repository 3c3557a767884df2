# Prepared in session 43, not run (no device minutes left): the 1-row integer-pipe matmul a warp a whole tile
# (sk-wt.patch: k_sk_qdp WT, knob MTPLX_CUDA_SK_WT, default for K of at most 8 spans). Bits by construction
# (each of the split's warp ranges of a tile from zero, partials added in warp order as sk_flush_last adds
# them); checks: gpu-test (its sk_integer_pipe check now compares SK_WT=0 / 1 logits and runs
# test_backend_cuda with SK_WT=1 for every shape), then speed: ncu of k_sk_qdp and the embedded model's
# D3 / D8@0.4 with the knob alternated (the draft steps' q4 copies are k_sk_qdp launches of K = 512 / 1,024).
# Run from the repo root on the device: bash bench/results/2026-12-07-gpu-s43/next-call.sh 2>&1 | tail -60
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
P=bench/results/2026-12-07-gpu-s43/sk-wt.patch
grep -q sk_qdp_wt src/backend/cuda/cuda_mma_sk.cu || patch -p1 -s < $P || { echo "patch failed"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
GPU_TEST_SKIP='gemm_bit_identical|moe_slots|gdn_prepares|commit_one' scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1
echo "[$(el) s] gpu-test rc=$?"; grep -E "^(PASS|FAIL|SKIP)" $OUT/gpu-test.txt | tr '\n' ';'; echo; grep -A15 "^FAIL" $OUT/gpu-test.txt | head -30
B="build/mtplx bench --device cuda --prompts 8 --temperature 0.6 --max-tokens 256 --depths 0,3,8@0.4"
for r in 1 2 3; do
  for wt in 0 1; do
    echo "== round $r SK_WT=$wt" >> $OUT/bench.txt
    MTPLX_CUDA_SK_WT=$wt MTPLX_CUDA_STEPS=1 $B >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^(AR|D[0-9])|^ +1 +[0-9]+ " $OUT/bench.txt
for wt in 0 1; do
  MTPLX_CUDA_SK_WT=$wt ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:k_sk_qdp \
    --print-summary per-kernel build/mtplx bench --device cuda --prompts 1 --max-tokens 64 --repeats 1 --depths 8@0.4 \
    --temperature 0.6 > $OUT/ncu-wt$wt.txt 2>&1
  grep -A7 -E "^  .*k_sk_qdp" $OUT/ncu-wt$wt.txt | grep -E "^  [a-z ]*k_|gpu__time" | paste - - |
    sed -E "s/\(sk_jobs.*\) \(/ (/; s/, Device.*Invocations/ n/" | tr -s " " | sed "s/^/WT=$wt /" | head -12
done
echo "[$(el) s] ALL DONE"
