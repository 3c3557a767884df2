#!/usr/bin/env bash
# session 12 call 2 (lead): gpu-test on the new decode attention (cache rows passed between lanes, float4
# value rows, four partial sums a key) and the F16-templated q kernels; then the same benchmarks on this
# tree and on HEAD's two files (.gpu-lead/base, built in /tmp/base), alternated
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
(timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth27.txt 2>&1 || true) &
timeout 330 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
mkdir -p /tmp/base && tar --exclude=./build -cf - . | tar -xf - -C /tmp/base && mkdir -p /tmp/base/build && cp -r build/device-debs /tmp/base/build/
cp .gpu-lead/base/cuda_seq.cu .gpu-lead/base/cuda_mma_sk.cu /tmp/base/src/backend/cuda/
(cd /tmp/base && scripts/device-build.sh build build/mtplx CUDA=1 > /tmp/base-build.txt 2>&1) || { tail -20 /tmp/base-build.txt; }
echo "base build $(el) s" | tee -a $L
build/mtplx synth --config .gpu-lead/small-config.json --out /tmp/sb --quiet
build/mtplx synth --config .gpu-lead/small-config.json --dtype q4 --out /tmp/sq --quiet
wait; cat /tmp/synth27.txt | tail -2
vc() { timeout 90 $1 bench --device cuda --model $2 --verify-cost --rows 8 --reps 5 --context $3 --logits-top 20 2>&1 | grep -E '^ +(1|2|4|8)-row' | awk '{printf "%s %s  ", $1, $3}'; }
for r in 1 2; do for b in build/mtplx /tmp/base/build/mtplx; do
  echo "== $b emb: $(timeout 60 $b bench --device cuda --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"
  echo "== $b sb 512: $(vc $b /tmp/sb 512)"
  echo "== $b sb 4000: $(vc $b /tmp/sb 4000)"
  echo "== $b sq 512: $(vc $b /tmp/sq 512)"
done; done | tee -a $L
echo "small benches $(el) s" | tee -a $L
if [ -f /tmp/q27/config.json ]; then for r in 1 2; do for b in build/mtplx /tmp/base/build/mtplx; do
  echo "== $b q27: $(timeout 90 $b bench --device cuda --model /tmp/q27 --membw --verify-cost --rows 4 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E 'row forward|AR decode|membw|bandwidth' | tr '\n' ' ' | cut -c1-400)"
done; done | tee -a $L; fi
echo "27B $(el) s" | tee -a $L
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel -k regex:attn"
timeout 60 $NCU build/mtplx bench --device cuda --model /tmp/sb --verify-cost --rows 1 --reps 3 --context 512 --logits-top 20 > $OUT/ncu-attn-new.txt 2>&1
timeout 60 $NCU /tmp/base/build/mtplx bench --device cuda --model /tmp/sb --verify-cost --rows 1 --reps 3 --context 512 --logits-top 20 > $OUT/ncu-attn-base.txt 2>&1
echo "total $(el) s" | tee -a $L
