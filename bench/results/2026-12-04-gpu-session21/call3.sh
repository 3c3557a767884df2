#!/usr/bin/env bash
# session 21 call 3: ncu of one grouped attention launch vs one original launch (27B-16l q4, 1 row, 16384 keys)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1 | tee -a $L
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" | tee -a $L
for g in 1 0; do
  k='regex:k_attn_core'
  MTPLX_CUDA_ATT_GROUP=$g timeout 200 $NCU --kernel-name "$k" --launch-skip 20 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 1 --reps 3 --context 16384 --logits-top 20 > $OUT/ncu$g.txt 2>&1
  echo "== ATT_GROUP=$g" | tee -a $L
  grep -E "k_attn|Duration|Memory Throughput|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\)|Registers Per|Dynamic Shared|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Stall|Issued Warp|No Eligible|Grid Size|Waves Per SM|One or More" $OUT/ncu$g.txt | head -40 | tee -a $L
done
echo "total $(el) s" | tee -a $L
