#!/usr/bin/env bash
# NOT RUN (session 32's device time ran out). Two more launches off the 35B-A3B MoE layer, both meant to keep
# every bit: the router and shared-gate logits in one matmul_n launch when the two weights share a kind
# (MTPLX_CUDA_MOE_GATE1; cuda_mma_sk.cu's jobs keep each weight's solo split), and the route with up to 8 warps
# a row (k_moe_route_w, MTPLX_CUDA_MOE_ROUTE_W: each warp's top K of its share, then the top K of the
# candidates by the same total order; call 4's ncu had the one-warp route at 10 us). Apply first:
#   git apply bench/results/2026-12-06-gpu-s32/moe-route.patch
# (and, to measure in the same call, moe-slot-ilp.patch on top: the per-slot kernels' two chunk iterations a lane
#  unrolled so their loads go out together, and k_moe_gu_slot reading its expert before the staging barrier;
#  same sums in the same order. Compare it by building twice, or against call 5's 1.26 ms 1-row step.)
# Then: bits (test_backend_cuda; logits of the MoE goldens — deepseek_v3 has the grouped sigmoid router — and of
# the 35B-A3B-10l q4 synth with both knobs 0 against the default), speed alternated, then the whole gpu-test.
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
    MTPLX_CUDA_MOE_GATE1=0 MTPLX_CUDA_MOE_ROUTE_W=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l0.st > /dev/null 2>&1
    build/mtplx logits --model $m --tokens $T $mode --out /tmp/l1.st > /dev/null 2>&1
    cmp -s /tmp/l0.st /tmp/l1.st && echo "$m [$mode]: identical" | tee -a $L || echo "$m [$mode]: DIFFER" | tee -a $L
  done
done
for v in "1 1" "0 0" "1 0" "0 1" "1 1" "0 0"; do
  set -- $v
  echo "GATE1=$1 ROUTE_W=$2: $(MTPLX_CUDA_MOE_GATE1=$1 MTPLX_CUDA_MOE_ROUTE_W=$2 timeout 60 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $M 2>&1 | grep -E 'row forward|tok/s' | tr -s ' ' | tr '\n' ' ')" | tee -a $L
done
# the MoE shape's prefill (never measured on the GPU: 512-row chunks take the tiled CUDA-core kernels, each expert
# read once per 4 rows)
[ $(el) -lt 380 ] && echo "prefill 4096: $(timeout 120 build/mtplx bench --device cuda --prefill 4096 --model $M 2>&1 | tail -1)" | tee -a $L
# where the per-slot kernels wait now (latency-bound after staging: DRAM 11-19% of peak in call 5)
[ $(el) -lt 400 ] && timeout 120 ncu --clock-control none -k regex:"k_moe_gu_slot|k_moe_down_slots" --launch-skip 20 \
  --launch-count 2 --section WarpStateStats --section SourceCounters --section Occupancy --section MemoryWorkloadAnalysis \
  build/mtplx bench --device cuda --model $M --verify-cost --rows 1 --reps 3 --context 16 > $OUT/ncu-slots.txt 2>&1
echo "done $(el) s" | tee -a $L
# if identical and faster: add both knobs to gpu-test's check 8c (logits with them 0 against the default), then
# run the whole scripts/gpu-test.sh (carry build/device-debs).
