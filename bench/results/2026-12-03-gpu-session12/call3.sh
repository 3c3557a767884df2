#!/usr/bin/env bash
# session 12 call 3 (lead): gpu-test on the decode attention's second step (a key scored by four lanes,
# 8 warps a block); then this tree against HEAD's two files (.gpu-lead/base, built in /tmp/base),
# alternated: ncu of the attention kernels, small-shape verify costs, the embedded model's AR / D3, and
# 27B-16l q4 and bf16 AR + verify
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
timeout 330 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
(timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth27.txt 2>&1;
 timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/b27 --quiet >> /tmp/synth27.txt 2>&1) &
mkdir -p /tmp/base && tar --exclude=./build -cf - . | tar -xf - -C /tmp/base && mkdir -p /tmp/base/build && cp -r build/device-debs /tmp/base/build/
cp .gpu-lead/base/cuda_seq.cu .gpu-lead/base/cuda_mma_sk.cu /tmp/base/src/backend/cuda/
(cd /tmp/base && scripts/device-build.sh build build/mtplx CUDA=1 > /tmp/base-build.txt 2>&1) || { tail -20 /tmp/base-build.txt; }
echo "base build $(el) s" | tee -a $L
build/mtplx synth --config .gpu-lead/small-config.json --out /tmp/sb --quiet
build/mtplx synth --config .gpu-lead/small-config.json --dtype q4 --out /tmp/sq --quiet
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel -k regex:attn"
for b in build/mtplx /tmp/base/build/mtplx; do n=$([ $b = build/mtplx ] && echo new || echo base)
  timeout 60 $NCU $b bench --device cuda --model /tmp/sb --verify-cost --rows 8 --reps 2 --context 512 --logits-top 20 > $OUT/ncu-attn-$n.txt 2>&1
  timeout 60 $NCU $b bench --device cuda --model /tmp/sb --verify-cost --rows 1 --reps 2 --context 4000 --logits-top 20 > $OUT/ncu-attn4k-$n.txt 2>&1
done
echo "ncu $(el) s" | tee -a $L
vc() { timeout 90 $1 bench --device cuda --model $2 --verify-cost --rows 8 --reps 5 --context $3 --logits-top 20 2>&1 | grep -E '^ +(1|2|4|8)-row' | awk '{printf "%s %s  ", $1, $3}'; }
for r in 1 2 3; do for b in build/mtplx /tmp/base/build/mtplx; do
  echo "== $b emb: $(timeout 60 $b bench --device cuda --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"
  [ $r = 3 ] && continue
  echo "== $b sb 512: $(vc $b /tmp/sb 512)"
  echo "== $b sb 4000: $(vc $b /tmp/sb 4000)"
  echo "== $b sq 512: $(vc $b /tmp/sq 512)"
done; done | tee -a $L
echo "small benches $(el) s" | tee -a $L
wait; tail -2 /tmp/synth27.txt | tee -a $L
for m in /tmp/q27 /tmp/b27; do [ -f $m/config.json ] || continue; for b in build/mtplx /tmp/base/build/mtplx; do
  echo "== $b $m: $(timeout 100 $b bench --device cuda --model $m --membw --verify-cost --rows 4 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E 'row forward|AR decode|GB/s' | tr -s ' ' | tr '\n' '|' | cut -c1-500)"
done; done | tee -a $L
echo "total $(el) s" | tee -a $L
