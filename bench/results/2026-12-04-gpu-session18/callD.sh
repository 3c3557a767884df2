#!/usr/bin/env bash
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1
if [ ! -f /tmp/sm/config.json ]; then mkdir -p /tmp/smc && cp .gpu-lead/s18/small-config.json /tmp/smc/config.json; build/mtplx synth --config /tmp/smc/config.json --out /tmp/sm --quiet; fi
MTPLX_CUDA_GEMM_MIN=48 timeout 60 build/mtplx bench --device cuda --model /tmp/sm --verify-cost --rows 32 --reps 5 --context 256 --logits-top 20 > $OUT/vc-first.txt 2>&1
for r in 1 2; do for g in 48 16 8; do
  echo "== GEMM_MIN=$g: $(MTPLX_CUDA_GEMM_MIN=$g timeout 60 build/mtplx bench --device cuda --model /tmp/sm --verify-cost --rows 32 --reps 5 --context 256 --logits-top 20 2>&1 | grep -E ' (1|4|8|16|24|32)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|')" | tee -a $L
done; done
echo "total $(el) s" | tee -a $L
