#!/usr/bin/env bash
# session 32 call 4: the device MoE's per-slot path for calls of few rows (MTPLX_CUDA_MOE_SLOTS, default 4:
# gate / up a grid row per slot, down + combine a grid row per input row; no plan, no yk round trip).
# (a) bits: test_backend_cuda (its MoE check compares every row of 1..20-row calls with the row alone: tiles
#     against slots), logits of --step runs (1-row calls) on the MoE goldens and a 35B-A3B-10l q4 synth with
#     SLOTS=0 and default; (b) 35B-A3B-10l q4 verify-cost (1..8 rows), SLOTS 0 / 4 alternated; (c) the per-op
#     table of its 1-row forwards with kernels loaded eagerly.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
MTPLX_DEVICE=cuda timeout 60 build/tests/test_backend_cuda > $OUT/tbc.txt 2>&1; echo "test_backend_cuda rc=$? $(tail -1 $OUT/tbc.txt)" | tee -a $L
T=11,48,85,122,159,196,233,250,7,99,201,3
for m in tests/data/goldens/qwen3_5_moe tests/data/goldens-extra/qwen3_5_moe_b tests/data/goldens/deepseek_v3; do
  for mode in "--step" "--step --mtp" ""; do
    MTPLX_CUDA_MOE_SLOTS=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l0.st > /tmp/e0 2>&1 || { echo "$m [$mode] slots 0 failed: $(tail -1 /tmp/e0)" | tee -a $L; continue; }
    build/mtplx logits --model $m --tokens $T $mode --out /tmp/l1.st > /tmp/e1 2>&1 || { echo "$m [$mode] failed: $(tail -1 /tmp/e1)" | tee -a $L; continue; }
    cmp -s /tmp/l0.st /tmp/l1.st && echo "$m [$mode]: tiles == slots" | tee -a $L || echo "$m [$mode]: DIFFER" | tee -a $L
  done
done
echo "bits $(el) s" | tee -a $L
M=/tmp/moe/q4; mkdir -p /tmp/moe
build/mtplx synth --preset qwen35-35b-a3b-10l --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
echo "synth $(el) s" | tee -a $L
for q in 4 0 4 0; do
  [ $(el) -gt 280 ] && break
  echo "SLOTS=$q: $(MTPLX_CUDA_MOE_SLOTS=$q timeout 60 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $M 2>&1 | grep -E 'row forward|tok/s|membw' | tr -s ' ' | tr '\n' ' ')" | tee -a $L
done
echo "bench $(el) s" | tee -a $L
for mode in "--step" ""; do
  [ $(el) -gt 380 ] && break
  m=$M
  MTPLX_CUDA_MOE_SLOTS=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l0.st > /tmp/e0 2>&1 || { echo "$m [$mode] slots 0 failed: $(tail -1 /tmp/e0)" | tee -a $L; continue; }
  build/mtplx logits --model $m --tokens $T $mode --out /tmp/l1.st > /tmp/e1 2>&1 || { echo "$m [$mode] failed: $(tail -1 /tmp/e1)" | tee -a $L; continue; }
  cmp -s /tmp/l0.st /tmp/l1.st && echo "$m [$mode]: tiles == slots" | tee -a $L || echo "$m [$mode]: DIFFER" | tee -a $L
done
[ $(el) -lt 400 ] && CUDA_MODULE_LOADING=EAGER MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=1 timeout 60 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 41 --context 16 --model $M > $OUT/prof1.txt 2>&1
echo "done $(el) s" | tee -a $L
