#!/usr/bin/env bash
# Session 34 call 5: the full-size shapes' prefill after the MoE tiles of 8 rows (2fd0322): 35B-A3B (40 layers) q4 4k
# with TROWS 4 / 8 alternated, then the 27B (64 layers) q4 at 4k and 32k (the 32k figure on the full shape for the
# first time), and the 27B's AR for the record.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
df -h /tmp | tail -1 | tee -a $L
rm -rf /tmp/s /tmp/moe /tmp/gpu-q4 /tmp/gpu-q8 /tmp/gpu-g32 2>/dev/null
scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
M=/tmp/full35; build/mtplx synth --preset qwen35-35b-a3b --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
pf() { local n=$1; shift; timeout 120 env "$@" build/mtplx bench --device cuda --prefill $n --model $M 2>&1 | tail -1; }
for r in 1 2; do for t in 4 8; do echo "35B-A3B 4k TROWS=$t: $(pf 4096 MTPLX_CUDA_MOE_TROWS=$t)" | tee -a $L; done; done
echo "35B done $(el) s" | tee -a $L
rm -rf $M; M=/tmp/full27; build/mtplx synth --preset qwen35-27b --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
echo "27B 4k: $(pf 4096 X=0)" | tee -a $L
echo "27B 32k: $(pf 32768 X=0)" | tee -a $L
echo "27B 4k again: $(pf 4096 X=0)" | tee -a $L
[ $(el) -lt 420 ] && timeout 90 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 3 --context 512 --model $M 2>&1 | tail -12 | tee -a $L
echo "done $(el) s" | tee -a $L
