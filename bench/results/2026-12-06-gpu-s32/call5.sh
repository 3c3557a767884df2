#!/usr/bin/env bash
# session 32 call 5: the per-slot MoE kernels with their input rows staged in shared memory (MTPLX_CUDA_MOE_STAGE,
# default 1; ncu of call 4: the unstaged kernels at 0.3-0.44 TB/s, L1-bound on each lane's strided row reads) and
# MTPLX_CUDA_MOE_SLOTS default 32. Bits: test_backend_cuda; logits of the MoE goldens and a 35B-A3B-10l q4 synth with
# SLOTS=0 (tiles) / default (slots, staged) / STAGE=0. Speed: verify-cost 1..8 rows, STAGE 1 / 0 / SLOTS 0 alternated.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
timeout 60 build/tests/test_backend_cuda > $OUT/tbc.txt 2>&1; echo "test_backend_cuda rc=$? $(tail -1 $OUT/tbc.txt)" | tee -a $L
M=/tmp/moe/q4; mkdir -p /tmp/moe
build/mtplx synth --preset qwen35-35b-a3b-10l --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
T=11,48,85,122,159,196,233,250,7,99,201,3
for m in tests/data/goldens/qwen3_5_moe tests/data/goldens-extra/qwen3_5_moe_b tests/data/goldens/deepseek_v3 $M; do
  for mode in "--step" ""; do
    MTPLX_CUDA_MOE_SLOTS=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l0.st > /dev/null 2>&1
    build/mtplx logits --model $m --tokens $T $mode --out /tmp/l1.st > /dev/null 2>&1
    MTPLX_CUDA_MOE_STAGE=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l2.st > /dev/null 2>&1
    cmp -s /tmp/l0.st /tmp/l1.st && cmp -s /tmp/l0.st /tmp/l2.st && echo "$m [$mode]: tiles == staged slots == slots" | tee -a $L || echo "$m [$mode]: DIFFER $(ls -l /tmp/l0.st /tmp/l1.st /tmp/l2.st | awk '{print $5}' | tr '\n' ' ')" | tee -a $L
  done
done
echo "bits $(el) s" | tee -a $L
for v in "STAGE=1" "STAGE=0" "SLOTS=0" "STAGE=1" "STAGE=0" "SLOTS=0"; do
  [ $(el) -gt 240 ] && break
  echo "$v: $(env MTPLX_CUDA_MOE_$v timeout 60 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $M 2>&1 | grep -E 'row forward|tok/s' | tr -s ' ' | tr '\n' ' ')" | tee -a $L
done
echo "done $(el) s" | tee -a $L
# then, by hand on the same warm machine (output call5-ncu-staged.txt, call5-prof1-staged.txt):
#   ncu --clock-control none -k regex:"k_moe_gu_slot|k_moe_down_slots" --launch-skip 20 --launch-count 2 --section SpeedOfLight \
#       build/mtplx bench --device cuda --model /tmp/moe/q4 --verify-cost --rows 1 --reps 3 --context 16
#   CUDA_MODULE_LOADING=EAGER MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=1 build/mtplx bench --device cuda --verify-cost \
#       --rows 1 --reps 41 --context 16 --model /tmp/moe/q4
