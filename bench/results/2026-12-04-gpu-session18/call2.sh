#!/usr/bin/env bash
# session 18 call 2: one wait per draft step / verify (HEAD) vs the two waits before (onewait.patch
# reversed): embedded bench D0 / D3 alternated, step tables, graphs on; test_generate on CUDA
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_generate > $OUT/build0.txt 2>&1 || { tail -30 $OUT/build0.txt; exit 1; }
cp build/mtplx /tmp/mtplx-new
echo "test_generate (new, cuda): $(build/tests/test_generate 2>&1 | tail -1)" | tee -a $L
patch -R -p1 < .gpu-lead/s18/onewait.patch > /dev/null
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build1.txt 2>&1 || { tail -30 $OUT/build1.txt; exit 1; }
cp build/mtplx /tmp/mtplx-old
echo "builds $(el) s" | tee -a $L
B="bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8"
for r in 1 2 3; do
  for v in old new; do
    echo "== $v: $(/tmp/mtplx-$v $B 2>&1 | grep -E '^(AR|D3) ' | awk '{print $1, $2, "verify", $7, "draft", $6}' | tr '\n' '|')" | tee -a $L
  done
done
for v in old new; do
  MTPLX_CUDA_STEPS=1 /tmp/mtplx-$v $B > $OUT/steps-$v.txt 2>&1
done
for r in 1 2; do
  echo "== new GRAPH=1: $(MTPLX_CUDA_GRAPH=1 /tmp/mtplx-new $B 2>&1 | grep -E '^(AR|D3) ' | awk '{print $1, $2, "verify", $7, "draft", $6}' | tr '\n' '|')" | tee -a $L
done
echo "done $(el) s" | tee -a $L
