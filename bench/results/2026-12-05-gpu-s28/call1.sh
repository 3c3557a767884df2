#!/usr/bin/env bash
# session 28 call 1: the 1-row bf16 matmul's read rate by access pattern (bench/cuda_gemv_micro.cu)
# beside the decode kernel itself (bench --matmul bf16) and --membw, on the 27B FFN shape.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $L
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
$NVCC -O3 -arch=sm_90 -o /tmp/gm bench/cuda_gemv_micro.cu -Xptxas -v > $OUT/nvcc.txt 2>&1 || { tail -20 $OUT/nvcc.txt; exit 1; }
echo "micro built $(el) s" | tee -a $L
/tmp/gm 3 2>&1 | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
for i in 1 2; do
  build/mtplx bench --device cuda --membw --matmul bf16 --shape 17408x5120 --count 4 --rows 2 --reps 5 2>&1 | tail -4 | tee -a $L
  /tmp/gm 1 2>&1 | tail -12 | tee -a $L
done
echo "done $(el) s" | tee -a $L
