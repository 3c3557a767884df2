#!/usr/bin/env bash
# session 18 call G: gpu-test on the final HEAD; prefill 48..128 rows, small-shape random model and the
# embedded model, new GEMM rule vs the old (MTPLX_CUDA_GEMM_MIN=48)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
mkdir -p /tmp/smc && cp .gpu-lead/s18/small-config.json /tmp/smc/config.json
build/mtplx synth --config /tmp/smc/config.json --out /tmp/sm --quiet > $OUT/synth.txt 2>&1
for m in /tmp/sm models/qwen35-tiny-code; do for n in 48 64 96 128; do
  echo "== $m prefill $n new / GEMM_MIN=48: $(build/mtplx bench --device cuda --model $m --prefill $n --reps 3 2>&1 | tail -1 | sed 's/.*= //') / $(MTPLX_CUDA_GEMM_MIN=48 build/mtplx bench --device cuda --model $m --prefill $n --reps 3 2>&1 | tail -1 | sed 's/.*= //')" | tee -a $L
done; done
echo "bench $(el) s" | tee -a $L
timeout $(( 400 - $(el) )) bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | cut -c1-2000 | tee -a $L
