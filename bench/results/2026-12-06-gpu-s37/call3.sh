#!/usr/bin/env bash
# Session 37, call 3: where the prefill attention's time goes now that it takes blocks of 32 queries — the
# full 27B q4's 16k prefill per-op profile (MTPLX_CUDA_PROFILE=1, session 36 measured it with blocks of 8), ncu
# of one grouped attention launch late in a 27B-16l q4 16k prefill, and ncu of the probe's f32 block (17.4
# TFLOP/s) beside it: what the next step on long prompts has to fix. One device call (BUDGET: seconds after
# which the profile, the last step, is skipped).
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
[ -d /tmp/s16q4 ] || build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s16q4 --quiet
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats"
timeout 150 ncu --clock-control none -k regex:k_attn_core.*_g --launch-skip 100 --launch-count 1 $S \
    build/mtplx bench --device cuda --prefill 16384 --reps 1 --model /tmp/s16q4 > $OUT/ncu-attn-27b16l-16k.txt 2>&1
echo "[$(el) s] ncu product rc=$?"
nvcc -O3 -arch=sm_90 -o /tmp/am bench/cuda_attn_micro.cu && timeout 60 ncu --clock-control none -k regex:k_f32 --launch-count 1 $S /tmp/am 1 > $OUT/ncu-attn-probe-f32.txt 2>&1
echo "[$(el) s] ncu probe rc=$?"
[ $(el) -lt ${BUDGET:-200} ] || { echo "out of time for the profile"; exit 0; }
[ -d /tmp/s27q4 ] || build/mtplx synth --preset qwen35-27b --dtype q4 --out /tmp/s27q4 --quiet
MTPLX_CUDA_PROFILE=1 timeout 120 build/mtplx bench --device cuda --prefill 16384 --reps 1 --model /tmp/s27q4 > $OUT/prof-27b-q4-16384-qb32.txt 2>&1
echo "[$(el) s] profile rc=$?"; tail -14 $OUT/prof-27b-q4-16384-qb32.txt
echo "[$(el) s] ALL DONE"
