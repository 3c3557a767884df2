#!/usr/bin/env bash
# Session 33, call 2: session 32's call6.sh with both patches, built twice so the slot-ILP patch is measured
# against the route patch alone in the same call. Bits: logits with MTPLX_CUDA_MOE_GATE1=0 MTPLX_CUDA_MOE_ROUTE_W=0
# against the default (both binaries), and the two binaries against each other; test_backend_cuda on both.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
{ git apply bench/results/2026-12-06-gpu-s32/moe-route.patch || patch -p1 < bench/results/2026-12-06-gpu-s32/moe-route.patch; } || { echo "route patch failed" | tee -a $L; exit 1; }
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
cp build/mtplx /tmp/m-route; cp build/tests/test_backend_cuda /tmp/t-route
{ git apply bench/results/2026-12-06-gpu-s32/moe-slot-ilp.patch || patch -p1 < bench/results/2026-12-06-gpu-s32/moe-slot-ilp.patch; } || { echo "ilp patch failed" | tee -a $L; exit 1; }
scripts/device-build.sh build CUDA=1 build/mtplx build/tests/test_backend_cuda >> $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
cp build/mtplx /tmp/m-ilp; cp build/tests/test_backend_cuda /tmp/t-ilp
echo "built $(el) s" | tee -a $L
for b in route ilp; do timeout 60 /tmp/t-$b > $OUT/tbc-$b.txt 2>&1; echo "test_backend_cuda $b rc=$? $(tail -1 $OUT/tbc-$b.txt)" | tee -a $L; done
M=/tmp/moe/q4; mkdir -p /tmp/moe
/tmp/m-route synth --preset qwen35-35b-a3b-10l --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
T=11,48,85,122,159,196,233,250,7,99,201,3
for m in tests/data/goldens/qwen3_5_moe tests/data/goldens-extra/qwen3_5_moe_b tests/data/goldens/deepseek_v3 $M; do
  for mode in "--step" ""; do
    MTPLX_CUDA_MOE_GATE1=0 MTPLX_CUDA_MOE_ROUTE_W=0 /tmp/m-route logits --model $m --tokens $T $mode --out /tmp/l0.st > /dev/null 2>&1
    /tmp/m-route logits --model $m --tokens $T $mode --out /tmp/l1.st > /dev/null 2>&1
    /tmp/m-ilp logits --model $m --tokens $T $mode --out /tmp/l2.st > /dev/null 2>&1
    MTPLX_CUDA_MOE_SLOTS=0 /tmp/m-ilp logits --model $m --tokens $T $mode --out /tmp/l3.st > /dev/null 2>&1
    r="$m [$mode]:"
    for k in 1 2 3; do cmp -s /tmp/l0.st /tmp/l$k.st && r="$r l$k=same" || r="$r l$k=DIFFER"; done
    echo "$r" | tee -a $L
  done
done
bn() { timeout 60 "$@" bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $M 2>&1 | grep -E 'row forward|tok/s' | tr -s ' ' | tr '\n' ' '; }
for r in 1 2; do
  echo "base(G0 R0): $(MTPLX_CUDA_MOE_GATE1=0 MTPLX_CUDA_MOE_ROUTE_W=0 bn /tmp/m-route)" | tee -a $L
  echo "route: $(bn /tmp/m-route)" | tee -a $L
  echo "route+ilp: $(bn /tmp/m-ilp)" | tee -a $L
  echo "G1 R0: $(MTPLX_CUDA_MOE_ROUTE_W=0 bn /tmp/m-route)" | tee -a $L
done
[ $(el) -lt 380 ] && echo "prefill 4096: $(timeout 120 /tmp/m-ilp bench --device cuda --prefill 4096 --model $M 2>&1 | tail -1)" | tee -a $L
[ $(el) -lt 420 ] && timeout 120 ncu --clock-control none -k regex:"k_moe_gu_slot|k_moe_down_slots|k_moe_route" --launch-skip 20 \
  --launch-count 3 --section WarpStateStats --section SourceCounters --section Occupancy --section MemoryWorkloadAnalysis \
  /tmp/m-ilp bench --device cuda --model $M --verify-cost --rows 1 --reps 3 --context 16 > $OUT/ncu-slots.txt 2>&1
echo "done $(el) s" | tee -a $L
