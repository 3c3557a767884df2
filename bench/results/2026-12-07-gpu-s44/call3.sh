# session 44, call 3: on the landing tree (call 2's GDN / conv loads kept, its top-k change dropped: slower), with
# session 43's prepared whole-tile 1-row integer-pipe matmul applied (sk-wt.patch, knob MTPLX_CUDA_SK_WT, default on
# for K of at most 8 spans): scripts/gpu-test.sh (the patch extends its integer-pipe check to SK_WT 0 / 1; the GEMM
# and MoE-slot checks skipped for device time: untouched), then D3 / D8@0.4 with SK_WT alternated and ncu of k_sk_qdp.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
P=bench/results/2026-12-07-gpu-s43/sk-wt.patch
grep -q sk_qdp_wt src/backend/cuda/cuda_mma_sk.cu || patch -p1 -s < $P || { echo "patch failed"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
GPU_TEST_SKIP='gemm_bit_identical|moe_slots' scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1
echo "[$(el) s] gpu-test rc=$?"; grep -E "^(PASS|FAIL|SKIP)" $OUT/gpu-test.txt | tr '\n' ';'; echo; grep -A15 "^FAIL" $OUT/gpu-test.txt | head -30
B="build/mtplx bench --device cuda --prompts 8 --temperature 0.6 --max-tokens 256 --depths 0,3,8@0.4"
for r in 1 2 3; do
  [ $(el) -lt 430 ] || { echo "round $r skipped: $(el) s" >> $OUT/bench.txt; break; }
  for wt in 0 1; do
    echo "== round $r SK_WT=$wt" >> $OUT/bench.txt
    MTPLX_CUDA_SK_WT=$wt MTPLX_CUDA_STEPS=1 $B >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^(AR|D[0-9])|^ +1 +[0-9]+ |skipped" $OUT/bench.txt
for wt in 0 1; do
  [ $(el) -lt 530 ] || { echo "ncu $wt skipped: $(el) s"; continue; }
  MTPLX_CUDA_SK_WT=$wt ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:k_sk_qdp \
    --print-summary per-kernel build/mtplx bench --device cuda --prompts 1 --max-tokens 64 --repeats 1 --depths 8@0.4 \
    --temperature 0.6 > $OUT/ncu-wt$wt.txt 2>&1
  grep -A7 -E "^  .*k_sk_qdp" $OUT/ncu-wt$wt.txt | grep -E "^  [a-z ]*k_|gpu__time" | paste - - |
    sed -E "s/\(sk_jobs.*\) \(/ (/; s/, Device.*Invocations/ n/" | tr -s " " | sed "s/^/WT=$wt /" | head -12
done
echo "[$(el) s] ALL DONE"
