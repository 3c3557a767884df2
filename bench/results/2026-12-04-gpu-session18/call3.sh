#!/usr/bin/env bash
# session 18 call 3: v0 (bfc3ade: two waits per draft / verify), v1 (one wait: onewait.patch), v2 (HEAD:
# draft rows kept on the device, batched trunk head first: keep.patch); embedded bench alternated; then
# gpu-test on v2
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build2.txt 2>&1 || { tail -30 $OUT/build2.txt; exit 1; }
cp build/mtplx /tmp/mtplx-v2
patch -R -p1 < .gpu-lead/s18/keep.patch > /dev/null && scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build1.txt 2>&1 && cp build/mtplx /tmp/mtplx-v1
patch -R -p1 < .gpu-lead/s18/onewait.patch > /dev/null && scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build0.txt 2>&1 && cp build/mtplx /tmp/mtplx-v0
patch -p1 < .gpu-lead/s18/onewait.patch > /dev/null && patch -p1 < .gpu-lead/s18/keep.patch > /dev/null
echo "builds $(el) s; tree back to HEAD: $(git diff --stat 2>/dev/null | tail -1)" | tee -a $L
B="bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8"
for r in 1 2 3; do
  for v in v0 v1 v2; do
    echo "== $v: $(/tmp/mtplx-$v $B 2>&1 | grep -E '^(AR|D3) ' | awk '{print $1, $2, "verify", $7, "draft", $6}' | tr '\n' '|')" | tee -a $L
  done
done
for r in 1 2; do
  echo "== v2 GRAPH=1: $(MTPLX_CUDA_GRAPH=1 /tmp/mtplx-v2 $B 2>&1 | grep -E '^(AR|D3) ' | awk '{print $1, $2, "verify", $7, "draft", $6}' | tr '\n' '|')" | tee -a $L
done
echo "== v2 greedy D3 text = v0: $(/tmp/mtplx-v2 run --device cuda --prompt 'def fib(n):' --max-tokens 96 --temperature 0 --depth 3 --quiet 2>/dev/null | md5sum) $(/tmp/mtplx-v0 run --device cuda --prompt 'def fib(n):' --max-tokens 96 --temperature 0 --depth 3 --quiet 2>/dev/null | md5sum)" | tee -a $L
echo "== v2 T0.6 seed 5 D3 text = v0: $(/tmp/mtplx-v2 run --device cuda --prompt 'def fib(n):' --max-tokens 96 --temperature 0.6 --seed 5 --depth 3 --quiet 2>/dev/null | md5sum) $(/tmp/mtplx-v0 run --device cuda --prompt 'def fib(n):' --max-tokens 96 --temperature 0.6 --seed 5 --depth 3 --quiet 2>/dev/null | md5sum)" | tee -a $L
echo "bench $(el) s" | tee -a $L
timeout $(( 540 - $(el) )) bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | cut -c1-2000 | tee -a $L
